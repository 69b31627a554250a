"""Scenario loader: the contract's keys, strictness with paths, trees, and the seeded generator."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from simkit import SHARED, document, hypernode, job, two_leaf_cluster

from federation.domain.errors import InvalidInput
from federation.domain.resources import CPU, GPU, MEMORY
from federation.sim.scenario import builtin_scenarios, load_scenario, parse_scenario


def load(doc: dict[str, Any]) -> Any:
    return parse_scenario(yaml.safe_load(yaml.safe_dump(doc)))


@dataclass
class Bad:
    id: str
    mutate: Callable[[dict[str, Any]], None]
    path: str
    rule: str


def _second_cluster_typo(d: dict[str, Any]) -> None:
    second = two_leaf_cluster("c2", prefix="m")
    second["nodeGroups"][0]["alocatable"] = second["nodeGroups"][0].pop("allocatable")
    d["clusters"].append(second)


def _hn(d: dict[str, Any], i: int) -> dict[str, Any]:
    hn: dict[str, Any] = d["clusters"][0]["hyperNodes"][i]
    return hn


BAD = [
    Bad("a typo in a nested key names its full path", _second_cluster_typo,
        "clusters[1].nodeGroups[0].alocatable", "unknown key"),
    Bad("an unknown top-level key", lambda d: d.update(job=[]), "job", "unknown key"),
    Bad("a malformed quantity", lambda d: d["clusters"][0]["nodeGroups"][0]["allocatable"].update(memory="8Gx"),
        "clusters[0].nodeGroups[0].allocatable.memory", "malformed quantity"),
    Bad("a negative quantity", lambda d: d["jobs"][0]["tasks"][0]["resources"].update(cpu="-1"),
        "jobs[0].tasks[0].resources.cpu", "negative"),
    Bad("an empty node group", lambda d: d["clusters"][0]["nodeGroups"][0].update(count=0),
        "clusters[0].nodeGroups[0].count", ">= 1"),
    Bad("a pattern without {i} for many nodes", lambda d: d["clusters"][0]["nodeGroups"][0].update(namePattern="n"),
        "clusters[0].nodeGroups[0].namePattern", "{i}"),
    Bad("a seed that is not an integer", lambda d: d.update(seed="abc"), "seed", "integer"),
    Bad("a missing cluster list", lambda d: d.pop("clusters"), "clusters", "required"),
    Bad("a duplicate cluster", lambda d: d["clusters"].append(two_leaf_cluster("c1", prefix="m")),
        "clusters[1].name", "duplicate cluster"),
    Bad("a node in two clusters", lambda d: d["clusters"].append(two_leaf_cluster("c2")),
        "clusters[1].nodeGroups", "also exists"),
    Bad("an unknown member HyperNode", lambda d: _hn(d, 2)["spec"]["members"][0]["selector"]["exactMatch"].update(
        name="ghost"), "clusters[0].hyperNodes[2].spec.members[0]", "unknown member HyperNode"),
    Bad("a child whose tier is not below its parent", lambda d: _hn(d, 0)["spec"].update(tier=2),
        "clusters[0].hyperNodes[0].spec.tier", "lower tier"),
    Bad("a cycle of HyperNodes", lambda d: d["clusters"][0]["hyperNodes"].extend(
        [hypernode("x", 3, children=["y"]), hypernode("y", 4, children=["x"])]),
        "clusters[0].hyperNodes[3]", "cycle"),
    Bad("a duplicate HyperNode name", lambda d: d["clusters"][0]["hyperNodes"].append(hypernode("c1-l0", 1, ["n0"])),
        "clusters[0].hyperNodes[3].metadata.name", "duplicate HyperNode"),
    Bad("two selectors on one member", lambda d: _hn(d, 0)["spec"]["members"][0]["selector"].update(
        regexMatch={"pattern": "n.*"}), "clusters[0].hyperNodes[0].spec.members[0].selector", "exactly one"),
    Bad("a regex selector on a HyperNode member", lambda d: _hn(d, 2)["spec"]["members"][0].update(
        selector={"regexMatch": {"pattern": "c1-.*"}}), "clusters[0].hyperNodes[2].spec.members[0].selector",
        "exactMatch"),
    Bad("an invalid regular expression", lambda d: _hn(d, 0)["spec"]["members"][0].update(
        selector={"regexMatch": {"pattern": "n[0-"}}),
        "clusters[0].hyperNodes[0].spec.members[0].selector.regexMatch.pattern", "regular expression"),
    Bad("a wrong HyperNode apiVersion", lambda d: _hn(d, 0).update(apiVersion="v1"),
        "clusters[0].hyperNodes[0].apiVersion", "topology.volcano.sh"),
    Bad("a HyperNode name that is not DNS", lambda d: _hn(d, 0)["metadata"].update(name="Leaf_0"),
        "clusters[0].hyperNodes[0].metadata.name", "DNS"),
    Bad("a job in an unknown queue", lambda d: d["jobs"][0].update(queue="nope"), "jobs[0].queue", "unknown queue"),
    Bad("minAvailable above the replicas", lambda d: d["jobs"][0].update(minAvailable=3),
        "jobs[0].minAvailable", "total replicas"),
    Bad("a task name that is not a DNS label", lambda d: d["jobs"][0]["tasks"][0].update(name="Worker"),
        "jobs[0].tasks[0].name", "DNS label"),
    Bad("an unknown topology mode", lambda d: d["jobs"][0].update(networkTopology={"mode": "medium"}),
        "jobs[0].networkTopology.mode", "hard or soft"),
    Bad("a zero tier limit", lambda d: d["jobs"][0].update(networkTopology={"highestTierAllowed": 0}),
        "jobs[0].networkTopology.highestTierAllowed", ">= 1"),
    Bad("affinity to an unknown cluster", lambda d: d["jobs"][0].update(clusterAffinity={"clusterNames": ["zz"]}),
        "jobs[0].clusterAffinity.clusterNames[0]", "unknown cluster"),
    Bad("a negative duration", lambda d: d["jobs"][0].update(durationSeconds=-5),
        "jobs[0].durationSeconds", "> 0"),
    Bad("a duplicate job", lambda d: d["jobs"].append(job("a")), "jobs[1].name", "duplicate job"),
    Bad("a queue weight of zero", lambda d: d["queues"][0].update(weight=0), "queues[0].weight", ">= 1"),
    Bad("a guarantee above the capability", lambda d: d["queues"][0].update(
        capability={"nvidia.com/gpu": "8"}, guarantee={"nvidia.com/gpu": "16"}), "queues[0].guarantee", "capability"),
    Bad("probabilities that do not sum to one", lambda d: d.update(generate={
        "count": 3, "arrivalPerMinute": 1, "gpusPerJob": {1: 0.5, 8: 0.4}}), "generate.gpusPerJob", "sum to 1"),
    Bad("a queue mix naming an unknown queue", lambda d: d.update(generate={
        "count": 3, "arrivalPerMinute": 1, "gpusPerJob": {1: 1.0}, "queueMix": {"nope": 1.0}}),
        "generate.queueMix.nope", "unknown queue"),
    Bad("a log-uniform range upside down", lambda d: d.update(generate={
        "count": 3, "arrivalPerMinute": 1, "gpusPerJob": {1: 1.0}, "durationSeconds": {"logUniform": [10, 1]}}),
        "generate.durationSeconds.logUniform", "high must be"),
    Bad("a fault on an unknown node", lambda d: d.update(events=[{"at": 5, "kind": "nodeFail", "target": "zz"}]),
        "events[0].target", "unknown node"),
    Bad("an unknown fault kind", lambda d: d.update(events=[{"at": 5, "kind": "meteor", "target": "n0"}]),
        "events[0].kind", "one of"),
    Bad("a slowdown that is not positive", lambda d: d.update(commModel={"slowdownByTier": {1: 0}}),
        "commModel.slowdownByTier.1", "> 0"),
    Bad("a taint with a bad effect", lambda d: d["clusters"][0].update(taints=[{"key": "k", "effect": "Maybe"}]),
        "clusters[0].taints[0].effect", "NoSchedule"),
]


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_scenarios_are_refused_with_the_path_and_rule(case: Bad) -> None:
    doc = document()
    case.mutate(doc)
    with pytest.raises(InvalidInput) as caught:
        load(doc)
    assert caught.value.path == case.path, str(caught.value)
    assert case.rule in caught.value.rule


def test_a_minimal_scenario_fills_the_documented_defaults() -> None:
    doc = document()
    doc.pop("queues")
    doc.pop("seed")
    doc.pop("commModel")
    doc["jobs"][0]["queue"] = "default"
    s = load(doc)
    assert [q.name for q in s.queues] == ["default"] and s.seed == 0
    assert s.slowdown(3) == 1.0
    (only,) = s.jobs
    assert only.job.gang_size == 2 and only.submit_at == 0.0 and only.job.network_topology is None


def test_hypernode_manifests_become_a_validated_tree() -> None:
    s = load(document())
    tree = s.clusters[0].empty.tree
    assert {d.name: (d.tier, sorted(d.nodes)) for d in tree.domains.values()} == {
        "c1-l0": (1, ["n0", "n1"]), "c1-l1": (1, ["n2", "n3"]), "c1-top": (2, ["n0", "n1", "n2", "n3"])}


def test_slowdown_uses_the_largest_tier_for_tiers_above_the_map() -> None:
    s = load(document(commModel={"slowdownByTier": {1: 1.0, 2: 1.3, 3: 2.0}}))
    assert [s.slowdown(t) for t in (1, 2, 3, 4, 9)] == [1.0, 1.3, 2.0, 2.0, 2.0]


def test_a_gang_on_one_node_runs_unslowed_and_its_tier_is_its_lowest_common_domain() -> None:
    s = load(document(commModel={"slowdownByTier": {1: 1.0, 2: 1.3}}))
    tree = s.clusters[0].empty.tree
    assert [tree.tier_holding(nodes) for nodes in (["n0"], ["n0", "n1"], ["n0", "n2"], ["elsewhere"])] == [1, 1, 2, 3]
    assert [s.gang_slowdown(1, 2), s.gang_slowdown(2, 2), s.gang_slowdown(2, 1)] == [1.0, 1.3, 1.0]


GENERATE = {
    "count": 200, "arrivalPerMinute": 6, "gpusPerJob": {1: 0.5, 8: 0.3, 16: 0.2}, "gpusPerPod": 8,
    "durationSeconds": {"logUniform": [60, 6000]}, "queueMix": {"q": 0.5, "r": 0.5},
    "priorityMix": {0: 0.9, 100: 0.1}, "topologyMix": {"hard": 0.5, "soft": 0.25, "none": 0.25},
    "highestTierAllowed": {1: 0.5, 2: 0.5},
}


def test_generated_jobs_follow_the_distributions_and_the_seed() -> None:
    doc = document(queues=[{"name": "q"}, {"name": "r", "weight": 2}], jobs=[], generate=GENERATE)
    first, again = load(doc), load(doc)
    assert first.jobs == again.jobs
    assert load({**doc, "seed": 8}).jobs != first.jobs
    assert len(first.jobs) == 200
    times = [j.submit_at for j in first.jobs]
    assert times == sorted(times) and 0 < times[-1] < 200 * 10 * 3  # mean gap 10 s
    for spec in first.jobs:
        (task,) = spec.job.tasks
        gpus = task.resources.get(GPU) * task.replicas
        assert gpus in (1, 8, 16) and task.replicas == math.ceil(gpus / 8)
        assert task.resources.get(CPU) == 8000 * task.resources.get(GPU)  # 64 cpu per 8 GPUs
        assert task.resources.get(MEMORY) == 64 * 2**30 * task.resources.get(GPU)
        assert 60 <= spec.duration_seconds <= 6000
    modes = {str(s.job.network_topology.mode) if s.job.network_topology else "none" for s in first.jobs}
    assert modes == {"hard", "soft", "none"}
    assert {s.job.queue for s in first.jobs} == {"q", "r"} and {s.job.priority for s in first.jobs} == {0, 100}


def test_explicit_and_generated_jobs_merge_by_submit_time() -> None:
    doc = document(jobs=[job("late", at=1e9)], generate={**GENERATE, "count": 5, "queueMix": {"q": 1.0}})
    s = load(doc)
    assert [j.job.name for j in s.jobs][-1] == "late" and len(s.jobs) == 6


def test_loading_from_a_path_text_or_builtin_name(tmp_path: Any) -> None:
    text = yaml.safe_dump(document())
    path = tmp_path / "toy.yaml"
    path.write_text(text)
    assert load_scenario(path) == load_scenario(str(path)) == load_scenario(text)
    with pytest.raises(InvalidInput):
        load_scenario("- just\n- a list\n")


@pytest.mark.parametrize("name", ["seed-8node", "fleet-4clusters"])
def test_the_shared_scenarios_load(name: str) -> None:
    s = load_scenario(SHARED / f"{name}.yaml")
    assert s.name == name and s.jobs


def test_every_builtin_scenario_loads() -> None:
    names = builtin_scenarios()
    assert {"demo", "fragmented", "fair-saturated", "burst-scale", "fleet-scale"} <= set(names)
    for name in names:
        assert load_scenario(name).name == name
