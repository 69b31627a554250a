"""Per-job outcomes of a simulated run, and what an empty federation could do for each job.

The scenario contract counts topology and JCT metrics only over jobs that an *empty*
federation could hold, and judges a gang's tier against the lowest tier at which any
allowed cluster, empty, could hold it. Both are properties of the scenario, not of a
policy, so they are computed once here and shared by every policy's run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from federation.domain.resources import Resources
from federation.placement.eligibility import affinity_terms, can_ever_hold, cluster_block, lowest_feasible_tier
from federation.sim.scenario import Scenario
from federation.sim.workload import ScenarioJob


@dataclass(frozen=True)
class Feasibility:
    """``holdable``: some allowed empty cluster can hold the gang within its hard limit;
    ``best_tier``: the lowest tier at which such a cluster could (None when not holdable)."""

    holdable: bool
    best_tier: int | None


def feasibility(scenario: Scenario) -> dict[str, Feasibility]:
    """Feasibility of every job of ``scenario`` against its empty, healthy clusters."""
    out: dict[str, Feasibility] = {}
    for spec in scenario.jobs:
        job = spec.job
        best: int | None = None
        holdable = False
        for cluster in scenario.clusters:
            snap = cluster.empty
            if all(cluster_block(job, snap, term) is not None for term in affinity_terms(job)):
                continue
            if not can_ever_hold(job, snap):
                continue
            holdable = True
            tier = lowest_feasible_tier(job, snap)
            if tier is not None and (best is None or tier < best):
                best = tier
        out[job.name] = Feasibility(holdable, best)
    return out


@dataclass(frozen=True)
class JobOutcome:
    """What happened to one job over the whole run (times in simulated seconds)."""

    name: str
    queue: str
    gang_size: int
    submitted_at: float
    duration_seconds: float
    holdable: bool
    best_tier: int | None
    first_start: float | None = None
    last_start: float | None = None
    finished_at: float | None = None
    cluster: str | None = None
    tier: int | None = None
    gpus: int = 0
    starts: int = 0
    preempted: int = 0
    fault_kills: int = 0
    restarts_in_place: int = 0
    preempted_gpu_seconds: float = 0.0  # GPU-seconds of progress lost to preemption
    fault_gpu_seconds: float = 0.0  # ... lost to faults (node, cluster, pod)
    # GPUs of all replicas: the job's work is this x ``duration_seconds`` (an elastic job
    # running fewer replicas runs proportionally slower, simulator.py)
    work_gpus: int = 0

    @property
    def jct(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.submitted_at


class Tracker:
    """Per-job bookkeeping used by the simulator (records are replaced, never mutated)."""

    def __init__(self, scenario: Scenario, feasible: Mapping[str, Feasibility]) -> None:
        self._feasible = feasible
        self._jobs: dict[str, JobOutcome] = {}

    def feasible(self, name: str) -> bool:
        return self._feasible[name].holdable

    def arrived(self, spec: ScenarioJob) -> None:
        info = self._feasible[spec.job.name]
        self._jobs[spec.job.name] = JobOutcome(
            spec.job.name, spec.job.queue, spec.job.gang_size, spec.submit_at, spec.duration_seconds,
            info.holdable, info.best_tier, work_gpus=spec.job.requests.gpus,
        )

    def started(self, name: str, now: float, cluster: str, tier: int, requests: Resources) -> None:
        rec = self._jobs[name]
        first = rec.first_start if rec.first_start is not None else now
        self._jobs[name] = replace(rec, first_start=first, last_start=now, cluster=cluster, tier=tier,
                                   gpus=requests.gpus, starts=rec.starts + 1)

    def grew(self, name: str, tier: int, requests: Resources) -> None:
        """A running elastic job gained pods (its tier may have widened)."""
        self._jobs[name] = replace(self._jobs[name], tier=tier, gpus=requests.gpus)

    def finished(self, name: str, now: float) -> None:
        self._jobs[name] = replace(self._jobs[name], finished_at=now)

    def killed(self, name: str, cause: str, now: float) -> None:
        rec = self._jobs[name]
        lost = rec.gpus * (now - (rec.last_start if rec.last_start is not None else now))
        if cause == "preemption":
            self._jobs[name] = replace(rec, preempted=rec.preempted + 1,
                                       preempted_gpu_seconds=rec.preempted_gpu_seconds + lost)
        else:
            self._jobs[name] = replace(rec, fault_kills=rec.fault_kills + 1,
                                       fault_gpu_seconds=rec.fault_gpu_seconds + lost)

    def restarted(self, name: str, now: float) -> None:
        rec = self._jobs[name]
        lost = rec.gpus * (now - (rec.last_start if rec.last_start is not None else now))
        self._jobs[name] = replace(rec, last_start=now, restarts_in_place=rec.restarts_in_place + 1,
                                   fault_gpu_seconds=rec.fault_gpu_seconds + lost)

    def records(self) -> tuple[JobOutcome, ...]:
        """Every job that arrived, in arrival order."""
        return tuple(self._jobs.values())
