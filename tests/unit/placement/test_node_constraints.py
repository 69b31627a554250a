"""Node constraints of each task (nodeSelector, required node affinity, tolerations,
one-pod-per-node anti-affinity): a feasible and an infeasible case per rule, through our
greedy planner, ``plan()`` (CP-SAT) and every baseline; every plan checked by ``validate()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import pytest
from placement_builders import FAST, flat, hard, snap, tiered

from federation.domain import ClusterSnapshot, FederationSnapshot, Job, Node, Plan, Resources, Taint, Task
from federation.domain.errors import InvalidInput
from federation.domain.resources import CPU, GPU, MEMORY
from federation.domain.scheduling import template_for
from federation.placement import greedy_plan, plan, validate
from federation.placement.baselines import POLICIES

PLANNERS = ("greedy", "cpsat", "volcano-greedy", "karmada-spread", "armada-drf")
H100 = {"nvidia.com/gpu.product": "H100"}
A100 = {"nvidia.com/gpu.product": "A100"}
GIB = 1024**3


def run(planner: str, s: FederationSnapshot) -> Plan:
    if planner == "greedy":
        result = greedy_plan(s, FAST)
    elif planner == "cpsat":
        result = plan(s, FAST)
    else:
        result = POLICIES[planner](s, FAST, None)
    problems = validate(s, result)
    assert problems == [], problems
    return result


def labelled(cluster: ClusterSnapshot, labels: Mapping[int, Mapping[str, str]],
             taints: Mapping[int, tuple[Taint, ...]] | None = None) -> ClusterSnapshot:
    """``cluster`` with extra labels (and taints) on node i."""
    nodes = tuple(
        replace(n, labels={**n.labels, **labels.get(i, {})}, taints=(taints or {}).get(i, n.taints))
        for i, n in enumerate(cluster.nodes))
    return ClusterSnapshot(cluster.name, nodes, cluster.hypernodes, cluster.labels, cluster.taints)


def task(name: str, replicas: int, gpus: int = 8, **template: object) -> Task:
    res = Resources({GPU: gpus, CPU: 8_000 * gpus, MEMORY: 64 * GIB * gpus})
    return Task(name, replicas, res, template_json=template_for(**template))  # type: ignore[arg-type]  # keyword arguments passed through untyped


def job(name: str, *tasks: Task, **kwargs: object) -> Job:
    return Job(name, "q", tasks, **kwargs)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


def affinity(*terms: Sequence[tuple[str, str, Sequence[str]]]) -> dict[str, object]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": k, "operator": op, "values": list(v)} for k, op, v in term]}
        for term in terms]}}}


def one_per_node(app: str) -> dict[str, object]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}


def mixed() -> ClusterSnapshot:
    """Four 8-GPU nodes: n0, n1 H100; n2, n3 A100 (n3 also in zone b)."""
    return labelled(flat("a", [8, 8, 8, 8]), {0: {**H100, "zone": "a", "rank": "3"}, 1: {**H100, "zone": "a"},
                                              2: {**A100, "zone": "a", "rank": "1"}, 3: {**A100, "zone": "b"}})


@dataclass
class Case:
    id: str
    build: Callable[[], FederationSnapshot]
    nodes: set[str] | None  # the nodes the placement must use only (None: must stay pending)
    constraint: str = ""


CASES = [
    Case("selector-pins-the-gpu-model", lambda: snap([mixed()], [job("g", task("w", 2, node_selector=H100))]),
         {"a-n0", "a-n1"}),
    Case("selector-matches-no-node", lambda: snap(
        [mixed()], [job("g", task("w", 1, node_selector={"nvidia.com/gpu.product": "B200"}))]),
         None, "node-constraints"),
    Case("selector-matches-too-few-nodes", lambda: snap([mixed()], [job("g", task("w", 3, node_selector=H100))]),
         None, "unschedulable"),
    Case("affinity-in", lambda: snap([mixed()], [job("g", task("w", 2, affinity=affinity(
        [("nvidia.com/gpu.product", "In", ["A100"])])))]), {"a-n2", "a-n3"}),
    Case("affinity-notin-and-exists", lambda: snap([mixed()], [job("g", task("w", 1, affinity=affinity(
        [("zone", "NotIn", ["a"]), ("zone", "Exists", [])])))]), {"a-n3"}),
    Case("affinity-does-not-exist", lambda: snap([mixed()], [job("g", task("w", 2, affinity=affinity(
        [("rank", "DoesNotExist", [])])))]), {"a-n1", "a-n3"}),
    Case("affinity-gt", lambda: snap([mixed()], [job("g", task("w", 1, affinity=affinity(
        [("rank", "Gt", ["2"])])))]), {"a-n0"}),
    Case("affinity-lt-too-few", lambda: snap([mixed()], [job("g", task("w", 2, affinity=affinity(
        [("rank", "Lt", ["2"])])))]), None, "unschedulable"),
    Case("affinity-terms-are-ored", lambda: snap([mixed()], [job("g", task("w", 2, affinity=affinity(
        [("zone", "In", ["b"])], [("rank", "In", ["3"])])))]), {"a-n0", "a-n3"}),
    Case("affinity-matches-nothing", lambda: snap([mixed()], [job("g", task("w", 1, affinity=affinity(
        [("zone", "In", ["c"])])))]), None, "node-constraints"),
    Case("tasks-differ-master-on-a100-workers-on-h100", lambda: snap([mixed()], [job(
        "g", task("master", 1, gpus=1, node_selector=A100), task("worker", 2, node_selector=H100))]),
         {"a-n0", "a-n1", "a-n2", "a-n3"}),
    Case("per-task-toleration", lambda: snap(
        [labelled(flat("a", [8, 8]), {}, {0: (Taint("dedicated", "train"),), 1: (Taint("dedicated", "train"),)})],
        [job("g", task("w", 2, tolerations=[{"key": "dedicated", "operator": "Equal", "value": "train",
                                              "effect": "NoSchedule"}]))]), {"a-n0", "a-n1"}),
    Case("task-without-the-toleration-stays-out", lambda: snap(
        [labelled(flat("a", [8, 8, 8]), {}, {0: (Taint("dedicated", "train"),), 1: (Taint("dedicated", "train"),)})],
        [job("g", task("m", 1, gpus=1), task("w", 2, tolerations=[{"key": "dedicated", "operator": "Exists"}]))]),
         {"a-n0", "a-n1", "a-n2"}),
    Case("task-without-the-toleration-has-no-node", lambda: snap(
        [labelled(flat("a", [8]), {}, {0: (Taint("dedicated", "train"),)})],
        [job("g", task("m", 1, gpus=1), task("w", 1, tolerations=[{"key": "dedicated", "operator": "Exists"}]))]),
         None, "node-constraints"),
    Case("one-pod-per-node", lambda: snap([flat("a", [8, 8])], [job(
        "g", task("w", 2, gpus=2, affinity=one_per_node("w"), labels={"app": "w"}))]), {"a-n0", "a-n1"}),
    Case("one-pod-per-node-too-few-nodes", lambda: snap([flat("a", [8])], [job(
        "g", task("w", 2, gpus=2, affinity=one_per_node("w"), labels={"app": "w"}))]), None, "unschedulable"),
    Case("selector-inside-hard-tier1", lambda: snap(
        [labelled(tiered("a", [8, 8, 8, 8]), {0: H100, 2: H100, 3: H100})],
        [job("g", task("w", 2, node_selector=H100), network_topology=hard(1))]), {"a-n2", "a-n3"}),
]


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_node_constraints(case: Case, planner: str) -> None:
    result = run(planner, case.build())
    if case.nodes is None:
        assert result.placements == ()
        (why,) = result.unplaced
        assert why.constraint == case.constraint, why
        return
    (placed,) = result.placements
    assert {a.node for a in placed.pods} <= case.nodes, placed


def test_the_reason_names_the_constraint_and_the_clusters() -> None:
    s = snap([mixed(), replace(mixed(), name="b")],
             [job("g", task("w", 1, node_selector={"nvidia.com/gpu.product": "B200"}))])
    for planner in ("cpsat", "volcano-greedy"):
        (why,) = run(planner, s).unplaced
        assert why.unschedulable
        assert "nodeSelector nvidia.com/gpu.product=B200 (task w) matches no node in clusters a, b" in why.reason


def test_validate_refuses_a_pod_on_a_node_its_selector_excludes() -> None:
    s = snap([mixed()], [job("g", task("w", 1, node_selector=H100))])
    bad = greedy_plan(snap([mixed()], [job("g", task("w", 1, node_selector=A100))]), FAST)
    (p,) = bad.placements
    problems = validate(s, bad)
    assert any(f"on node {p.pods[0].node} that its nodeSelector nvidia.com/gpu.product=H100 excludes" in x
               for x in problems), problems


@pytest.mark.parametrize(("template", "path"), [
    ({"spec": {"topologySpreadConstraints": [{"maxSkew": 1}]}}, "template.spec.topologySpreadConstraints"),
    ({"spec": {"affinity": {"podAffinity": {"x": 1}}}}, "template.spec.affinity.podAffinity"),
    ({"spec": {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}}},
     "template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
    ({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near", "values": ["x"]}]}]}}}}},
     "template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].operator"),
    ({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}]}}}}},
     "template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].values[0]"),
])
def test_unsupported_or_malformed_scheduling_fields_are_refused(template: dict[str, object], path: str) -> None:
    import json
    with pytest.raises(InvalidInput) as err:
        Task("w", 1, Resources({GPU: 1}), template_json=json.dumps(template, sort_keys=True))
    assert err.value.path == path


def test_preferred_affinity_is_read_and_scored() -> None:
    c = task("w", 1, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}})
    nodes = {n.name: n for n in mixed().nodes}
    assert c.constraints.preference(nodes["a-n3"]) == 50
    assert c.constraints.preference(nodes["a-n0"]) == 0
    assert isinstance(nodes["a-n0"], Node)


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_preferred_affinity_picks_the_preferred_nodes_when_the_gang_fits_there(planner: str) -> None:
    prefer_b = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}
    (placed,) = run(planner, snap([mixed()], [job("g", task("w", 1, affinity=prefer_b))])).placements
    assert [a.node for a in placed.pods] == ["a-n3"]
    # two pods cannot both sit in zone b (one node): the preference yields, the gang still runs
    (placed,) = run(planner, snap([mixed()], [job("g", task("w", 2, affinity=prefer_b))])).placements
    assert len(placed.pods) == 2
