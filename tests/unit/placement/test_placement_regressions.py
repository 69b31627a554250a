"""Regressions found by running the demo and the control loop, one narrative id each.

Every plan here is checked by ``validate()`` (``checked``) before its expectations.
"""

from __future__ import annotations

import pytest
from placement_builders import checked, flat, job, running, snap

from federation.domain import ClusterSnapshot, FederationSnapshot, Node, PendingJob, Queue
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
