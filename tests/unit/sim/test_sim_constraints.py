"""Scenario node constraints (issue 11) and ``bench --placements``: every pod of every policy
on a node its task allows, one JSON line per start (restarts included)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from simkit import document, job, scenario, two_leaf_cluster

from federation.domain.errors import InvalidInput
from federation.sim.bench import DEFAULT_POLICIES, run_bench
from federation.sim.placements import disallowed
from federation.sim.scenario import load_scenario
from federation.sim.simulator import Start

H100 = {"nvidia.com/gpu.product": "H100"}


def models() -> dict[str, Any]:
    """Cluster c1 of simkit with n0, n1 H100 and n2, n3 A100 (n3 tainted)."""
    c = two_leaf_cluster()
    node = c["nodeGroups"][0]["allocatable"]
    c["nodeGroups"] = [
        {"namePattern": "n{i}", "count": 2, "allocatable": node, "labels": H100},
        {"namePattern": "n2", "count": 1, "allocatable": node, "labels": {"nvidia.com/gpu.product": "A100"}},
        {"namePattern": "n3", "count": 1, "allocatable": node, "labels": {"nvidia.com/gpu.product": "A100"},
         "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
    ]
    return c


def pinned(name: str, at: float = 0.0, **task: Any) -> dict[str, Any]:
    out = job(name, pods=1, at=at, duration=100.0)
    out["tasks"][0].update(task)
    return out


def test_task_constraints_and_annotations_are_read() -> None:
    s = scenario(clusters=[models()], jobs=[
        pinned("a", nodeSelector=H100, minAvailable=1,
               tolerations=[{"key": "dedicated", "operator": "Exists"}],
               affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]}]}}}),
        {**pinned("b"), "annotations": {"federation.io/topology-wait": "30m"}},
    ])
    a, b = (j.job for j in s.jobs)
    (c,) = a.node_constraints
    assert c.selector == (("nvidia.com/gpu.product", "H100"),) and c.required and c.tolerations
    assert a.tasks[0].min_available == 1
    assert b.topology_wait_seconds == 1800.0
    tainted = next(n for cl in s.clusters for n in cl.nodes if n.name == "n3")
    assert tainted.taints[0].key == "dedicated"


@pytest.mark.parametrize(("jobs", "path"), [
    ([pinned("a", nodeSelectr=H100)], "jobs[0].tasks[0].nodeSelectr"),
    ([{**pinned("a"), "annotations": {"volcano.sh/whatever": "1"}}],
     "jobs[0].annotations[volcano.sh/whatever]"),
    ([pinned("a", affinity={"podAffinity": {"x": 1}})], "jobs[0].tasks[0].affinity.podAffinity"),
    ([pinned("a", tolerations=[{"key": "k", "operator": "Sometimes"}])], "jobs[0].tasks[0].tolerations[0].operator"),
])
def test_unknown_or_unsupported_keys_stay_errors_with_their_path(jobs: list[dict[str, Any]], path: str) -> None:
    with pytest.raises(InvalidInput) as err:
        scenario(clusters=[models()], jobs=jobs)
    assert err.value.path == path, err.value


def test_a_node_group_taint_effect_is_checked() -> None:
    c = models()
    c["nodeGroups"][2]["taints"][0]["effect"] = "Never"
    with pytest.raises(InvalidInput) as err:
        scenario(clusters=[c])
    assert err.value.path == "clusters[0].nodeGroups[2].taints[0].effect"


def test_bench_placements_lines_every_policy_honours_the_constraints(tmp_path: Path) -> None:
    doc = document(clusters=[models()], jobs=[
        pinned("h1", nodeSelector=H100), pinned("h2", at=1.0, nodeSelector=H100),
        pinned("a1", at=2.0, nodeSelector={"nvidia.com/gpu.product": "A100"}),
        pinned("t1", at=3.0, nodeSelector={"nvidia.com/gpu.product": "A100"},
               tolerations=[{"key": "dedicated", "operator": "Exists"}]),
    ], events=[{"at": 50.0, "kind": "podFail", "target": "h1"}])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "placements.jsonl"
    screen = io.StringIO()
    run_bench(path, None, None, Console(file=screen, width=200), placements_out=out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert {line["policy"] for line in lines} == set(DEFAULT_POLICIES)
    for line in lines:
        assert set(line) == {"policy", "job", "cluster", "hypernode", "tier", "at", "pods"}
        node = {"h1": {"n0", "n1"}, "h2": {"n0", "n1"}, "a1": {"n2"}, "t1": {"n2", "n3"}}[line["job"]]
        assert {p["node"] for p in line["pods"]} <= node, line
    for policy in DEFAULT_POLICIES:
        starts = [line for line in lines if line["policy"] == policy]
        assert [line["at"] for line in starts if line["job"] == "h1"] == [0.0, 50.0]  # the restart is a start
    assert "0 on a node their task does not allow" in screen.getvalue()


def test_the_check_reports_a_pod_on_a_node_its_task_excludes() -> None:
    from federation.domain.plans import Placement, PodAssignment
    s = load_scenario(yaml.safe_dump(document(clusters=[models()], jobs=[pinned("h1", nodeSelector=H100)])))
    bad = Start(0.0, Placement("h1", "c1", "c1-l1", 1, (PodAssignment("worker", 0, "n2"),)))
    assert disallowed(s, [bad]) == ["h1 worker[0] on c1/n2 at 0s"]


def test_queue_parents_are_read_and_must_exist() -> None:
    s = scenario(queues=[{"name": "eng"}, {"name": "q", "parent": "eng"}, {"name": "ops", "parent": "root"}])
    assert [(q.name, q.parent) for q in s.queues] == [("eng", None), ("q", "eng"), ("ops", None)]
    with pytest.raises(InvalidInput) as err:
        scenario(queues=[{"name": "q", "parent": "nowhere"}])
    assert err.value.path == "queues[0].parent"
