"""Bench metrics on tiny hand-computed runs (the numbers in the asserts are worked by hand)."""

from __future__ import annotations

import pytest
from simkit import scenario

from federation.domain.resources import GPU, Resources
from federation.sim.metrics import (
    compute,
    fairness_deviation,
    gpu_goodput,
    gpu_utilization,
    lowest_tier_fraction,
    mean_gang_tier,
    objective_gap,
    percentile,
)
from federation.sim.simulator import Sample, SimResult, SimulatedRound
from federation.sim.tracking import JobOutcome

CONTRACT = ("jobs", "placed", "avgJctSeconds", "makespanSeconds", "gpuUtilization", "lowestTierFraction",
            "meanGangTier", "fairnessMaxDeviation", "roundLatencyP50Ms", "roundLatencyP99Ms", "placementsPerSecond")


def gpus(n: int) -> Resources:
    return Resources({GPU: n})


def rec(name: str, gang: int = 2, tier: int | None = 1, best: int | None = 1, holdable: bool = True,
        queue: str = "a", submitted: float = 0.0, finished: float | None = 200.0) -> JobOutcome:
    started = None if tier is None else submitted
    return JobOutcome(name, queue, gang, submitted, 100.0, holdable, best, first_start=started, last_start=started,
                     finished_at=finished if tier is not None else None, tier=tier, starts=0 if tier is None else 1)


def toy(samples: list[Sample], jobs: list[JobOutcome], weights: tuple[int, int] = (1, 1),
        rounds: tuple[SimulatedRound, ...] = ()) -> SimResult:
    s = scenario(queues=[{"name": "a", "weight": weights[0]}, {"name": "b", "weight": weights[1]}], jobs=[])
    end = max((j.finished_at or 0.0) for j in jobs)
    return SimResult(s, tuple(jobs), rounds, tuple(samples), (), end)


def sample(at: float, used: int, cap: int, usage: dict[str, int], demand: dict[str, int]) -> Sample:
    return Sample(at, used, gpus(cap), tuple((q, gpus(v)) for q, v in sorted(usage.items())),
                  tuple((q, gpus(v)) for q, v in sorted(demand.items())))


def test_lowest_tier_fraction_counts_only_placed_holdable_gangs_of_two_or_more() -> None:
    jobs = [
        rec("at-lowest", tier=1, best=1),
        rec("one-tier-up", gang=4, tier=2, best=1),
        rec("lowest-is-two", tier=2, best=2),
        rec("single-pod", gang=1, tier=3, best=1),
        rec("never-placed", tier=None),
        rec("impossible", holdable=False, best=None, tier=None),
    ]
    assert lowest_tier_fraction(jobs) == pytest.approx(2 / 3)
    assert mean_gang_tier(jobs) == pytest.approx(5 / 3)
    assert lowest_tier_fraction([rec("solo", gang=1)]) is None


def test_gpu_utilization_is_time_weighted_over_usable_capacity() -> None:
    result = toy([sample(0, 8, 16, {}, {}), sample(100, 16, 16, {}, {})], [rec("x")])
    assert gpu_utilization(result) == pytest.approx((8 * 100 + 16 * 100) / (16 * 200))


def test_goodput_counts_nominal_work_of_finished_jobs_only() -> None:
    done = JobOutcome("done", "a", 1, 0.0, 100.0, True, 1, 0.0, 0.0, 200.0, "c1", 2, gpus=8, starts=1, work_gpus=8)
    result = toy([sample(0, 8, 16, {}, {})], [done, rec("never", tier=None)])
    assert gpu_goodput(result) == pytest.approx(8 * 100 / (16 * 200))


def test_fairness_deviation_of_two_equal_queues() -> None:
    # 0-100 s: a holds all 8 GPUs while b waits for 8 -> fair shares 0.5/0.5, deviation 0.5 each.
    # 100-200 s: 4 and 4 -> deviation 0. Mean over 200 s: 0.25 for both queues.
    samples = [sample(0, 8, 8, {"a": 8}, {"a": 8, "b": 8}), sample(100, 8, 8, {"a": 4, "b": 4}, {"a": 4, "b": 4})]
    assert fairness_deviation(toy(samples, [rec("x")])) == pytest.approx(0.25)


def test_fairness_deviation_uses_the_weights_and_caps_by_demand() -> None:
    # Weights 3:1. 0-100 s: fair 0.75/0.25, shares 1/0 -> 0.25 each. 100-200 s: demands 0.5/0.5
    # fill exactly (a is capped by its demand) -> 0. Mean: 0.125.
    samples = [sample(0, 8, 8, {"a": 8}, {"a": 8, "b": 8}), sample(100, 8, 8, {"a": 4, "b": 4}, {"a": 4, "b": 4})]
    assert fairness_deviation(toy(samples, [rec("x")], weights=(3, 1))) == pytest.approx(0.125)


def test_a_queue_without_demand_has_no_fair_share() -> None:
    samples = [sample(0, 4, 8, {"a": 4}, {"a": 4})]
    assert fairness_deviation(toy(samples, [rec("x")])) == pytest.approx(0.0)


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile([], 50)) == (50.0, 99.0, 0.0)


def round_(status: str, objective: float, bound: float) -> SimulatedRound:
    return SimulatedRound(0.0, 0.01, 1, 1, 0, 0, status, objective, bound)


def test_objective_gap_averages_the_rounds_the_solver_decided() -> None:
    rounds = [round_("OPTIMAL", 100, 100), round_("FEASIBLE", 90, 100), round_("GREEDY", 1, 50)]
    assert objective_gap(rounds) == pytest.approx((0.0 + 0.1) / 2)
    assert objective_gap([round_("GREEDY", 1, 1)]) is None


def test_compute_holds_every_contract_metric() -> None:
    rounds = (SimulatedRound(0.0, 0.002, 2, 2, 0, 0, "OPTIMAL", 10.0, 10.0),
              SimulatedRound(5.0, 0.004, 1, 1, 0, 0, "OPTIMAL", 10.0, 10.0))
    jobs = [rec("x", submitted=0.0, finished=150.0), rec("y", submitted=50.0, finished=200.0)]
    result = toy([sample(0, 8, 8, {"a": 8}, {"a": 8})], jobs, rounds=rounds)
    metrics = compute(result, with_gap=True)
    assert set(CONTRACT) <= set(metrics) and metrics["objectiveGapToBound"] == 0.0
    assert metrics["avgJctSeconds"] == pytest.approx(150.0) and metrics["makespanSeconds"] == 200.0
    assert metrics["placementsPerSecond"] == pytest.approx(3 / 0.006)
    assert metrics["roundLatencyP50Ms"] == pytest.approx(2.0) and metrics["roundLatencyP99Ms"] == pytest.approx(4.0)
    assert "objectiveGapToBound" not in compute(result)
