"""Preferred node affinity is a soft term of the objective, below topology
(placement/preference.py, cpsat/preference.py): between domains of one tier the one whose
nodes match the preference wins; a preferred domain never beats a lower tier."""

from __future__ import annotations

import pytest
from placement_builders import snap, tiered
from test_node_constraints import job, labelled, run, task

from federation.placement.preference import domain_preference
from federation.placement.score import GUARD_MAX, PACK_PENALTY_MAX, PREFER_MAX, TIER_PENALTY, Scoring

ZONE_B = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 40, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}


def test_the_preference_stays_below_one_tier_step() -> None:
    assert PREFER_MAX >= 1
    assert PREFER_MAX + PACK_PENALTY_MAX + GUARD_MAX < TIER_PENALTY


def test_a_domain_scores_by_how_many_of_its_nodes_match() -> None:
    c = labelled(tiered("a", [8, 8, 8, 8]), {2: {"zone": "b"}, 3: {"zone": "b"}})
    (constraints,) = job("g", task("w", 2, affinity=ZONE_B)).node_constraints
    assert domain_preference(c, "a-leaf1", (constraints,), PREFER_MAX) == PREFER_MAX
    assert domain_preference(c, "a-leaf0", (constraints,), PREFER_MAX) == 0
    assert 0 < domain_preference(c, "a-spine0", (constraints,), PREFER_MAX) < PREFER_MAX


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_of_two_equal_tier_domains_the_preferred_one_wins(planner: str) -> None:
    # Two empty leaves, leaf1's nodes in zone b: the gang goes to leaf1.
    c = labelled(tiered("a", [8, 8, 8, 8]), {2: {"zone": "b"}, 3: {"zone": "b"}})
    s = snap([c], [job("g", task("w", 2, affinity=ZONE_B))])
    (placed,) = run(planner, s).placements
    assert (placed.hypernode, placed.tier) == ("a-leaf1", 1)
    assert Scoring(s).terms(placed)["preference"] == PREFER_MAX
    # the same without the preference goes where packing and the tie-break put it: leaf0
    (plain,) = run(planner, snap([c], [job("g", task("w", 2))])).placements
    assert plain.hypernode == "a-leaf0"


def test_the_preference_beats_a_small_packing_difference_in_cpsat() -> None:
    # leaf0 is the fuller domain (2 GPUs used: the 4-GPU pod leaves it at leftover 5 against
    # 6 in leaf1), so greedy's best fit takes it; CP-SAT prices the preference (2) above that
    # packing difference (1).
    c = labelled(tiered("a", [6, 8, 8, 8]), {2: {"zone": "b"}, 3: {"zone": "b"}})
    s = snap([c], [job("g", task("w", 1, gpus=4, affinity=ZONE_B))])
    assert run("greedy", s).placements[0].hypernode == "a-leaf0"
    (placed,) = run("cpsat", s).placements
    assert placed.hypernode == "a-leaf1"


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_a_preferred_domain_never_beats_a_lower_tier(planner: str) -> None:
    # zone b is a-n2, a-n3, but a-n3 is full: the gang of two fits leaf1 no more. The spine
    # (tier 2) would put one pod in zone b; leaf0 (tier 1, no preferred node) must win.
    c = labelled(tiered("a", [8, 8, 8, 0]), {2: {"zone": "b"}, 3: {"zone": "b"}})
    (placed,) = run(planner, snap([c], [job("g", task("w", 2, affinity=ZONE_B))])).placements
    assert (placed.hypernode, placed.tier) == ("a-leaf0", 1)
