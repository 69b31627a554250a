"""Gang binding inside the chosen HyperNode: plan reuse, re-pack, all-or-nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from agentkit import gpu, job

from agents.core.binding import bind_gang, eligible, replacement_node
from federation.domain.jobs import Job
from federation.domain.nodes import Node, Taint, Toleration
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.topology import Domain

LEAF = Domain("leaf-a", 1, frozenset({"a1", "a2", "a3"}))


def n(name: str, free: int = 8, *, ready: bool = True, cordoned: bool = False,
      taints: tuple[Taint, ...] = ()) -> Node:
    return Node(name, Resources.of(gpu=8, cpu=64000), Resources.of(gpu=free, cpu=64000),
                ready=ready, unschedulable=cordoned, taints=taints)


NODES = (n("a1"), n("a2"), n("a3"), n("b1"))  # b1 is outside the domain


def plan(*pairs: tuple[int, str]) -> tuple[PodAssignment, ...]:
    return tuple(PodAssignment("worker", i, node) for i, node in pairs)


REPACK_CASES = [
    pytest.param(NODES, plan((0, "a1"), (1, "a2")), {"worker-0": "a1", "worker-1": "a2"}, 2,
                 id="valid-plan-is-reused-as-is"),
    pytest.param((n("a1", ready=False), *NODES[1:]), plan((0, "a1"), (1, "a2")), {"worker-0": "a3", "worker-1": "a2"},
                 1, id="planned-node-not-ready-repacks-inside-domain"),
    pytest.param((n("a1", cordoned=True), *NODES[1:]), plan((0, "a1"), (1, "a2")),
                 {"worker-0": "a3", "worker-1": "a2"}, 1, id="planned-node-cordoned-repacks"),
    pytest.param(NODES, plan((0, "b1"), (1, "a2")), {"worker-0": "a1", "worker-1": "a2"}, 1,
                 id="planned-node-outside-domain-is-never-used"),
    pytest.param((n("a1", free=4), *NODES[1:]), plan((0, "a1"), (1, "a2")), {"worker-0": "a3", "worker-1": "a2"}, 1,
                 id="planned-node-without-room-repacks"),
    pytest.param(NODES, (), {"worker-0": "a1", "worker-1": "a2"}, 0, id="no-plan-packs-best-fit-by-name"),
    pytest.param((n("a1"), n("a2", free=0), n("a3")), plan((0, "a2"), (1, "a2")),
                 {"worker-0": "a1", "worker-1": "a3"}, 0, id="whole-plan-invalid-repacks-everything"),
]


@pytest.mark.parametrize(("nodes", "planned", "expected", "reused"), REPACK_CASES)
def test_plan_reuse_and_repack(nodes: tuple[Node, ...], planned: tuple[PodAssignment, ...],
                               expected: dict[str, str], reused: int) -> None:
    result = bind_gang(job(), LEAF, nodes, planned=planned)
    assert result.assignments is not None, result.reason
    assert {f"{a.task}-{a.index}": a.node for a in result.assignments} == expected
    assert result.reused == reused


def test_best_fit_prefers_the_fullest_node_that_still_fits() -> None:
    nodes = (n("a1", free=8), n("a2", free=2), n("a3", free=4))
    result = bind_gang(job(tasks=(("worker", 1, 4),)), LEAF, nodes)
    assert result.assignments == (PodAssignment("worker", 0, "a3"),)


def test_big_pods_are_packed_first_so_small_ones_fill_the_gaps() -> None:
    j = job(tasks=(("small", 2, 2), ("big", 1, 8)))
    nodes = (n("a1", free=8), n("a2", free=4))
    result = bind_gang(j, LEAF, nodes)
    assert result.assignments is not None
    placed = {f"{a.task}-{a.index}": a.node for a in result.assignments}
    assert placed == {"small-0": "a2", "small-1": "a2", "big-0": "a1"}


INFEASIBLE_CASES = [
    pytest.param(job(tasks=(("worker", 4, 8),)), NODES, "needs 4 pods inside leaf-a but only 3 fit",
                 id="gang-bigger-than-domain-even-though-cluster-has-room"),
    pytest.param(job(), (n("a1", ready=False), n("a2", ready=False), n("a3", free=8)), "only 1 fit",
                 id="too-few-ready-nodes"),
    pytest.param(job(tasks=(("worker", 1, 16),)), NODES, "no node has room for train-worker-0",
                 id="pod-larger-than-any-node"),
    pytest.param(job(tasks=(("ps", 2, 8), ("worker", 2, 8)), task_min={"ps": 2, "worker": 2}, min_available=3),
                 NODES, "task worker needs 2 pods in leaf-a, only 1 fit", id="task-min-available-unreachable"),
]


@pytest.mark.parametrize(("j", "nodes", "reason"), INFEASIBLE_CASES)
def test_infeasible_gang_gets_none_and_a_reason(j: Job, nodes: tuple[Node, ...], reason: str) -> None:
    result = bind_gang(j, LEAF, nodes)
    assert result.assignments is None and not result.ok
    assert reason in result.reason


def test_elastic_job_binds_what_fits_above_min_available() -> None:
    j = job(tasks=(("worker", 4, 8),), min_available=2)
    result = bind_gang(j, LEAF, NODES)
    assert result.assignments is not None and len(result.assignments) == 3


def test_task_min_available_pods_are_placed_first() -> None:
    j = job(tasks=(("big", 2, 8), ("must", 1, 8)), task_min={"must": 1}, min_available=2)
    result = bind_gang(j, Domain("d", 1, frozenset({"a1", "a2"})), (n("a1"), n("a2")))
    assert result.assignments is not None
    assert any(a.task == "must" for a in result.assignments)


def test_already_bound_pods_count_toward_the_gang() -> None:
    bound = (PodAssignment("worker", 0, "a1"),)
    result = bind_gang(job(), LEAF, (n("a1", free=0), n("a2", free=0), n("a3")), pending=[("worker", 1)], bound=bound)
    assert result.assignments == (PodAssignment("worker", 1, "a3"),)


def test_untolerated_taints_exclude_a_node_and_tolerations_admit_it() -> None:
    tainted = n("a1", taints=(Taint("gpu", "h100", "NoSchedule"),))
    assert [x.name for x in eligible(LEAF, (tainted, n("a2")))] == ["a2"]
    tolerant = replace(job(), tolerations=(Toleration("gpu", "Equal", "h100"),))
    assert [x.name for x in eligible(LEAF, (tainted, n("a2")), tolerant.tolerations)] == ["a1", "a2"]


def test_replacement_node_stays_inside_the_domain_and_skips_the_lost_node() -> None:
    nodes = (n("a1", free=0), n("a2", free=8, ready=False), n("a3", free=8), n("b1"))
    assert replacement_node(gpu(8), LEAF, nodes, exclude=("a1",)) == "a3"
    assert replacement_node(gpu(8), LEAF, nodes, exclude=("a3",)) is None  # b1 has room but is outside
    assert replacement_node(gpu(8), LEAF, nodes, {"a3": Resources.of(gpu=4)}) is None  # free override


KWOK = Taint("kwok.x-k8s.io/node", "fake", "NoSchedule")


def _pinned(product: str, replicas: int = 2) -> Job:
    from federation.domain.jobs import Task
    from federation.domain.scheduling import template_for
    template = template_for({"nvidia.com/gpu.product": product},
                            tolerations=[{"key": KWOK.key, "operator": "Exists", "effect": "NoSchedule"}])
    return Job("pinned", "q", (Task("worker", replicas, gpu(8), template_json=template),))


def _models() -> tuple[Node, ...]:
    """Tainted like kwok's nodes: the template's own toleration must count."""
    labels = {"a1": "H100", "a2": "A100", "a3": "H100"}
    return tuple(replace(n(name, taints=(KWOK,)), labels={"nvidia.com/gpu.product": model})
                 for name, model in labels.items())


def test_a_gpu_model_pinned_gang_binds_only_on_matching_nodes_even_against_the_plan() -> None:
    result = bind_gang(_pinned("H100"), LEAF, _models(), planned=plan((0, "a2"), (1, "a1")))
    assert result.assignments is not None, result.reason
    assert {a.node for a in result.assignments} == {"a1", "a3"}
    assert result.reused == 1  # a1 kept, a2 (an A100) refused


def test_a_gpu_model_pinned_gang_fails_when_too_few_nodes_match() -> None:
    result = bind_gang(_pinned("A100"), LEAF, _models())
    assert result.assignments is None
    assert "needs 2 pods" in result.reason
