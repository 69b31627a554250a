"""Tier reservation (``placement/tier_reserve.py``, opt-in ``--reserve-tier-after``): a gang a leaf
could hold that has waited past the bound is offered only its lowest tier, and the nodes it
needs there are held. Tables over tiny tiered clusters; every plan validated, with the
reservation checked by ``validate(..., limits=...)``.

Cluster shape (``tiered``, leaf=2): leaves of 2 nodes, spines of 2 leaves, so nodes 0-3
are spine0 (leaf0 = n0,n1; leaf1 = n2,n3) and nodes 4-7 are spine1 (leaf2, leaf3).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from placement_builders import FAST, hard, job, snap, soft, tiered

from federation.domain import FederationSnapshot, Job, PendingJob
from federation.domain.plans import Placement, Plan, PlanLimits
from federation.placement import greedy_plan, plan, validate
from federation.placement.opening import open_round
from federation.placement.tier_reserve import MAX_QUEUED, MAX_RESERVED, reserve_tiers

BOUND = 300.0
RESERVING = replace(FAST, tier_reserve_after_seconds=BOUND)
OFF = replace(FAST, tier_reserve_after_seconds=None)
# One free node in each leaf: a 2-node gang fits no leaf, but spine0 (n1 + n3) holds it at tier 2.
SCATTERED = [0, 8, 0, 8, 0, 0, 0, 4]


def _waited(s: FederationSnapshot, seconds: float) -> FederationSnapshot:
    return replace(s, now=seconds, pending=tuple(PendingJob(p.job, float(i)) for i, p in enumerate(s.pending)))


def _planned(planner: str, s: FederationSnapshot, limits: PlanLimits) -> Plan:
    result = greedy_plan(s, limits) if planner == "greedy" else plan(s, limits)
    assert validate(s, result) == []
    assert validate(s, result, limits=limits) == []
    return result


def _tier(result: Plan, name: str) -> int | None:
    placed = result.placement(name)
    return placed.tier if placed is not None else None


def test_off_by_default_volcano_semantics() -> None:
    assert PlanLimits().tier_reserve_after_seconds is None
    s = _waited(snap([tiered("c", SCATTERED)], [job("pair", pods=2, topology=hard(2))]), 4000.0)
    assert _tier(_planned("greedy", s, replace(PlanLimits(), time_limit_seconds=0.3, workers=1)), "pair") == 2


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize(
    ("gang", "limits", "waited", "tier"),
    [
        (job("pair", pods=2, topology=hard(2)), OFF, 4000.0, 2),
        (job("pair", pods=2, topology=hard(2)), RESERVING, 100.0, 2),
        (job("pair", pods=2, topology=hard(2)), RESERVING, 4000.0, None),
        (job("pair", pods=2, topology=soft(1)), RESERVING, 4000.0, None),
        (job("pair", pods=2), RESERVING, 4000.0, None),
        (job("pair", pods=2, topology=hard(1)), OFF, 4000.0, None),
    ],
    ids=["off: Volcano semantics, it takes the spine at once",
         "inside the bound it takes the spine at once",
         "past the bound a hard tier-2 gang waits for its leaf",
         "so does a soft gang",
         "and a gang with no topology constraint",
         "a hard tier-1 gang waits anyway (no change)"],
)
def test_a_gang_past_the_bound_is_placed_only_at_its_lowest_tier(
        planner: str, gang: Job, limits: PlanLimits, waited: float, tier: int | None) -> None:
    s = _waited(snap([tiered("c", SCATTERED)], [gang]), waited)
    assert _tier(_planned(planner, s, limits), "pair") == tier


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_room_at_its_lowest_tier_now_is_taken_and_nothing_is_held(planner: str) -> None:
    s = _waited(snap([tiered("c", [0, 8, 8, 8, 0, 0, 0, 4])], [job("pair", pods=2, topology=hard(2))]), 4000.0)
    rnd = open_round(s, RESERVING)
    assert rnd.holds == [] and rnd.tier_reserved == {}
    placed = _planned(planner, s, RESERVING).placement("pair")
    assert placed is not None and (placed.hypernode, placed.tier) == ("c-leaf1", 1)


def test_the_held_nodes_are_the_fewest_freest_of_the_leaf_closest_to_holding_the_gang() -> None:
    # leaf0: n1 free; leaf1: n3 free; leaf3: n7 half free. Ties on missing GPUs go to the
    # first cluster/domain by name: leaf0, whose free node n1 and busy node n0 are held.
    s = _waited(snap([tiered("c", SCATTERED)], [job("pair", pods=2, topology=hard(2)), job("small", gpus=8)]),
                4000.0)
    rnd = open_round(s, RESERVING)
    assert rnd.tier_reserved == {"pair": BOUND}
    [(kept, cluster, domain, held, _, constraint)] = rnd.holds
    assert (kept, cluster, domain, constraint) == ("pair", "c", "c-leaf0", "capacity")
    assert held == frozenset({("c", "c-n0"), ("c", "c-n1")})
    assert rnd.barred["small"] == held


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_smaller_work_backfills_outside_the_held_nodes_and_is_told_why_not_inside(planner: str) -> None:
    # pair holds n0, n1 (leaf0). "small" (8 GPUs) still fits n3; "second" (another 8) would
    # have needed n1 and is kept out, with the hold named as the reason.
    jobs = [job("pair", pods=2, topology=hard(2)), job("small", gpus=8), job("second", gpus=8)]
    s = _waited(snap([tiered("c", SCATTERED)], jobs), 4000.0)
    result = _planned(planner, s, RESERVING)
    assert result.placement("pair") is None
    small = result.placement("small")
    assert small is not None and [p.node for p in small.pods] == ["c-n3"]
    assert result.placement("second") is None
    second = next(u for u in result.unplaced if u.job == "second")
    assert second.constraint == "capacity" and "kept for pair (a gang of 2 pods waiting over 300 s" in second.reason


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_a_reserved_gang_is_told_it_holds_out_for_its_leaf_while_a_spine_has_room(planner: str) -> None:
    s = _waited(snap([tiered("c", SCATTERED)], [job("pair", pods=2, topology=hard(2))]), 4000.0)
    pair = next(u for u in _planned(planner, s, RESERVING).unplaced if u.job == "pair")
    assert pair.constraint == "topology"
    assert "holding out for a tier-1 domain, room held for it there after it waited over 300 s" in pair.reason
    assert "room exists now at tier 2" in pair.reason


@pytest.mark.parametrize(
    ("jobs", "free", "expect"),
    [
        ([job("spine-gang", pods=4, topology=soft(1))], SCATTERED, []),
        ([job("one", gpus=8)], SCATTERED, []),
        ([job("pair", pods=2, topology=hard(2))] + [job(f"big-{i}", pods=2) for i in range(6)], SCATTERED, None),
        ([job("pair", pods=2, topology=hard(2), topology_wait_seconds=0.0)], SCATTERED, []),
    ],
    ids=["a gang that needs a spine is never reserved (it would hold half the cluster)",
         "a single pod is never reserved",
         "the queue exceeds 1.5 x the fleet's GPUs: nothing is reserved",
         "a gang whose submitter set a topology wait (even 0) is governed by it"],
)
def test_who_is_never_reserved(jobs: list[Job], free: list[int], expect: list[str] | None) -> None:
    s = _waited(snap([tiered("c", free)], jobs), 4000.0)
    if expect is None:  # 7 gangs of 16 GPUs = 112 pending GPUs > 1.5 x 64 in the cluster
        assert sum(p.job.requests.get("nvidia.com/gpu") for p in s.pending) > MAX_QUEUED * 64
        expect = []
    assert reserve_tiers(open_round(s, OFF), BOUND) == expect


def test_at_most_max_reserved_gangs_hold_room_each_on_its_own_nodes() -> None:
    # 4 spines of 2 leaves of 2 nodes: one free node per leaf, 6 leaf-sized gangs queued
    # (96 GPUs pending <= 1.5 x 128 in the cluster).
    free = [0, 8] * 8
    gangs = [job(f"g{i}", pods=2, topology=hard(3)) for i in range(6)]
    s = _waited(snap([tiered("c", free)], gangs), 4000.0)
    rnd = open_round(s, RESERVING)
    assert [h[0] for h in rnd.holds] == [f"g{i}" for i in range(MAX_RESERVED)]
    held = [h[3] for h in rnd.holds]
    assert all(a.isdisjoint(b) for i, a in enumerate(held) for b in held[i + 1:])
    assert all(len(h) == 2 for h in held)


def test_validate_flags_a_plan_that_ignores_the_reservation() -> None:
    s = _waited(snap([tiered("c", SCATTERED)], [job("pair", pods=2, topology=hard(2)), job("small", gpus=8)]),
                4000.0)
    wide = greedy_plan(s, OFF)  # Volcano semantics: pair takes the spine (n1 + n3)
    pair = wide.placement("pair")
    assert pair is not None and pair.tier == 2
    assert validate(s, wide) == []
    assert any("pair" in p and "lowest tier" in p for p in validate(s, wide, limits=RESERVING))
    small = Placement("small", "c", "c-leaf0", 1, (replace(pair.pods[0], task="worker", index=0, node="c-n1"),))
    intruder = replace(wide, placements=(small,))
    assert any("held for pair" in p for p in validate(s, intruder, limits=RESERVING))
