"""Packing that anticipates (``Scoring.guard``, ``cpsat/anticipation.py``) and the gang hold
(``placement/admission.py``): tables over tiny tiered clusters, every plan validated.

Cluster shape (``tiered``): leaves of 2 nodes, spines of 2 leaves, so nodes 0-3 are
spine0 (leaf0 = n0,n1; leaf1 = n2,n3) and nodes 4-7 are spine1 (leaf2, leaf3).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from placement_builders import FAST, checked, hard, job, snap, tiered

from federation.domain import FederationSnapshot, Job, PendingJob
from federation.placement import greedy_plan, plan, validate
from federation.placement.admission import enqueue, hold_room
from federation.placement.reserve import held_nodes
from federation.placement.rounds import PlanningRound
from federation.placement.score import GUARD_MAX, Scoring

# spine0 (n0-n3) nearly whole: 28 of 32 GPUs free; spine1 busy: n6 free, n7 half.
# leaf1 (n2, n3) and leaf3 (n6, n7) are equally tight: one free 8-GPU node each.
BUSY_SPINE1 = [8, 8, 8, 4, 0, 0, 8, 4]
SPINE_GANG = job("spine-gang", pods=4, topology=hard(2))  # 4 whole nodes in a spine: fits nowhere now


@pytest.mark.parametrize(
    ("jobs", "domain", "expect"),
    [
        ("gang queued: a leaf of the whole spine breaks it", "c-leaf1", GUARD_MAX),
        ("gang queued: a leaf of the busy spine breaks nothing", "c-leaf3", 0),
        ("gang queued: a spine itself has only the top above it, no gang needs the top", "c-spine0", 0),
        ("no gang queued: no tier is needed, nothing is guarded", "c-leaf1", 0),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else "",
)
def test_guard_prices_the_whole_room_above_a_domain(jobs: str, domain: str, expect: int) -> None:
    pending = [job("small")] + ([SPINE_GANG] if jobs.startswith("gang") else [])
    scoring = Scoring(snap([tiered("c", BUSY_SPINE1)], pending))
    assert scoring.guard("c", domain) == expect
    assert 0 <= expect <= GUARD_MAX


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize(
    ("queued", "node"),
    [
        (True, "c-n6"),   # leaf1 and leaf3 are equally tight; leaf3's spine is the busy one
        (False, "c-n2"),  # nothing needs a spine: plain best fit, first of the equally tight leaves
    ],
    ids=["a queued spine gang keeps the empty spine whole", "without one, plain best fit"],
)
def test_small_work_goes_to_the_fragment_in_the_busier_spine(planner: str, queued: bool, node: str) -> None:
    pending = [job("small")] + ([SPINE_GANG] if queued else [])
    result = checked(planner, snap([tiered("c", BUSY_SPINE1)], pending))
    placed = result.placement("small")
    assert placed is not None and [p.node for p in placed.pods] == [node]


def _held(s: FederationSnapshot, after: float | None) -> tuple[PlanningRound, str | None]:
    rnd = PlanningRound(s, grace=None, topology_wait=0.0)
    return rnd, hold_room(rnd, replace(FAST, gang_hold_after_seconds=after))


def _waited(s: FederationSnapshot, seconds: float) -> FederationSnapshot:
    return replace(s, now=seconds, pending=tuple(PendingJob(p.job, 0.0) for p in s.pending))


def test_a_gang_that_waited_past_the_bound_gets_the_fewest_freest_nodes_of_its_best_domain_held() -> None:
    # spine1: n4 free, n5 half free, n6, n7 busy; spine0 busier. A 2-node hard tier-1 gang
    # cannot be placed; leaf2 (n4, n5) is the leaf closest to holding it.
    cluster = tiered("c", [0, 0, 0, 8, 8, 4, 0, 0])
    s = _waited(snap([cluster], [job("pair", pods=2, topology=hard(1)), job("small", gpus=4)]), 4000.0)
    rnd, kept = _held(s, 1800.0)
    assert kept == "pair"
    assert [h[:3] for h in rnd.holds] == [("pair", "c", "c-leaf2")]
    assert held_nodes(rnd, rnd.state.domains[next(d.uid for d in rnd.state.domains if d.domain.name == "c-leaf2")],
                      s.pending[0].job) == ["c-n4", "c-n5"]
    assert rnd.barred["small"] == frozenset({("c", "c-n4"), ("c", "c-n5")})


def test_smaller_work_backfills_the_rest_of_the_domain_but_not_the_held_nodes() -> None:
    # Leaves of 4 nodes: leaf1 (n4-n7) has 8, 4, 2, 1 GPUs free. The 2-node gang holds n4 and
    # n5 (the freest two); n6 and n7 stay open, and the 1-GPU job best-fits onto n7.
    cluster = tiered("c", [0, 0, 0, 0, 8, 4, 2, 1], leaf=4)
    jobs = [job("pair", pods=2, topology=hard(1)), job("one", gpus=1), job("four", gpus=4)]
    s = _waited(snap([cluster], jobs), 4000.0)
    result = greedy_plan(s, replace(FAST, gang_hold_after_seconds=1800.0))
    assert validate(s, result) == []
    one = result.placement("one")
    assert one is not None and [p.node for p in one.pods] == ["c-n7"]
    assert result.placement("pair") is None
    assert result.placement("four") is None  # only n4 and n5 could take it: both held
    four = next(u for u in result.unplaced if u.job == "four")
    assert (four.constraint, "kept for pair (a gang of 2 pods waiting" in four.reason) == ("capacity", True)


@pytest.mark.parametrize(
    ("after", "now", "expect"),
    [
        (None, 4000.0, None),     # off: the shipped default until measured otherwise
        (1800.0, 1000.0, None),   # not waited long enough
        (1800.0, 4000.0, "pair"),
    ],
    ids=["off by default", "inside the bound nothing is held", "past the bound the gang is held for"],
)
def test_the_hold_applies_only_past_its_bound(after: float | None, now: float, expect: str | None) -> None:
    cluster = tiered("c", [0, 0, 0, 8, 8, 4, 0, 0])
    s = _waited(snap([cluster], [job("pair", pods=2, topology=hard(1))]), now)
    assert _held(s, after)[1] == expect


def test_a_single_pod_is_never_held_for() -> None:
    cluster = tiered("c", [4, 4, 4, 4, 4, 4, 4, 4])
    s = _waited(snap([cluster], [job("whole")]), 9000.0)
    assert _held(s, 0.0)[1] is None


# -- the enqueue gate (``admission.enqueue``) -----------------------------------------------

def _gate(free: list[int], jobs: list[Job], factor: float | None) -> tuple[list[str], dict[str, str]]:
    s = snap([tiered("c", free)], jobs)
    admitted, waiting = enqueue(s, factor)
    return [p.job.name for p in admitted.pending], {u.job: u.constraint for u in waiting}


@pytest.mark.parametrize(
    ("free", "jobs", "factor", "admitted"),
    [
        # 64 GPUs, none used: the budget is 76 (64 x 1.2); 48 + 32 > 76, so "late" waits.
        ([8] * 8, [job("first", pods=6), job("late", pods=4)], 1.2, ["first"]),
        ([8] * 8, [job("first", pods=6), job("late", pods=1)], 1.2, ["first", "late"]),
        # off: everything is planned
        ([8] * 8, [job("first", pods=6), job("late", pods=3)], None, ["first", "late"]),
        # the oldest job is always admitted, even when it alone exceeds the budget
        ([8] * 8, [job("huge", pods=8, gpus=8), job("late", pods=1)], 1.0, ["huge"]),
        # a job no cluster could ever hold takes no budget (it is planned to be told why)
        ([8] * 8, [job("never", pods=9), job("next", pods=6)], 1.2, ["never", "next"]),
    ],
    ids=["a later job waits once the budget is full", "a small one still fits the budget",
         "no factor, no gate", "the oldest is always admitted", "impossible jobs hold no budget"],
)
def test_the_enqueue_gate_admits_oldest_first_within_the_overcommit_budget(
        free: list[int], jobs: list[Job], factor: float | None, admitted: list[str]) -> None:
    names, waiting = _gate(free, jobs, factor)
    assert names == admitted
    assert set(waiting) == {j.name for j in jobs} - set(admitted)
    assert set(waiting.values()) <= {"priority"}


def test_a_gated_plan_reports_every_job_and_validates() -> None:
    s = snap([tiered("c", [8] * 8)], [job("first", pods=6), job("late", pods=4), job("small", gpus=1)])
    result = plan(s, replace(FAST, enqueue_overcommit=1.2))
    assert validate(s, result) == []
    assert result.placement("first") is not None and result.placement("small") is not None
    assert next(u for u in result.unplaced if u.job == "late").reason.startswith("not admitted yet")
