"""Volcano's enqueue gate in the ``volcano-greedy`` baseline (overcommit and proportion's
JobEnqueueable): which jobs may allocate, and that admission persists across rounds."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from federation.domain import ClusterSnapshot, FederationSnapshot, Job, PendingJob, Plan, PlanLimits, Queue, Resources
from federation.domain.plans import Unplaced
from federation.placement import validate
from federation.placement.baselines import volcano_greedy
from federation.placement.baselines.volcano_enqueue import NOT_ENQUEUED
from tests.fixtures.instances import gang, tiered_cluster


def cluster(used: Sequence[int]) -> ClusterSnapshot:
    """One cluster ``a`` of 8-GPU nodes in leaves of two; ``used[i]`` GPUs taken on node i."""
    return tiered_cluster("a", len(used), leaf=2, spine=2, used=dict(enumerate(used)))


def snap(c: ClusterSnapshot, jobs: Sequence[Job], queues: Sequence[Queue] = (Queue("q"),)) -> FederationSnapshot:
    pending = tuple(PendingJob(j, float(i)) for i, j in enumerate(jobs))
    return FederationSnapshot((c,), tuple(queues), pending, ())


def run(s: FederationSnapshot, previous: Plan | None = None) -> Plan:
    plan = volcano_greedy.plan(s, PlanLimits(), previous)
    assert validate(s, plan) == []
    return plan


def why(plan: Plan, job: str) -> Unplaced:
    return next(u for u in plan.unplaced if u.job == job)


CASES = [
    # 32 GPUs, all used: idle = 38 (32 x 1.2) - 32 = 6 GPUs of overcommit budget.
    ("a full cluster admits a 1-GPU job but not an 8-GPU one",
     [32 // 4] * 4, [gang("small", "q", 1, 1), gang("big", "q", 1, 8)],
     {"small": "admitted", "big": "capacity"}),
    # used 24, idle 14: the 12-GPU gang is admitted first (it cannot fit: 4 GPUs per node
    # free); the 4-GPU job after it would exceed the budget and is not enqueued although it fits.
    ("an admitted gang keeps later jobs out beyond the overcommit budget",
     [4, 4, 8, 8], [gang("wide", "q", 2, 6), gang("later", "q", 1, 4)],
     {"wide": "admitted", "later": "capacity"}),
    ("with budget left both are admitted and the one that fits runs",
     [4, 4, 0, 8], [gang("wide", "q", 2, 6), gang("later", "q", 1, 4)],
     {"wide": "admitted", "later": "placed"}),
]


@pytest.mark.parametrize(("used", "jobs", "expect"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_overcommit_gate(used: Sequence[int], jobs: Sequence[Job], expect: dict[str, str]) -> None:
    plan = run(snap(cluster(used), jobs))
    for name, outcome in expect.items():
        if outcome == "placed":
            assert plan.placement(name) is not None, plan.unplaced
        elif outcome == "admitted":
            assert plan.placement(name) is None
            assert not why(plan, name).reason.startswith(NOT_ENQUEUED)
            assert why(plan, name).closest_cluster == "a"
        else:
            u = why(plan, name)
            assert (u.constraint, u.reason.startswith(NOT_ENQUEUED)) == (outcome, True)


def test_proportion_caps_a_queue_at_its_real_capability() -> None:
    # 32 GPUs; the other queue is guaranteed 24, so q's real capability is 8 GPUs.
    queues = (Queue("q"), Queue("other", guarantee=Resources.of(gpu=24)))
    plan = run(snap(cluster([0, 0, 0, 0]), [gang("two", "q", 2, 8), gang("one", "q", 1, 8)], queues))
    u = why(plan, "two")
    assert (u.constraint, u.reason.startswith(NOT_ENQUEUED)) == ("queue-capability", True)
    assert plan.placement("one") is not None


def test_a_job_admitted_last_round_stays_inqueue_and_holds_its_budget() -> None:
    jobs = [gang("wide", "q", 3, 8), gang("later", "q", 1, 4)]
    # used 28 of 32: idle 10, so "wide" (24 GPUs) would not be enqueued now, and "later" would.
    fresh = run(snap(cluster([8, 8, 8, 4]), jobs))
    assert why(fresh, "wide").reason.startswith(NOT_ENQUEUED)
    assert fresh.placement("later") is not None
    held = Plan((), (Unplaced("wide", "no room", "capacity", "a"),), ())
    plan = run(snap(cluster([8, 8, 8, 4]), jobs), previous=held)
    assert not why(plan, "wide").reason.startswith(NOT_ENQUEUED)
    assert why(plan, "later").reason.startswith(NOT_ENQUEUED)  # 24 inqueue + 4 > 10
