"""Small rounds are solved reproducibly: CP-SAT searches them with one worker.

Why (``cpsat/solve._solver``): the parallel portfolio returns whichever optimum a worker
finds first, so the same snapshot could give different plans on a busy and an idle host.
Large rounds keep the portfolio.
"""

from __future__ import annotations

from typing import Any

import pytest
from placement_builders import Queue, job, snap, soft, tiered

from federation.domain import FederationSnapshot, PlanLimits
from federation.placement.cpsat import solve, windows

LIMITS = PlanLimits(time_limit_seconds=2.0, workers=2)


def _round(jobs: int) -> FederationSnapshot:
    """Jobs of equal value competing for one cluster: several optima, one chosen."""
    cluster = tiered("c", [8, 8, 4, 8, 8, 2, 8, 8])
    pending = [job(f"j{i}", pods=1 + i % 3, gpus=4 if i % 2 else 8, queue=f"q{i % 2}", topology=soft(1))
               for i in range(jobs)]
    return snap([cluster], pending, [Queue("q0"), Queue("q1")], now=100.0)


def _flags(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    seen: list[bool] = []
    real = solve._solver

    def recording(seconds: float, limits: PlanLimits, reproducible: bool = False) -> Any:
        seen.append(reproducible)
        return real(seconds, limits, reproducible)

    monkeypatch.setattr(solve, "_solver", recording)
    return seen


def test_a_small_round_asks_for_a_reproducible_search(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _flags(monkeypatch)
    windows.plan_cpsat(_round(6), LIMITS)
    assert seen and all(seen)


def test_a_small_round_solved_band_by_band_asks_for_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(windows, "JOINT_MAX_JOBS", 0)  # no joint model: the per-band windows
    seen = _flags(monkeypatch)
    windows.plan_cpsat(_round(6), LIMITS)
    assert seen and all(seen)


def test_a_large_round_keeps_the_parallel_portfolio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(windows, "JOINT_MAX_JOBS", 0)
    monkeypatch.setattr(windows, "SMALL_ROUND_JOBS", 3)  # 6 pending jobs count as a large round here
    seen = _flags(monkeypatch)
    windows.plan_cpsat(_round(6), LIMITS)
    assert seen and not any(seen)


def test_the_reproducible_solver_searches_with_one_worker() -> None:
    assert solve._solver(1.0, LIMITS, reproducible=True).parameters.num_workers == 1
    assert solve._solver(1.0, LIMITS).parameters.num_workers == LIMITS.workers


def test_the_same_small_round_gives_the_same_plan_every_time() -> None:
    snapshot = _round(12)
    plans = {tuple(sorted((p.job, p.cluster, p.hypernode, tuple(a.node for a in p.pods))
                          for p in windows.plan_cpsat(snapshot, LIMITS).placements))
             for _ in range(5)}
    assert len(plans) == 1
