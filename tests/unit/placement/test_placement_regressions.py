"""Regressions found by running the demo and the control loop, one narrative id each.

Every plan here is checked by ``validate()`` (``checked``) before its expectations.
"""

from __future__ import annotations

import pytest
from placement_builders import checked, flat, job, running, snap

from federation.domain import (
    ClusterAffinity,
    ClusterSnapshot,
    FederationSnapshot,
    Node,
    PendingJob,
    PropagationPolicy,
    Queue,
)
from federation.placement.instances import gpu_node


def _sick_node_snapshot(missing: bool) -> FederationSnapshot:
    """A running gang with one pod on a NotReady (or vanished) node, and a preemptor."""
    n0, n1 = gpu_node("c-n0", 8, 8), gpu_node("c-n1")
    sick = Node(n1.name, n1.allocatable, n1.free, ready=False)
    full = ClusterSnapshot("c", (n0, sick))
    low = job("low", 2, 4, priority=0)
    run = running(low, full, ["c-n0", "c-n1"])
    seen = ClusterSnapshot("c", (Node(n0.name, n0.allocatable, n0.allocatable - low.tasks[0].resources),)
                           + (() if missing else (sick,)))
    high = job("high", 1, 8, priority=10)
    return FederationSnapshot((seen,), (Queue("q"),), (PendingJob(high),), (run,))


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize("missing", [False, True], ids=["not-ready", "missing"])
def test_running_pod_on_sick_node_does_not_crash_preemption(planner: str, missing: bool) -> None:
    s = _sick_node_snapshot(missing)
    result = checked(planner, s)
    # Evicting low frees its 4 GPUs on c-n0 (its pod on the sick node frees nothing usable):
    # high goes to c-n0, never to the sick node.
    placed = result.placement("high")
    assert placed is not None and [a.node for a in placed.pods] == ["c-n0"]
    assert [v.job for v in result.preemptions] == ["low"]


def _equal_priority_neighbour() -> FederationSnapshot:
    """Demo: fdn-sft-2 was evicted for fdn-rlhf, both priority 0 in one queue.

    ``rlhf`` (priority 0, 24 GPUs) fits only if ``sft`` (priority 0) goes; ``eval``
    (priority 10) fits in the free nodes anyway. A cluster-level "a higher-priority job
    of the queue was placed here" check let the model evict ``sft`` for ``rlhf``.
    """
    sft = job("sft", 2, 8, queue="fdn")
    base = flat("a", [8, 8, 8, 8, 8])
    run = running(sft, base, ["a-n0", "a-n1"])
    return snap([base], [job("eval", 2, 8, queue="fdn", priority=10), job("rlhf", 3, 8, queue="fdn")], runs=[run])


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_no_preemption_between_equal_priorities_of_one_queue(planner: str) -> None:
    result = checked(planner, _equal_priority_neighbour())
    assert result.placement("eval") is not None
    assert result.placement("rlhf") is None
    assert not result.preemptions, result.preemptions


def _lost_only_home(pods: int) -> FederationSnapshot:
    """Control loop: the job's only allowed cluster ``a`` is lost (healthy=False); ``b`` is
    excluded by affinity. 'Unavailable' is not 'impossible': the job waits for ``a``."""
    only_a = PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=("a",)))
    return snap([flat("a", [8, 8], healthy=False), flat("b", [8, 8, 8, 8])],
                [job("g", pods, propagation=only_a)])


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_job_whose_allowed_cluster_is_lost_waits_instead_of_unschedulable(planner: str) -> None:
    result = checked(planner, _lost_only_home(2))
    (u,) = result.unplaced
    assert u.unschedulable is False, u
    assert u.reason.startswith("allowed clusters unavailable: a (lost)"), u
    assert u.closest_cluster == "a"


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_job_too_big_even_for_its_lost_cluster_stays_unschedulable(planner: str) -> None:
    result = checked(planner, _lost_only_home(3))  # a has only 2 nodes, even when back
    (u,) = result.unplaced
    assert u.unschedulable is True, u
    assert u.constraint == "unschedulable", u  # not "affinity": b is excluded, a too small


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_too_big_for_healthy_allowed_but_fits_lost_allowed_waits(planner: str) -> None:
    """``diagnose``'s 'could ever hold' must range over unhealthy allowed clusters too."""
    s = snap([flat("a", [8, 8, 8], healthy=False), flat("b", [8, 8])], [job("g", 3)])
    (u,) = checked(planner, s).unplaced
    assert u.unschedulable is False, u
    assert u.reason.startswith("allowed clusters unavailable: a (lost)"), u
