"""Wide gangs take room in age order (``placement/wide_order.py``, default on): a newer wide gang
may not take the nodes an older one of its band or a higher band can use this round. Tables over
a tiny tiered cluster; every plan validated, the rule checked by ``validate(..., limits=...)``.

Cluster shape (``tiered``, leaf=2, spine=2): leaves of 2 nodes, spines of 2 leaves, so nodes 0-3
are spine0 and nodes 4-7 spine1. A gang of 4 eight-GPU pods is wide (no leaf holds it).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from placement_builders import FAST, hard, job, running, snap, tiered

from federation.domain import FederationSnapshot, Job, PendingJob
from federation.domain.plans import Plan, PlanLimits
from federation.placement import greedy_plan, plan, validate
from federation.placement.opening import open_round
from federation.placement.reasons import diagnose
from federation.placement.wide_order import MAX_WALKED, order_wide_gangs, wide_gangs

# No eviction (the shipped default): the running job of queue b is not reclaimed for queue a.
ON = replace(FAST, preemption_grace_seconds=None, wide_order_after_seconds=0.0)
OFF = replace(ON, wide_order_after_seconds=None)
ALL_FREE = [8] * 8


def _snapshot(jobs: list[Job], submitted: list[float], busy_spine1: str | None = None,
              now: float = 5000.0) -> FederationSnapshot:
    """``jobs`` pending since ``submitted``; with ``busy_spine1`` a job of that queue runs on spine1."""
    cluster = tiered("c", ALL_FREE)
    runs = []
    if busy_spine1 is not None:
        runs = [running(job("busy", pods=4, queue=busy_spine1), cluster, ["c-n4", "c-n5", "c-n6", "c-n7"])]
    s = snap([cluster], jobs, runs=runs, now=now)
    return replace(s, pending=tuple(PendingJob(p.job, t) for p, t in zip(s.pending, submitted, strict=True)))


def _planned(planner: str, s: FederationSnapshot, limits: PlanLimits) -> Plan:
    result = greedy_plan(s, limits) if planner == "greedy" else plan(s, limits)
    assert validate(s, result) == []
    assert validate(s, result, limits=limits) == []
    return result


def _placed(result: Plan) -> set[str]:
    return {p.job for p in result.placements}


def test_on_by_default() -> None:
    assert PlanLimits().wide_order_after_seconds == 0.0


# Room for one wide gang (spine0); queue b already runs on spine1, so queue a is below its
# fair share and the objective's fairness credit prefers "new" (queue a) over "old" (queue b).
CONTESTED = ([job("old", pods=4, queue="b"), job("new", pods=4, queue="a")], [0.0, 3000.0])


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize(
    ("limits", "placed"),
    [(ON, {"old"}), (OFF, {"new"})],
    ids=["on: the older wide gang takes the room, fair-share credit or not",
         "off: the fair-share credit gives it to the newer one"],
)
def test_room_for_one_wide_gang_goes_to_the_oldest(planner: str, limits: PlanLimits, placed: set[str]) -> None:
    s = _snapshot(*CONTESTED, busy_spine1="b")
    assert _placed(_planned(planner, s, limits)) == placed


def test_the_newer_gang_is_told_an_older_one_may_use_the_room() -> None:
    # Asked before anything is placed (as when the older gang's room went to smaller jobs).
    s = _snapshot(*CONTESTED, busy_spine1="b")
    rnd = open_round(s, ON)
    new = diagnose(rnd, s.pending[1].job)
    assert new.constraint == "capacity"
    assert new.reason == ("the room that fits it, in c, is kept for a job of queue b (an older gang of 4 pods, "
                          "waiting over 0 s, can use this room now) until c-spine0 can hold it")


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize(
    ("jobs", "submitted", "busy", "placed"),
    [
        ([job("old", pods=4, queue="b"), job("new", pods=4, queue="a")], [0.0, 3000.0], None, {"old", "new"}),
        ([job("old", pods=6, queue="b"), job("new", pods=4, queue="a")], [0.0, 3000.0], "b", {"new"}),
        ([job("old", pods=4, queue="b"), job("new", pods=4, queue="a", priority=100)], [0.0, 3000.0], "b",
         {"new"}),
        ([job("old", pods=2, queue="b"), job("new", pods=2, queue="a")], [0.0, 3000.0], "b", {"old", "new"}),
    ],
    ids=["room for both: both start (a newer gang that fits elsewhere is not held back)",
         "the older gang does not fit now: it claims nothing and the newer one starts",
         "a newer gang of a higher band is not held back (priority first)",
         "leaf-sized gangs are not ordered (each fits a leaf)"],
)
def test_the_rule_never_idles_room_the_older_gang_cannot_use(
        planner: str, jobs: list[Job], submitted: list[float], busy: str | None, placed: set[str]) -> None:
    assert _placed(_planned(planner, _snapshot(jobs, submitted, busy_spine1=busy), ON)) == placed


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_smaller_jobs_are_not_held_back(planner: str) -> None:
    # Only spine0 is free; the old wide gang claims it, but single pods may still take it
    # (the objective decides: four jobs started beat one of equal GPUs).
    jobs = [job("old", pods=4, queue="b"), job("new", pods=4, queue="a")] + [
        job(f"s{i}", queue="a") for i in range(4)]
    s = _snapshot(jobs, [0.0, 3000.0, 3500.0, 3500.0, 3500.0, 3500.0], busy_spine1="b")
    rnd = open_round(s, ON)
    assert set(rnd.barred) == {"new"}
    assert "new" not in _placed(_planned(planner, s, ON))


def test_the_claim_is_where_the_greedy_search_would_put_the_older_gang() -> None:
    s = _snapshot(*CONTESTED, busy_spine1="b")
    rnd = open_round(s, ON)
    [(holder, cluster, domain, nodes, _, constraint)] = rnd.holds
    assert (holder, cluster, domain, constraint) == ("old", "c", "c-spine0", "capacity")
    assert nodes == frozenset(("c", f"c-n{i}") for i in range(4))
    assert rnd.barred == {"new": nodes}
    assert rnd.placements == {}  # the scratch placement is rolled back


def test_the_bound_and_the_order() -> None:
    jobs = [job("b2", pods=4, queue="q"), job("a1", pods=4, queue="q"), job("hi", pods=4, queue="q", priority=100),
            job("pair", pods=2, queue="q"), job("fresh", pods=4, queue="q"),
            job("never", pods=4, queue="q", topology=hard(1))]
    s = _snapshot(jobs, [200.0, 100.0, 4000.0, 0.0, 4900.0, 0.0])
    rnd = open_round(s, OFF)
    # band, then age; waited >= 300 s; not a leaf-sized gang, nor one its hard limit keeps from ever running
    assert [p.job.name for p in wide_gangs(rnd, 300.0)] == ["hi", "a1", "b2"]
    assert order_wide_gangs(rnd, None) == []


def test_at_most_max_walked_gangs_are_placed_on_the_scratch_copy() -> None:
    big = tiered("c", [8] * 4 * (MAX_WALKED + 4), leaf=2, spine=2)
    jobs = [job(f"g{i:02d}", pods=4) for i in range(MAX_WALKED + 4)]
    s = snap([big], jobs, now=10_000.0)
    rnd = open_round(s, OFF)
    assert order_wide_gangs(rnd, 0.0) == [f"g{i:02d}" for i in range(MAX_WALKED)]


def test_validate_flags_a_newer_wide_gang_on_the_older_ones_room() -> None:
    s = _snapshot(*CONTESTED, busy_spine1="b")
    unordered = greedy_plan(s, OFF)
    assert _placed(unordered) == {"new"}
    assert validate(s, unordered) == []
    assert validate(s, unordered, limits=OFF) == []
    assert any("held for old" in p and "new" in p for p in validate(s, unordered, limits=ON))
