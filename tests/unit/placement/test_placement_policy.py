"""The shipped policy knobs: the preemption grace, the topology wait and reservations.

``placement_builders.FAST`` turns both off to test the rules alone; here each knob is
checked on both sides of its threshold, through the greedy planner and ``plan()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from placement_builders import FAST, Queue, flat, hard, job, running, snap, soft, tiered, why

from federation.domain import Plan, PlanLimits
from federation.domain.plans import FederationSnapshot, PendingJob
from federation.placement import plan, validate
from federation.placement.greedy import greedy_plan

PLANNERS = ("greedy", "cpsat")


def run(planner: str, s: FederationSnapshot, limits: PlanLimits) -> Plan:
    result = greedy_plan(s, limits) if planner == "greedy" else plan(s, limits)
    assert validate(s, result) == []
    return result


def submitted(s: FederationSnapshot, at: float) -> FederationSnapshot:
    """The snapshot with every pending job submitted at ``at``."""
    return replace(s, pending=tuple(PendingJob(p.job, at) for p in s.pending))


def preemption_case(now: float) -> FederationSnapshot:
    c = flat("a", [8, 8])
    low = job("low", 2, queue="q", priority=0)
    s = snap([c], [job("high", 2, queue="q", priority=5)], runs=[running(low, c, ["a-n0", "a-n1"])], now=now)
    return submitted(s, 1000.0)


def reclaim_case(now: float) -> FederationSnapshot:
    c = flat("a", [8, 8])
    runs = [running(job("b1", queue="b"), c, ["a-n0"]), running(job("b2", queue="b"), c, ["a-n1"])]
    s = snap([c], [job("a1", queue="a")], [Queue("a"), Queue("b")], runs=runs, now=now)
    return submitted(s, 1000.0)


def test_shipped_defaults_are_the_documented_ones() -> None:
    limits = PlanLimits()
    assert limits.preemption_grace_seconds is None
    assert limits.topology_wait_seconds == 0.0  # Volcano semantics: the wait is opt-in
    assert limits.reserve_after_seconds is None


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("case", [preemption_case, reclaim_case], ids=["preempt", "reclaim"])
def test_without_a_grace_nothing_is_ever_evicted(planner: str, case: Callable[[float], FederationSnapshot]) -> None:
    s = case(1_000_000.0)
    result = run(planner, s, replace(FAST, preemption_grace_seconds=None))
    assert result.preemptions == ()
    assert result.placements == ()
    assert why(result, "high" if case is preemption_case else "a1") in {"capacity", "priority"}


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("case", [preemption_case, reclaim_case], ids=["preempt", "reclaim"])
def test_a_gang_evicts_only_after_waiting_out_the_grace(
        planner: str, case: Callable[[float], FederationSnapshot]) -> None:
    limits = replace(FAST, preemption_grace_seconds=600.0)
    early = run(planner, case(1000.0 + 599.0), limits)
    assert early.preemptions == ()
    late = run(planner, case(1000.0 + 600.0), limits)
    assert len(late.preemptions) >= 1
    assert late.placements and late.placements[0].job in {"high", "a1"}


def busy_leaf(now: float, topology: object = None) -> FederationSnapshot:
    # Leaves {n0,n1} and {n2,n3} each have one busy node; the spine {n0..n3} has two free.
    s = snap([tiered("a", [8, 0, 8, 0])], [job("g", 2, topology=topology)], now=now)  # type: ignore[arg-type]  # parametrised topology values include deliberately untyped ones
    return submitted(s, 0.0)


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("topology", [soft(1), hard(2)], ids=["soft", "hard-tier2"])
def test_a_gang_holds_out_for_its_lowest_tier_then_widens(planner: str, topology: object) -> None:
    limits = replace(FAST, topology_wait_seconds=3600.0)
    held = run(planner, busy_leaf(3599.0, topology), limits)
    assert held.placements == ()
    (why_held,) = held.unplaced
    assert why_held.constraint == "topology"
    assert "tier-1" in why_held.reason and "tier 2" in why_held.reason
    widened = run(planner, busy_leaf(3600.0, topology), limits)
    (placed,) = widened.placements
    assert placed.tier == 2


WAITING = PlanLimits(time_limit_seconds=0.3, workers=1, topology_wait_seconds=3600.0)


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("topology", [None, soft(1), hard(2)], ids=["none", "soft", "hard-tier2"])
def test_shipped_defaults_never_hold_a_gang_back(planner: str, topology: object) -> None:
    (placed,) = run(planner, busy_leaf(1.0, topology), PlanLimits(time_limit_seconds=0.3, workers=1)).placements
    assert placed.tier == 2


def with_wait(s: FederationSnapshot, job_wait: float | None = None, queue_wait: float | None = None
              ) -> FederationSnapshot:
    (p,) = s.pending
    return replace(s, pending=(replace(p, job=replace(p.job, topology_wait_seconds=job_wait)),),
                   queues=tuple(replace(q, topology_wait_seconds=queue_wait) for q in s.queues))


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize(("topology", "job_wait", "queue_wait", "service", "held"), [
    (soft(1), 7200.0, None, 0.0, True),      # the job's annotation opts in
    (soft(1), None, 7200.0, 0.0, True),      # its queue's default
    (soft(1), None, None, 7200.0, True),     # the service's
    (soft(1), 0.0, 7200.0, 7200.0, False),   # the job's own 0 wins over both defaults
    (soft(1), None, 0.0, 7200.0, False),     # the queue's 0 wins over the service's
    (None, None, 7200.0, 7200.0, False),     # defaults never hold a job without networkTopology
    (None, 7200.0, None, 0.0, True),         # ... but its submitter may ask for the wait
    (hard(2), 1000.0, None, 0.0, False),     # waited out
], ids=["job", "queue", "service", "job-zero-wins", "queue-zero-wins", "no-topology-ignores-defaults",
        "no-topology-job-asks", "waited-out"])
def test_the_opt_in_wait_comes_from_job_queue_or_service(
        planner: str, topology: object, job_wait: float | None, queue_wait: float | None, service: float,
        held: bool) -> None:
    s = with_wait(busy_leaf(3599.0, topology), job_wait, queue_wait)
    result = run(planner, s, replace(WAITING, topology_wait_seconds=service))
    if held:
        assert result.placements == ()
        (why_held,) = result.unplaced
        assert why_held.constraint == "topology" and "holding out for a tier-1" in why_held.reason
    else:
        (placed,) = result.placements
        assert placed.tier == 2


@pytest.mark.parametrize("planner", PLANNERS)
def test_the_wait_never_holds_a_gang_whose_lowest_tier_has_room(planner: str) -> None:
    s = submitted(snap([tiered("a", [8, 8, 8, 0])], [job("g", 2, topology=soft(1))], now=1.0), 0.0)
    (placed,) = run(planner, s, WAITING).placements
    assert placed.tier == 1


@pytest.mark.parametrize("planner", PLANNERS)
def test_the_wait_targets_the_lowest_tier_an_empty_federation_offers(planner: str) -> None:
    # Four pods never fit a two-node leaf: tier 2 is already the best, so nothing is held.
    s = submitted(snap([tiered("a", [8, 8, 8, 8])], [job("g", 4, topology=soft(1))], now=1.0), 0.0)
    (placed,) = run(planner, s, WAITING).placements
    assert placed.tier == 2


@pytest.mark.parametrize("planner", PLANNERS)
def test_single_pods_never_wait_for_topology(planner: str) -> None:
    s = submitted(snap([tiered("a", [8, 0, 8, 0])], [job("one", 1, topology=soft(1))], now=1.0), 0.0)
    assert run(planner, s, WAITING).placement("one") is not None


def starving(now: float, small_priority: int = 0, gang_queue: str = "q") -> FederationSnapshot:
    # Leaves {n0,n1} (4 GPUs free each) and {n2,n3} (full): the 2 x 8-GPU gang fits nowhere.
    c = tiered("a", [4, 4, 0, 0])
    runs, extra = [], []
    if gang_queue != "q":  # the gang's queue already holds its fair share (half) on n2, n3 ...
        runs = [running(job("hold", 2, queue=gang_queue), flat("a", [8, 8, 8, 8]), ["a-n2", "a-n3"])]
        c = tiered("a", [4, 4, 8, 8])
        extra = [job("big", 4, queue="q")]  # ... because q, just submitted, wants the other half
    s = snap([c], [job("g", 2, queue=gang_queue), job("s", 1, gpus=4, queue="q", priority=small_priority), *extra],
             runs=runs, now=now)
    times = (0.0, 1.0, now)
    return replace(s, pending=tuple(PendingJob(p.job, t) for p, t in zip(s.pending, times, strict=False)))


RESERVE = replace(FAST, reserve_after_seconds=1800.0)


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_starved_gang_keeps_its_domain_from_smaller_jobs(planner: str) -> None:
    result = run(planner, starving(1800.0), RESERVE)
    assert result.placements == ()  # s may not take a GPU of the leaf kept for g
    (held,) = [u for u in result.unplaced if u.job == "s"]
    assert held.constraint == "fairness" and "kept for g" in held.reason, held
    unreserved = run(planner, starving(1800.0), replace(RESERVE, reserve_after_seconds=None))
    assert [p.job for p in unreserved.placements] == ["s"]


@pytest.mark.parametrize("planner", PLANNERS)
def test_no_reservation_before_the_wait(planner: str) -> None:
    assert [p.job for p in run(planner, starving(1799.0), RESERVE).placements] == ["s"]


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_higher_band_is_never_held_back_by_a_reservation(planner: str) -> None:
    assert [p.job for p in run(planner, starving(1800.0, small_priority=5), RESERVE).placements] == ["s"]


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_queue_at_its_fair_share_reserves_nothing(planner: str) -> None:
    result = run(planner, starving(1800.0, gang_queue="b"), RESERVE)
    assert [p.job for p in result.placements] == ["s"]
