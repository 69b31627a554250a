"""The packing term charges the room a placement leaves, not the room the domain had.

Why (``Scoring.leftover``): charged on the domain's emptiness before the placement, a gang
paid for the whole nodes it needs, so between jobs of equal value the model kept choosing
the small ones and the gangs waited. Each row gives a domain's free and allocatable GPUs at
round start, the job's GPUs, and the expected cost per unit (0 = the job fills it .. 7).
"""

from __future__ import annotations

import pytest
from placement_builders import flat, job, snap, tiered

from federation.domain import PlanLimits
from federation.placement import greedy_plan, plan, score_vector, validate
from federation.placement.score import PACK_PENALTY_MAX, Scoring

ROOT = "<cluster-root>"

ROWS = [
    # (free per node, pods x GPUs of the job, expected leftover, expected emptiness before)
    ([8, 8, 0, 0], (2, 8), 0, 4),  # a two-node gang fills the two free nodes: nothing left
    ([8, 8, 0, 0], (1, 8), 2, 4),  # one node of four left free
    ([8, 8, 0, 0], (1, 1), 3, 4),  # 15 of 32 GPUs left free
    ([8, 8, 8, 8], (1, 1), PACK_PENALTY_MAX, PACK_PENALTY_MAX),  # an empty domain stays (nearly) empty
    ([8, 8, 8, 8], (4, 8), 0, PACK_PENALTY_MAX),  # a whole-domain gang leaves nothing
    ([1, 0, 0, 0], (1, 1), 0, 0),  # the last GPU
]


@pytest.mark.parametrize(("free", "shape", "left", "before"), ROWS,
                         ids=[f"{f} {s[0]}x{s[1]}" for f, s, _, _ in ROWS])
def test_leftover_is_the_room_left_in_the_domain(free: list[int], shape: tuple[int, int], left: int,
                                                 before: int) -> None:
    j = job("j", shape[0], gpus=shape[1])
    sc = Scoring(snap([flat("a", free)], [j]))
    assert sc.leftover(j, "a", ROOT) == left
    assert sc.emptiness("a", ROOT) == before


def test_the_same_domain_costs_a_big_job_less_per_unit_than_a_small_one() -> None:
    """Best fit decreasing: of two jobs that can only share one domain, the one that fills it pays less."""
    gang, small = job("gang", 2, gpus=8), job("small", 1, gpus=2)
    sc = Scoring(snap([flat("a", [8, 8, 0, 0])], [gang, small]))
    assert sc.leftover(gang, "a", ROOT) < sc.leftover(small, "a", ROOT)


def test_a_leaf_the_gang_fills_costs_it_nothing_and_a_small_job_prefers_the_fuller_leaf() -> None:
    # leaf0: 2 whole nodes free; leaf1: 2 GPUs free on one node.
    c = tiered("t", [8, 8, 2, 0, 0, 0, 0, 0])
    gang, small = job("gang", 2, gpus=8), job("small", 1, gpus=1)
    sc = Scoring(snap([c], [gang, small]))
    assert sc.leftover(gang, "t", "t-leaf0") == 0
    assert sc.leftover(small, "t", "t-leaf1") < sc.leftover(small, "t", "t-leaf0")


def test_the_model_fills_a_domain_with_one_gang_rather_than_many_small_jobs() -> None:
    """Two whole nodes free; four 4-GPU jobs or one 16-GPU gang fill them. The greedy pass
    starts the small ones (they come first in its order). Charged on the domain's emptiness
    before, the small ones were worth more (three more job starts, same packing cost) and
    the greedy plan was kept; charged on what is left, the gang leaves nothing, pays 96
    less in packing than the starts it gives up (48), and the model's plan wins."""
    c = flat("a", [8, 8])
    jobs = [job(f"s{i}", 1, gpus=4) for i in range(4)] + [job("gang", 2, gpus=8)]
    s = snap([c], jobs)
    greedy = greedy_plan(s)
    best = plan(s, PlanLimits(time_limit_seconds=5.0))
    assert validate(s, greedy) == [] and validate(s, best) == []
    assert {p.job for p in greedy.placements} == {f"s{i}" for i in range(4)}
    assert {p.job for p in best.placements} == {"gang"}
    assert score_vector(s, best) > score_vector(s, greedy)


def test_an_elastic_job_is_charged_for_what_its_gang_leaves() -> None:
    """Its extra replicas only take room that is left over (placement/elastic.py), so the
    room its gang leaves is what the placement decides."""
    elastic = job("e", 4, gpus=8, min_available=2)
    sc = Scoring(snap([flat("a", [8, 8, 8, 8])], [elastic]))
    assert sc.gang_need(elastic, "nvidia.com/gpu") == 16
    assert sc.leftover(elastic, "a", ROOT) == 4
