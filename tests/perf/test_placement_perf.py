"""Placement benchmarks (issue 3), reported in docs/benchmarks.md under
"Placement round latency and quality (issue 3)".

    .venv/bin/python -m pytest tests/perf/test_placement_perf.py -m perf -s

1. Round latency: ``plan()`` on 2,000 pending gangs over 100 clusters x 100 eight-GPU
   nodes with three-tier HyperNode trees (``instances.synthetic``), one instance per
   seed; p50/p99 of wall and CPU time; baseline: ``greedy_plan`` on the same instances;
   how often and by how much the plan beats the greedy plan on ``score_vector`` (issue 12).
2. Full re-plan: ``plan()`` on 10,000 pending jobs over the same fleet in a 1.5 s budget;
   baseline greedy (what it places, its time).
3. Mid-size rounds (120 pending gangs, 10 clusters x 16 nodes, 40 % busy): how much
   the 1 s ``plan()`` improves the highest band's value over ``greedy_plan``.
4. Optimality gap: on rounds small enough for CP-SAT to prove optimality
   (``instances.small``), the shipped configuration (``plan()``, 1 s) against the exact
   lexicographic optimum (``cpsat.reference.reference_plan``); baseline: the greedy gap.
   The gap is ``(score(optimum) - score(plan)) / |score(optimum)|``.

Figures are printed and written to ``$PLACEMENT_PERF_JSON`` (default
``.placement-perf.json``). Only plan validity and the quality gap are asserted, never
wall-clock limits (the machine is shared).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from federation.domain import FederationSnapshot, Plan, PlanLimits
from federation.placement import greedy_plan, plan, validate
from federation.placement.cpsat.reference import reference_plan
from federation.placement.score import Scoring
from tests.fixtures.instances import small, synthetic

pytestmark = pytest.mark.perf
RESULTS: dict[str, Any] = {}
OUT = Path(os.environ.get("PLACEMENT_PERF_JSON", ".placement-perf.json"))
ROUNDS = int(os.environ.get("PLACEMENT_PERF_ROUNDS", "12"))
GAP_SEEDS = int(os.environ.get("PLACEMENT_PERF_GAP_SEEDS", "30"))
# The shipped round budget is 1 s; another value shows what the decomposition does when the
# greedy pass leaves it a window (on a loaded host the greedy pass alone can take the 1 s).
ROUND_BUDGET = float(os.environ.get("PLACEMENT_PERF_ROUND_BUDGET", "1.0"))


@pytest.fixture(autouse=True)
def _only_with_perf_marker(request: pytest.FixtureRequest) -> None:
    expr = request.config.getoption("-m") or ""
    if "perf" not in expr or "not perf" in expr:
        pytest.skip("benchmarks run only with -m perf")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(fn: Callable[[], Plan]) -> tuple[Plan, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _summary(walls: list[float], cpus: list[float]) -> dict[str, float]:
    return {
        "p50_wall_ms": 1000 * statistics.median(walls), "p99_wall_ms": 1000 * _pct(walls, 0.99),
        "p50_cpu_ms": 1000 * statistics.median(cpus), "p99_cpu_ms": 1000 * _pct(cpus, 0.99),
        "min_wall_ms": 1000 * min(walls), "min_cpu_ms": 1000 * min(cpus),
    }


def _save(key: str, value: Any) -> None:
    RESULTS[key] = value
    previous = json.loads(OUT.read_text()) if OUT.exists() else {}
    previous.update(RESULTS)
    OUT.write_text(json.dumps(previous, indent=2, sort_keys=True))
    print(f"\n{key}: {json.dumps(value, sort_keys=True)}")


def _load() -> str:
    return os.getloadavg().__repr__() if hasattr(os, "getloadavg") else "n/a"


def _greedy(snap: FederationSnapshot, limits: PlanLimits) -> Plan:
    """The greedy-only baseline under the same cyclic-GC pause ``plan()`` applies to itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return greedy_plan(snap, limits)
    finally:
        if enabled:
            gc.enable()


def _both(snap: FederationSnapshot, limits: PlanLimits,
          plan_first: bool) -> tuple[Plan, float, float, Plan, float, float]:
    """Greedy baseline and ``plan()`` on one instance, in alternating order: the second run
    on a snapshot finds its per-cluster caches (empty profiles, usable nodes) warm."""
    if plan_first:
        p, w, c = _timed(lambda: plan(snap, limits))
        g, gw, gc_ = _timed(lambda: _greedy(snap, limits))
    else:
        g, gw, gc_ = _timed(lambda: _greedy(snap, limits))
        p, w, c = _timed(lambda: plan(snap, limits))
    return g, gw, gc_, p, w, c


def _gains(snap: FederationSnapshot, p: Plan, g: Plan) -> dict[str, Any]:
    """How the shipped plan compares with the greedy plan of the same round, on ``score_vector``."""
    sc = Scoring(snap)
    vp, vg = sc.vector(p), sc.vector(g)
    top = next((i for i, (a, b) in enumerate(zip(vp, vg, strict=True)) if a != b), None)
    return {
        "improved": vp > vg, "worse": vp < vg, "status": p.status,
        "top_band_gain": (vp[0] - vg[0]) / abs(vg[0]) if vg and vg[0] else 0.0,
        "first_changed_band": top,
        "first_changed_band_gain": (vp[top] - vg[top]) / abs(vg[top]) if top is not None and vg[top] else 0.0,
        "placed": len(p.placements), "placed_greedy": len(g.placements),
    }


def test_round_latency_2000_gangs(benchmark: Any) -> None:
    """Issue 12 row: a 2,000-gang round over 100 clusters x 100 nodes, ``ROUNDS`` seeds.

    Per seed the greedy-only baseline and then ``plan()`` (1 s budget, 2 workers) run on the
    same instance; recorded: wall and CPU p50/p99 of both, their ratio, and how often (and
    by how much, on ``score_vector``) the shipped plan beats the greedy one."""
    limits = PlanLimits(time_limit_seconds=ROUND_BUDGET, workers=2)
    walls, cpus, g_walls, g_cpus, rows, loads = [], [], [], [], [], []
    for seed in range(ROUNDS):
        snap = synthetic(seed=seed, clusters=100, nodes=100, pending=2000)
        loads.append(os.getloadavg()[0])
        g, gw, gc_, p, w, c = _both(snap, limits, plan_first=seed % 2 == 1)
        assert validate(snap, p) == []
        row = _gains(snap, p, g)
        assert not row["worse"]  # never worse than greedy, by construction
        rows.append({**row, "seed": seed, "wall_ms": round(1000 * w), "cpu_ms": round(1000 * c),
                     "greedy_wall_ms": round(1000 * gw), "greedy_cpu_ms": round(1000 * gc_)})
        walls.append(w)
        cpus.append(c)
        g_walls.append(gw)
        g_cpus.append(gc_)
    benchmark.pedantic(plan, args=(synthetic(seed=0, clusters=100, nodes=100, pending=2000), limits),
                       rounds=3, iterations=1)
    improved = [r for r in rows if r["improved"]]
    statuses = [r["status"] for r in rows]
    _save("round_2000x100x100" + ("" if ROUND_BUDGET == 1.0 else f"_budget{ROUND_BUDGET:g}s"), {
        "budget_seconds": ROUND_BUDGET, "rounds": len(rows),
        "plan": _summary(walls, cpus), "greedy": _summary(g_walls, g_cpus),
        "ratio_plan_over_greedy": {
            "p50_wall": statistics.median(walls) / statistics.median(g_walls),
            "p50_cpu": statistics.median(cpus) / statistics.median(g_cpus)},
        "statuses": {st: statuses.count(st) for st in sorted(set(statuses))},
        "improved_rounds": len(improved),
        "model_solved_rounds": sum(st != "GREEDY" for st in statuses),
        "top_band_gain_median": statistics.median(r["top_band_gain"] for r in rows),
        "top_band_gain_max": max(r["top_band_gain"] for r in rows),
        "per_round": rows, "loadavg_1min_during": [round(x, 2) for x in loads], "loadavg_end": _load(),
    })


def test_full_replan_10000_jobs() -> None:
    """Issue 12 row: re-plan 10,000 pending jobs over the same fleet in a 1.5 s budget, against
    the greedy-only baseline (what it places, in what wall and CPU time) in the same run."""
    limits = PlanLimits(time_limit_seconds=1.5, workers=2)
    rows = []
    for seed in range(int(os.environ.get("PLACEMENT_PERF_REPLANS", "3"))):
        snap = synthetic(seed=7 + seed, clusters=100, nodes=100, pending=10_000)
        load = os.getloadavg()[0]
        g, gw, gc_, p, w, c = _both(snap, limits, plan_first=seed % 2 == 1)
        assert validate(snap, p) == []
        row = _gains(snap, p, g)
        assert not row["worse"]
        rows.append({**row, "seed": 7 + seed, "plan_wall_ms": round(1000 * w), "plan_cpu_ms": round(1000 * c),
                     "greedy_wall_ms": round(1000 * gw), "greedy_cpu_ms": round(1000 * gc_),
                     "loadavg_1min": round(load, 2)})
    _save("replan_10000", {
        "budget_seconds": limits.time_limit_seconds, "runs": rows,
        "plan_wall_ms_median": statistics.median(r["plan_wall_ms"] for r in rows),
        "plan_cpu_ms_median": statistics.median(r["plan_cpu_ms"] for r in rows),
        "greedy_wall_ms_median": statistics.median(r["greedy_wall_ms"] for r in rows),
        "greedy_cpu_ms_median": statistics.median(r["greedy_cpu_ms"] for r in rows),
        "loadavg_end": _load(),
    })


# The shipped policy, and eviction at once (where the model has the most to decide).
# With no topology wait (Volcano's semantics, issue 12), tiers above the lowest are in play.
POLICIES = {"shipped": PlanLimits(), "evict-at-once": PlanLimits(preemption_grace_seconds=0.0),
            "no-topology-wait": PlanLimits(topology_wait_seconds=0.0)}


def _gap(snap: FederationSnapshot, seconds: float, policy: PlanLimits) -> tuple[str, float, float, float]:
    ref = reference_plan(snap, seconds=30.0, policy=policy)
    shipped, wall, _ = _timed(lambda: plan(snap, replace(policy, time_limit_seconds=seconds, workers=2)))
    g = greedy_plan(snap, policy)
    assert validate(snap, shipped) == [] and validate(snap, ref) == []
    sc = Scoring(snap)
    best = sc.fold(sc.vector(ref))
    if not best:
        return ref.status, 0.0, 0.0, wall
    return (ref.status, (best - sc.fold(sc.vector(shipped))) / abs(best),
            (best - sc.fold(sc.vector(g))) / abs(best), wall)


@pytest.mark.parametrize("shape", [
    {"clusters": 2, "nodes": 6, "pending": 8, "running": 2},
    {"clusters": 3, "nodes": 8, "pending": 14, "running": 3},
    {"clusters": 2, "nodes": 6, "pending": 8, "running": 2, "small_gpus": 4},
], ids=["2x6-nodes-8-jobs", "3x8-nodes-14-jobs", "2x6-nodes-8-jobs-4-gpu-nodes"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_optimality_gap_small_rounds(shape: dict[str, int], policy: str) -> None:
    gaps, greedy_gaps, walls = [], [], []
    for seed in range(GAP_SEEDS):
        status, gap, greedy_gap, wall = _gap(small(seed, **shape), 1.0, POLICIES[policy])
        if status == "OPTIMAL":
            gaps.append(gap)
            greedy_gaps.append(greedy_gap)
            walls.append(wall)
    key = f"gap_{policy}_" + "x".join(str(shape[k]) for k in ("clusters", "nodes", "pending")) \
        + ("" if shape.get("small_gpus", 8) == 8 else f"_{shape['small_gpus']}gpu")
    _save(key, {
        "proven_optimal": len(gaps), "seeds": GAP_SEEDS,
        "mean_gap": statistics.fmean(gaps), "max_gap": max(gaps),
        "within_1_5_percent": sum(g <= 0.015 for g in gaps),
        "greedy_mean_gap": statistics.fmean(greedy_gaps), "greedy_max_gap": max(greedy_gaps),
        "plan_p50_wall_ms": 1000 * statistics.median(walls),
    })
    assert max(gaps) <= 0.015


def test_mid_rounds_cpsat_vs_greedy() -> None:
    gains, walls, statuses = [], [], []
    for seed in range(int(os.environ.get("PLACEMENT_PERF_MID_SEEDS", "8"))):
        snap = synthetic(seed=seed, clusters=10, nodes=16, pending=120, priorities=2, busy=0.4)
        g = greedy_plan(snap)
        p, wall, _ = _timed(lambda snap=snap: plan(snap, PlanLimits(time_limit_seconds=1.0, workers=2)))  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
        assert validate(snap, p) == []
        sc = Scoring(snap)
        vg, vp = sc.vector(g), sc.vector(p)
        assert vp >= vg
        gains.append((vp[0] - vg[0]) / abs(vg[0]) if vg[0] else 0.0)
        walls.append(wall)
        statuses.append(p.status)
    _save("mid_120x10x16", {
        "top_band_gain_mean": statistics.fmean(gains), "top_band_gain_max": max(gains),
        "improved_rounds": sum(g > 0 for g in gains), "rounds": len(gains),
        "statuses": {st: statuses.count(st) for st in set(statuses)},
        "plan_p50_wall_ms": 1000 * statistics.median(walls), "loadavg": _load(),
    })
