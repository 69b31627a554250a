"""Bench metrics of a simulated run, as the bench JSON contract defines them.

Why they are computed from the run's records rather than inside the simulator: the
definitions (which jobs count, over which interval a mean is taken) are what a reader
of ``docs/benchmarks.md`` must be able to check, so they live in one small module with
one function per metric, and tests compute them on hand-made toy runs.

Interval: time-weighted means run from the first arrival to the last finish (the
makespan window). Capacity is what is usable at each instant (ready nodes of healthy
clusters), so a cluster outage is not counted as idle GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from federation.domain.resources import GPU
from federation.placement.fairshare import dominant_share, fair_shares
from federation.sim.simulator import Sample, SimResult, SimulatedRound
from federation.sim.tracking import JobOutcome

Metrics = dict[str, float | int | None]
SOLVED = ("OPTIMAL", "FEASIBLE")


def window(result: SimResult) -> tuple[float, float]:
    """(first arrival, last finish) — the makespan window; (0, 0) when nothing ran."""
    finishes = [j.finished_at for j in result.jobs if j.finished_at is not None]
    if not result.jobs or not finishes:
        return (0.0, 0.0)
    return (min(j.submitted_at for j in result.jobs), max(finishes))


def _intervals(samples: Sequence[Sample], start: float, end: float) -> list[tuple[Sample, float]]:
    """Each sample with the time it held inside [start, end]."""
    out: list[tuple[Sample, float]] = []
    for i, sample in enumerate(samples):
        until = samples[i + 1].at if i + 1 < len(samples) else end
        lo, hi = max(sample.at, start), min(until, end)
        if hi > lo:
            out.append((sample, hi - lo))
    return out


def gpu_utilization(result: SimResult) -> float:
    """Time-weighted used GPUs over usable GPUs in the makespan window."""
    start, end = window(result)
    used = cap = 0.0
    for sample, dt in _intervals(result.samples, start, end):
        used += sample.used_gpus * dt
        cap += sample.capacity.get(GPU) * dt
    return used / cap if cap > 0 else 0.0


def gpu_goodput(result: SimResult) -> float:
    """Useful GPU-seconds over usable GPU-seconds in the makespan window.

    Useful work is each finished job's GPUs (of all its replicas: an elastic job running
    fewer runs proportionally longer) x its nominal (lowest-tier) duration. Unlike
    ``gpuUtilization`` it does not reward placements that run slower in a wide domain, nor
    count work lost to preemption or faults.
    """
    start, end = window(result)
    cap = sum(sample.capacity.get(GPU) * dt for sample, dt in _intervals(result.samples, start, end))
    useful = sum(j.work_gpus * j.duration_seconds for j in result.jobs if j.finished_at is not None)
    return useful / cap if cap > 0 else 0.0


def fairness_deviation(result: SimResult) -> float:
    """Max over queues of the time-weighted mean |dominant share - weighted fair share|.

    The fair share at each instant is water-filled by weight over the queues with demand
    (running plus pending work an empty federation could hold), capped by that demand
    and by capability (``placement.fairshare``, the same target the planner aims at).
    """
    start, end = window(result)
    if end <= start:
        return 0.0
    queues = result.scenario.queues
    deviation = {q.name: 0.0 for q in queues}
    for sample, dt in _intervals(result.samples, start, end):
        usage = dict(sample.usage)
        fair = fair_shares(queues, dict(sample.demand), sample.capacity)
        for q in queues:
            share = dominant_share(usage[q.name], sample.capacity) if q.name in usage else 0.0
            deviation[q.name] += abs(share - fair.get(q.name, 0.0)) * dt
    return max(deviation.values(), default=0.0) / (end - start)


def _gangs(jobs: Sequence[JobOutcome]) -> list[JobOutcome]:
    """Placed gangs of two or more pods that an empty federation could hold."""
    return [j for j in jobs if j.gang_size >= 2 and j.holdable and j.tier is not None and j.best_tier is not None]


def lowest_tier_fraction(jobs: Sequence[JobOutcome]) -> float | None:
    """Share of those gangs (last placement) in a domain of the lowest feasible tier."""
    gangs = _gangs(jobs)
    if not gangs:
        return None
    lowest = sum(1 for j in gangs if j.tier is not None and j.best_tier is not None and j.tier <= j.best_tier)
    return lowest / len(gangs)


def mean_gang_tier(jobs: Sequence[JobOutcome]) -> float | None:
    gangs = _gangs(jobs)
    return sum(j.tier or 0 for j in gangs) / len(gangs) if gangs else None


def largest_gang_waits(jobs: Sequence[JobOutcome]) -> list[float]:
    """Waits (submit to first start; to the end of the run's records if never started) of
    the largest gangs: the jobs of the most pods among those an empty federation could hold.

    Why: starvation hits the biggest gangs first (every smaller job fits in the room they
    wait for), so their max and p95 wait is the measure of an admission or reservation rule.
    A gang that never started counts with its wait up to the last event of the run.
    """
    holdable = [j for j in jobs if j.holdable and j.gang_size >= 2]
    if not holdable:
        return []
    top = max(j.gang_size for j in holdable)
    end = max((t for j in jobs for t in (j.finished_at, j.last_start, j.submitted_at) if t is not None), default=0.0)
    return [(j.first_start if j.first_start is not None else end) - j.submitted_at
            for j in holdable if j.gang_size == top]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def objective_gap(rounds: Sequence[SimulatedRound]) -> float | None:
    """Mean |objective - bound| / max(1, |bound|) over rounds the solver decided."""
    solved = [r for r in rounds if r.status in SOLVED]
    if not solved:
        return None
    return sum(abs(r.objective - r.bound) / max(1.0, abs(r.bound)) for r in solved) / len(solved)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def outcome_metrics(jobs: Sequence[JobOutcome]) -> Metrics:
    """The metrics read from the jobs' outcomes alone: counts, avg JCT and wait, the largest
    gangs' waits. A replay outside the simulator (``hack/real_volcano.py``) computes them here
    too, so its figures mean what the bench's mean."""
    jct = [j.jct for j in jobs if j.holdable and j.jct is not None]
    waits = [j.first_start - j.submitted_at for j in jobs if j.first_start is not None]
    big = largest_gang_waits(jobs)
    return {
        "placed": sum(1 for j in jobs if j.starts > 0),
        "finished": sum(1 for j in jobs if j.finished_at is not None),
        "unschedulable": sum(1 for j in jobs if not j.holdable),
        "avgJctSeconds": _mean(jct),
        "avgWaitSeconds": _mean(waits),
        "largestGangWaitMaxSeconds": max(big, default=None),
        "largestGangWaitP95Seconds": percentile(big, 95) if big else None,
    }


def compute(result: SimResult, *, with_gap: bool = False) -> Metrics:
    """Every bench metric of one run (``with_gap`` adds ``objectiveGapToBound``)."""
    jobs = result.jobs
    start, end = window(result)
    latencies = [r.wall_seconds * 1000.0 for r in result.rounds]
    planner_seconds = sum(r.wall_seconds for r in result.rounds)
    placements = sum(r.placed for r in result.rounds)
    out: Metrics = {
        "jobs": len(result.scenario.jobs),
        **outcome_metrics(jobs),
        "makespanSeconds": end - start,
        "gpuUtilization": gpu_utilization(result),
        "gpuGoodput": gpu_goodput(result),
        "lowestTierFraction": lowest_tier_fraction(jobs),
        "meanGangTier": mean_gang_tier(jobs),
        "fairnessMaxDeviation": fairness_deviation(result),
        "roundLatencyP50Ms": percentile(latencies, 50),
        "roundLatencyP99Ms": percentile(latencies, 99),
        "placementsPerSecond": placements / planner_seconds if planner_seconds > 0 else 0.0,
        "rounds": len(result.rounds),
        "placements": placements,
        "preemptions": sum(j.preempted for j in jobs),
        "faultRequeues": sum(j.fault_kills for j in jobs),
        "preemptedGpuHours": sum(j.preempted_gpu_seconds for j in jobs) / 3600.0,
        "faultLostGpuHours": sum(j.fault_gpu_seconds for j in jobs) / 3600.0,
        "rejectedPlacements": len(result.rejections),
        "churnStops": result.churn_stops,
        "plannerSeconds": planner_seconds,
    }
    if with_gap:
        out["objectiveGapToBound"] = objective_gap(result.rounds)
    return out
