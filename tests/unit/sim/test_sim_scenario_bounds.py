"""Scenario sizes are bounded before anything is built, and the YAML is read strictly.

Before: ``generate.count: 10**9`` drew jobs for hours, ``nodeGroups[].count: 10**9`` and
``replicas: 10**9`` ended in MemoryError, 5,000 nested ``[`` in RecursionError, a key
given twice silently kept its last value, and 10,000 explicit jobs or queues were
checked for duplicates pairwise. Each is now one ``InvalidInput`` naming the field and
the limit, raised in well under a second.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from simkit import document, job

from federation.domain.errors import InvalidInput
from federation.sim.scenario import MAX_JOBS, MAX_NODES, MAX_PODS, load_scenario, parse_scenario
from federation.wire.limits import DEFAULT_LIMITS

GENERATE = {"count": 10, "arrivalPerMinute": 6, "gpusPerJob": {8: 1.0}}


def _group(count: int | str, **extra: Any) -> dict[str, Any]:
    return {"namePattern": "g{i}", "count": count, "allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}, **extra}


def hypernode_with(name: str, selector: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"tier": 1, "members": [{"type": "Node", "selector": selector}]}}


def _refused(doc: dict[str, Any]) -> InvalidInput:
    started = time.monotonic()
    with pytest.raises(InvalidInput) as info:
        parse_scenario(doc)
    assert time.monotonic() - started < 5, "refused only after building the scenario"
    return info.value


@pytest.mark.parametrize(("doc", "path", "rule"), [
    pytest.param(document(generate={**GENERATE, "count": 10**9}, queues=[{"name": "q"}]), "generate.count",
                 f"1000000001 is over the limit of {MAX_JOBS} jobs", id="a billion generated jobs"),
    pytest.param(document(clusters=[{"name": "big", "nodeGroups": [_group(10**9)]}]),
                 "clusters[0].nodeGroups[0].count",
                 f"over the limit of {DEFAULT_LIMITS.max_snapshot_nodes} nodes per cluster", id="a billion nodes"),
    pytest.param(document(clusters=[{"name": f"c{i}", "nodeGroups": [_group(20_000, namePattern=f"c{i}-{{i}}")]}
                                    for i in range(3)]),
                 "clusters[2].nodeGroups[0].count", f"60000 is over the limit of {MAX_NODES} nodes in a scenario",
                 id="too many nodes over all clusters"),
    pytest.param(document(clusters=[{"name": "c", "nodeGroups": [_group(20_000, labels={
        f"k{i}": "v" for i in range(200)})]}]), "clusters[0].nodeGroups[0].labels",
                 "4000000 is over the limit of 2000000 node labels", id="labels copied to every node"),
    pytest.param(document(clusters=[{"name": "c", "nodeGroups": [_group(1, labels={
        f"k{i}": "v" for i in range(513)})]}]), "clusters[0].nodeGroups[0].labels",
                 "513 is over the limit of 512 labels per node", id="too many labels on a node"),
    pytest.param(document(jobs=[job("j", pods=10**9)]), "jobs[0].tasks[0].replicas",
                 "1000000000 is over the limit of 10000 replicas per task", id="a billion replicas"),
    pytest.param(document(jobs=[{**job("j"), "tasks": [job("j", pods=6000)["tasks"][0] | {"name": f"t{i}"}
                                                        for i in range(2)]}]),
                 "jobs[0].tasks", "12000 is over the limit of 10000 replicas per job", id="replicas summed per job"),
    pytest.param(document(jobs=[job(f"j{i}", pods=10_000) for i in range(201)]), "jobs",
                 f"2010000 is over the limit of {MAX_PODS} pods", id="pods over all jobs"),
    pytest.param(document(generate={**GENERATE, "gpusPerJob": {10**12: 1.0}}, queues=[{"name": "q"}]),
                 f"generate.gpusPerJob.{10**12}", "125000000000 is over the limit of 10000 pods per generated job",
                 id="a generated job of a trillion GPUs"),
    pytest.param(document(jobs=[], generate={**GENERATE, "count": 90_000, "gpusPerJob": {8 * 10_000: 1.0}}),
                 "generate.count", f"900000000 is over the limit of {MAX_PODS} pods", id="generated pods"),
    pytest.param(document(clusters=[{"name": "c", "nodeGroups": [_group(20_000, namePattern="n{i}")], "hyperNodes": [
        hypernode_with(f"h{i}", {"regexMatch": {"pattern": f"^n{i}$"}}) for i in range(501)]}]),
                 "clusters[0].hyperNodes", "10020000 is over the limit of 10000000 node matches",
                 id="a regex per HyperNode over a big cluster"),
    pytest.param(document(events=[{"at": 1, "kind": "nodeFail", "target": "n0"}] * 100_001), "events",
                 "100001 is over the limit of 100000 events", id="too many events"),
])
def test_sizes_that_would_take_hours_or_gigabytes_are_refused_before_any_work(
        doc: dict[str, Any], path: str, rule: str) -> None:
    refused = _refused(doc)
    assert refused.path == path and rule in refused.rule, refused


@pytest.mark.parametrize(("doc", "path", "rule"), [
    pytest.param(document(jobs=[job("j", priority=10**30)]), "jobs[0].priority", "must be between -2147483648",
                 id="a job priority past int32"),
    pytest.param(document(queues=[{"name": "q", "priority": -(10**30)}]), "queues[0].priority", "must be between",
                 id="a queue priority past int32"),
    pytest.param(document(generate={**GENERATE, "priorityMix": {2**31: 1.0}}), f"generate.priorityMix.{2**31}",
                 "must be between", id="a generated priority past int32"),
    pytest.param(document(commModel={"slowdownByTier": {"9" * 5000: 1.0}}), "commModel.slowdownByTier." + "9" * 5000,
                 "more than 19 digits", id="a 5000-digit tier given as a string"),
])
def test_numbers_the_demo_sends_or_python_cannot_read_are_refused_naming_the_field(
        doc: dict[str, Any], path: str, rule: str) -> None:
    """Priorities reach the service as int32 in the demo (``Value out of range`` traceback);
    ``int()`` of a 5000-digit string raised its own ValueError (a traceback too)."""
    refused = _refused(doc)
    assert refused.path == path and rule in refused.rule, refused


def test_a_negative_count_does_not_offset_a_huge_one_and_a_wrong_type_is_the_strict_readers() -> None:
    refused = _refused(document(clusters=[{"name": "c", "nodeGroups": [_group(-10**9), _group(10**9)]}]))
    assert refused.path == "clusters[0].nodeGroups[1].count" and "over the limit" in refused.rule
    refused = _refused(document(clusters=[{"name": "c", "nodeGroups": [_group("many")]}]))
    assert refused.path == "clusters[0].nodeGroups[0].count" and "must be an integer" in refused.rule


def test_ten_thousand_jobs_and_a_deep_queue_chain_load_in_linear_time() -> None:
    queues = [{"name": "q"}, *({"name": f"q{i}", "parent": f"q{i - 1}" if i else "q"} for i in range(5_000))]
    doc = document(jobs=[job(f"j{i}", pods=1, gpus=1) for i in range(10_000)], queues=queues)
    started = time.monotonic()
    loaded = parse_scenario(doc)
    assert len(loaded.jobs) == 10_000 and len(loaded.queues) == 5_001
    assert time.monotonic() - started < 20
    with pytest.raises(InvalidInput) as info:
        parse_scenario(document(queues=[{"name": "q", "parent": "r"}, {"name": "r", "parent": "q"}]))
    assert info.value.path == "queues[0].parent" and "cycle" in info.value.rule


@pytest.mark.parametrize(("text", "path", "rule"), [
    pytest.param(yaml.safe_dump(document()) + "name: again\n", "documents[0]", "duplicate key 'name'",
                 id="a key given twice"),
    pytest.param("name: deep\nclusters: " + "[" * 5000 + "]" * 5000 + "\n", "documents[0]", "nested too deep",
                 id="5000 nested lists"),
    pytest.param("name: x\nseed: " + "9" * 5000 + "\n", "documents[0]", "4300 digits", id="a 5000-digit seed"),
    pytest.param(yaml.safe_dump(document()) + "---\n" + yaml.safe_dump(document()), "documents[1]",
                 "one YAML document, found 2", id="two documents"),
    pytest.param("# nothing here\n", "", "must be a YAML mapping, got nothing", id="an empty file"),
])
def test_the_yaml_is_read_strictly(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_scenario(text)
    assert info.value.path == path and rule in info.value.rule, info.value


def test_a_path_that_is_neither_a_file_nor_a_builtin_names_the_flag() -> None:
    with pytest.raises(InvalidInput) as info:
        load_scenario("scenarios/typo.yaml", source="--scenario")
    assert info.value.path == "--scenario" and "no such file or built-in scenario (built-in: " in info.value.rule
