"""Volcano's enqueue gate in the ``volcano-greedy`` baseline (overcommit and proportion's
JobEnqueueable): which jobs may allocate, and that admission persists across rounds."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from federation.domain import ClusterSnapshot, FederationSnapshot, Job, PendingJob, Plan, PlanLimits, Queue, Resources
from federation.domain.jobs import NetworkTopology
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


# -- several member clusters: overcommit per cluster, proportion per federation queue, and
# -- karmada-descheduler's re-dispatch of an Inqueue job its cluster cannot hold.


def fleet(a_used: Sequence[int], b_used: Sequence[int]) -> tuple[ClusterSnapshot, ClusterSnapshot]:
    """Member ``a`` (dispatched to first: name order) and member ``b``, 8-GPU nodes in leaves of two."""
    return (tiered_cluster("a", len(a_used), leaf=2, spine=2, used=dict(enumerate(a_used))),
            tiered_cluster("b", len(b_used), leaf=2, spine=2, used=dict(enumerate(b_used))))


def fleet_snap(clusters: Sequence[ClusterSnapshot], jobs: Sequence[Job],
               queues: Sequence[Queue] = (Queue("q"),)) -> FederationSnapshot:
    pending = tuple(PendingJob(j, float(i)) for i, j in enumerate(jobs))
    return FederationSnapshot(tuple(clusters), tuple(queues), pending, ())


def inqueue(job: str, cluster: str) -> Plan:
    """The previous round left ``job`` Inqueue (pending, not for "not enqueued") in ``cluster``."""
    return Plan((), (Unplaced(job, "no room", "capacity", cluster),), ())


FLEET_CASES = [
    # "other" is guaranteed 24 GPUs of the federation's 64. In member a alone (16 GPUs) a
    # per-cluster reading would leave q a realCapability of 0 there; the federation's is 40.
    ("a federation guarantee bigger than the member does not starve the other queues",
     ([0, 0], [0, 0, 0, 0, 0, 0]), [gang("j", "q", 1, 8)], None,
     (Queue("q"), Queue("other", guarantee=Resources.of(gpu=24))), {"j": "placed in a"}),
    ("proportion still caps the queue at its federation realCapability",
     ([0, 0], [0, 0, 0, 0, 0, 0]), [gang("j", "q", 6, 8)], None,
     (Queue("q"), Queue("other", guarantee=Resources.of(gpu=24))), {"j": "queue-capability"}),
    ("an Inqueue job whose cluster has no room now is re-dispatched where there is",
     ([8, 8], [0, 0]), [gang("j", "q", 2, 8)], inqueue("j", "a"), (Queue("q"),), {"j": "placed in b"}),
    # a has a free node in each leaf: room and pod slots for the gang (what Karmada's
    # estimator sees), but no leaf holds both pods (what only Volcano sees).
    ("an Inqueue job whose cluster the estimator says can hold it keeps its place (Volcano's reservation)",
     ([8, 0, 8, 0], [0, 0]), [gang("j", "q", 2, 8, topology=NetworkTopology("hard", highest_tier_allowed=1))],
     inqueue("j", "a"), (Queue("q"),), {"j": "inqueue in a"}),
    ("an Inqueue job whose cluster has the summed GPUs but no node for a pod is re-dispatched",
     ([4, 4], [0, 0]), [gang("j", "q", 1, 8)], inqueue("j", "a"), (Queue("q"),), {"j": "placed in b"}),
    ("an Inqueue job stays where it is when no other cluster has room either",
     ([8, 8], [8, 0]), [gang("j", "q", 2, 8)], inqueue("j", "a"), (Queue("q"),), {"j": "inqueue in a"}),
    ("an Inqueue job its cluster can never hold within the hard tier limit is re-dispatched",
     ([0, 0, 0, 0], [0, 0, 0, 0]), [gang("j", "q", 3, 8, topology=NetworkTopology("hard", highest_tier_allowed=1))],
     inqueue("j", "a"), (Queue("q"),), {"j": "unschedulable"}),
]


@pytest.mark.parametrize(("used", "jobs", "previous", "queues", "expect"), [c[1:] for c in FLEET_CASES],
                         ids=[c[0] for c in FLEET_CASES])
def test_enqueue_across_member_clusters(used: tuple[Sequence[int], Sequence[int]], jobs: Sequence[Job],
                                        previous: Plan | None, queues: Sequence[Queue],
                                        expect: dict[str, str]) -> None:
    plan = run(fleet_snap(fleet(*used), jobs, queues), previous)
    for name, outcome in expect.items():
        placement = plan.placement(name)
        if outcome.startswith("placed in "):
            assert placement is not None and placement.cluster == outcome.removeprefix("placed in "), plan.unplaced
        elif outcome.startswith("inqueue in "):
            u = why(plan, name)
            assert placement is None and not u.reason.startswith(NOT_ENQUEUED)
            assert u.closest_cluster == outcome.removeprefix("inqueue in ")
        elif outcome == "unschedulable":
            assert placement is None and why(plan, name).unschedulable
        else:
            u = why(plan, name)
            assert (u.constraint, u.reason.startswith(NOT_ENQUEUED)) == (outcome, True)


def test_a_starved_queue_is_served_once_its_jobs_leave_a_member_that_refused_them() -> None:
    """Rounds in a row: "a" fills up, the job Inqueue there moves to "b" and starts."""
    clusters = fleet([8, 8], [0, 0])
    job = gang("j", "q", 2, 8)
    first = run(fleet_snap(clusters, [job]), inqueue("j", "a"))
    second = run(fleet_snap(clusters, [job]), first)
    assert first.placement("j") is not None and second.placement("j") is not None


def test_enqueue_tries_every_job_of_the_first_queue_before_the_next() -> None:
    # enqueue.go with proportion's QueueOrderFn: the share only moves on allocation, so the
    # order is fixed during the action; both queues are at share 0 and ``a`` comes first by
    # name. 24 of 32 GPUs used, budget 38 - 24 = 14: a1 (8) and a2 (4) are admitted, then b1
    # (4) would exceed it. Taking turns between queues would have admitted b1 instead of a2.
    jobs = [gang("a1", "a", 1, 8), gang("b1", "b", 1, 4), gang("a2", "a", 1, 4)]
    plan = run(snap(cluster([8, 8, 8, 0]), jobs, (Queue("a"), Queue("b"))))
    assert plan.placement("a1") is not None
    assert not why(plan, "a2").reason.startswith(NOT_ENQUEUED)
    assert why(plan, "b1").reason.startswith(NOT_ENQUEUED)
