"""The jobs-started term: ``JOB_START`` per job placed, whatever its size (``score.JOB_START``).

Why: ``VALUE`` per unit counts GPUs; the average wait and JCT count jobs. Between plans that
place the same units, the one that starts more jobs leaves fewer waiting.
"""

from __future__ import annotations

from placement_builders import flat, job, running, snap

from federation.domain import PlanLimits
from federation.placement import greedy_plan, plan, score_vector, validate
from federation.placement.score import FAIR_BONUS, JOB_START, VALUE, Scoring

ROOT = "<cluster-root>"


def test_every_placement_earns_one_start_on_top_of_its_units() -> None:
    gang, small = job("gang", 2, gpus=8), job("small", 1, gpus=1)
    sc = Scoring(snap([flat("a", [8, 8, 8, 8])], [gang, small]))
    for j in (gang, small):
        per_unit = VALUE - sc.leftover(j, "a", ROOT) - sc.guard("a", ROOT)
        assert sc.placement_value(j, "a", ROOT, 1) == JOB_START + sc.units(j) * per_unit


def test_a_stopped_job_loses_its_start_too() -> None:
    c = flat("a", [0])
    victim = running(job("lo", gpus=8), c, ["a-n0"], started_at=0.0)
    sc = Scoring(snap([c], [job("hi", priority=5)], runs=[victim], now=0.0))
    assert sc.victim_cost(victim) == JOB_START + VALUE * sc.units(victim.job) + sc.run_cost(victim)


def test_the_start_never_outweighs_a_units_value_or_a_starved_queues_credit() -> None:
    """Layering: a start is worth a quarter of one unit's ``VALUE``, so it never outweighs a
    queue's fair-share credit per unit and never turns leaving work pending into a gain."""
    assert 0 < JOB_START <= VALUE // 4 < FAIR_BONUS


def test_of_two_plans_placing_the_same_gpus_the_model_starts_more_jobs() -> None:
    """One free GPU on each of two nodes (of five: 25 units per GPU): a gang of two 1-GPU pods (first in the greedy
    order) or two 1-GPU jobs. Same units, same packing cost (nothing left either way);
    the two jobs are worth one more start."""
    s = snap([flat("a", [1, 1, 0, 0, 0])], [job("pair", 2, gpus=1), job("one-a", gpus=1), job("one-b", gpus=1)])
    greedy = greedy_plan(s)
    best = plan(s, PlanLimits(time_limit_seconds=5.0))
    assert validate(s, greedy) == [] and validate(s, best) == []
    assert {p.job for p in greedy.placements} == {"pair"}
    assert {p.job for p in best.placements} == {"one-a", "one-b"}
    assert score_vector(s, best)[0] - score_vector(s, greedy)[0] == JOB_START
