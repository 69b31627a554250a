"""Discrete-event simulation of a federation driven by any planner.

Why a simulator: placement quality (JCT, utilisation, topology, fairness) only shows over
thousands of arrivals, finishes and faults, and comparing our planner with the peers'
algorithms is only fair when they face the same jobs at the same instants. Time here is
simulated; only the planning call is measured in wall time.

Model (deliberately simple, stated in docs/design/simulator.md):

* planning rounds run on a grid of ``round_interval`` simulated seconds, but only when
  something changed (arrival, finish, fault, a preemption) and work is pending, so a
  burst of arrivals is coalesced into one round;
* a placed gang starts at once and runs ``durationSeconds x slowdown(tier)``, the tier
  being that of the lowest domain holding all its pods (one pod, or all pods on one
  node, runs at 1.0); an elastic job running k of its n replicas runs at k/n of that
  speed (data-parallel work is shared by the replicas), and when a later round grows it
  (``Plan.growths``) the rest of its work runs at the new speed;
* a preempted job or one killed by a fault goes back to pending and restarts from
  scratch; ``podFail`` restarts the job in place (same placement) from scratch;
* placements that do not fit the live state are skipped and recorded, never applied.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from federation.domain.plans import FederationSnapshot, Placement, Plan, PlanLimits
from federation.domain.resources import Resources
from federation.sim.scenario import FaultEvent, Scenario
from federation.sim.state import FederationState, Run
from federation.sim.tracking import JobOutcome, Tracker, feasibility
from federation.sim.workload import ScenarioJob

DEFAULT_ROUND_INTERVAL = 10.0
MAX_CHURN = 20
_FINISH, _FAULT, _ARRIVAL, _ROUND = 0, 1, 2, 3


class Planner(Protocol):
    """What the simulator drives: ``plan(snapshot, limits, previous) -> Plan``."""

    def __call__(self, snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None, /) -> Plan: ...


@dataclass(frozen=True)
class SimulatedRound:
    at: float
    wall_seconds: float
    pending: int
    placed: int
    rejected: int
    preempted: int
    status: str
    objective: float
    bound: float


@dataclass(frozen=True)
class Sample:
    """Federation state holding from ``at`` until the next sample."""

    at: float
    used_gpus: int
    capacity: Resources
    usage: tuple[tuple[str, Resources], ...]
    demand: tuple[tuple[str, Resources], ...]


@dataclass(frozen=True)
class Rejection:
    at: float
    job: str
    reason: str


@dataclass(frozen=True)
class SimResult:
    scenario: Scenario
    jobs: tuple[JobOutcome, ...]
    rounds: tuple[SimulatedRound, ...]
    samples: tuple[Sample, ...]
    rejections: tuple[Rejection, ...]
    end_time: float
    faults: tuple[FaultEvent, ...] = field(default=())
    churn_stops: int = 0  # times follow-up rounds after preemptions were cut off (see schedule_round)
    starts: tuple[Start, ...] = ()  # every job start, restarts included (``bench --placements``)


@dataclass(frozen=True)
class Start:
    """A job started (or restarted in place) at ``at`` with ``placement``."""

    at: float
    placement: Placement
    growth: bool = False  # ``placement`` holds only the pods added to a running job


class _Simulation:
    def __init__(self, scenario: Scenario, planner: Planner, round_interval: float, limits: PlanLimits,
                 timer: Callable[[], float], on_round: Callable[[SimulatedRound], None] | None,
                 max_rounds: int) -> None:
        self.scenario = scenario
        self.planner = planner
        self.interval = round_interval
        self.limits = limits
        self.timer = timer
        self.on_round = on_round
        self.max_rounds = max_rounds
        self.tracker = Tracker(scenario, feasibility(scenario))
        self.state = FederationState(scenario.clusters, scenario.queues, self.tracker.feasible)
        self.heap: list[tuple[float, int, int, object]] = []
        self.seq = itertools.count()
        self.epochs = itertools.count(1)
        self.round_due: float | None = None
        self.dirty = False  # an arrival, finish or fault since the last round
        self.replan = False  # the last round preempted: its victims wait for a new round
        self.churn = 0  # consecutive rounds triggered only by the previous round's preemptions
        self.churn_stops = 0
        self.previous: Plan | None = None
        self.rounds: list[SimulatedRound] = []
        self.samples: list[Sample] = []
        self.rejections: list[Rejection] = []
        self.faults: list[FaultEvent] = []
        self.starts: list[Start] = []
        self.now = 0.0
        self.capacity = self.state.usable_capacity()  # changes only with faults

    def push(self, at: float, kind: int, payload: object) -> None:
        heapq.heappush(self.heap, (at, kind, next(self.seq), payload))

    def run(self) -> SimResult:
        for job in self.scenario.jobs:
            self.push(job.submit_at, _ARRIVAL, job)
        for event in self.scenario.events:
            self.push(event.at, _FAULT, event)
        self.sample()
        while self.heap:
            at, kind, _, payload = heapq.heappop(self.heap)
            self.now = at
            if kind == _ROUND:
                self.round_due = None
                self.plan_round()
            elif kind == _FINISH:
                self.finish(payload)
            elif kind == _FAULT:
                assert isinstance(payload, FaultEvent)
                self.fault(payload)
            else:
                assert isinstance(payload, ScenarioJob)
                self.state.enqueue(payload)
                self.tracker.arrived(payload)
                self.dirty = True
            if not self.heap or self.heap[0][0] > self.now:
                self.sample()
                self.schedule_round()
        return SimResult(self.scenario, self.tracker.records(), tuple(self.rounds), tuple(self.samples),
                         tuple(self.rejections), self.now, tuple(self.faults), self.churn_stops,
                         tuple(self.starts))

    def schedule_round(self) -> None:
        """Plan at the next grid tick if something changed and work is pending.

        A round that preempted gets a follow-up round even without new events (its victims
        are pending again), but at most ``MAX_CHURN`` in a row: a planner that keeps
        evicting and re-placing would otherwise never let simulated time end. The next
        real event resumes planning; ``churnStops`` counts the cut-offs.
        """
        if not (self.state.pending or self.growable()) or self.round_due is not None \
                or len(self.rounds) >= self.max_rounds:
            return
        if self.dirty:
            self.churn = 0
        elif self.replan and self.churn < MAX_CHURN:
            self.churn += 1
        else:
            if self.replan:
                self.churn_stops += 1
                self.replan = False
            return
        ticks = -(-self.now // self.interval)  # ceil
        due = max(self.now, ticks * self.interval)
        self.round_due = due
        self.push(due, _ROUND, None)

    def growable(self) -> bool:
        """Some running elastic job runs fewer pods than its replicas (a round may grow it)."""
        return any(run.short for run in self.state.running.values())

    def sample(self) -> None:
        state = self.state
        usage = tuple(sorted(state.usage_by_queue().items()))
        sample = Sample(self.now, state.used_gpus, self.capacity, usage, tuple(sorted(state.demand_by_queue().items())))
        if self.samples and self.samples[-1].at == self.now:
            self.samples[-1] = sample
        else:
            self.samples.append(sample)

    # -- events ------------------------------------------------------------------
    def finish(self, payload: object) -> None:
        assert isinstance(payload, tuple)
        name, epoch = payload
        run = self.state.running.get(name)
        if run is None or run.epoch != epoch:
            return  # a stale finish of a run that was killed or restarted
        self.state.stop(name)
        self.tracker.finished(name, self.now)
        self.dirty = True

    def kill(self, name: str, cause: str) -> None:
        run = self.state.stop(name)
        if run is None:
            return
        self.tracker.killed(name, cause, self.now)
        self.state.enqueue(run.spec)

    def fault(self, event: FaultEvent) -> None:
        self.faults.append(event)
        self.dirty = True
        if event.kind == "nodeFail":
            cluster = self.state.clusters[self.state.node_cluster[event.target]]
            cluster.not_ready.add(event.target)
            cluster.touch(event.target)
            for name in self.state.runs_on_node(event.target):
                self.kill(name, "fault")
        elif event.kind == "nodeRecover":
            cluster = self.state.clusters[self.state.node_cluster[event.target]]
            cluster.not_ready.discard(event.target)
            cluster.touch(event.target)
        elif event.kind == "clusterDown":
            self.state.clusters[event.target].healthy = False
            for name in self.state.runs_in_cluster(event.target):
                self.kill(name, "fault")
        elif event.kind == "clusterUp":
            self.state.clusters[event.target].healthy = True
        self.capacity = self.state.usable_capacity()
        if event.kind == "podFail":
            run = self.state.running.get(event.target)
            if run is not None:  # RestartPod semantics, simplified: same placement, from scratch
                run.epoch = next(self.epochs)
                run.started_at = run.since = self.now
                run.progress = 0.0
                run.ends_at = self.now + self.runtime(run)
                self.tracker.restarted(event.target, self.now)
                self.starts.append(Start(self.now, run.placement))
                self.push(run.ends_at, _FINISH, (event.target, run.epoch))

    def runtime(self, run: Run) -> float:
        """Seconds ``run`` needs from ``since`` to finish at its current size and tier."""
        share = len(run.placement.pods) / max(1, run.spec.job.total_replicas)
        return (1.0 - run.progress) * run.spec.duration_seconds * self.slowdown(run) / share

    def slowdown(self, run: Run) -> float:
        return self.scenario.gang_slowdown(len({p.node for p in run.placement.pods}), run.tier)

    # -- rounds ------------------------------------------------------------------
    def plan_round(self) -> None:
        self.dirty = self.replan = False
        snapshot = self.state.snapshot(self.now)
        pending = len(snapshot.pending)
        started = self.timer()
        plan = self.planner(snapshot, self.limits, self.previous)
        wall = self.timer() - started
        self.previous = plan
        preempted = 0
        for preemption in plan.preemptions:
            if preemption.job in self.state.running:
                self.kill(preemption.job, "preemption")
                preempted += 1
                self.replan = True
            else:
                self.rejections.append(Rejection(self.now, preemption.job, "preemption of a job that is not running"))
        placed = rejected = 0
        for placement in plan.placements:
            spec = self.state.pending_job(placement.job)
            reason = "job is not pending" if spec is None else self.state.check(spec, placement)
            if spec is None or reason is not None:
                self.rejections.append(Rejection(self.now, placement.job, reason or "rejected"))
                rejected += 1
                continue
            self.state.dequeue(placement.job)
            run = self.state.start(spec, placement, self.now, 0.0, next(self.epochs))
            run.ends_at = self.now + self.runtime(run)
            self.push(run.ends_at, _FINISH, (placement.job, run.epoch))
            self.tracker.started(spec.job.name, self.now, placement.cluster, run.tier, run.requests)
            self.starts.append(Start(self.now, placement))
            placed += 1
        for growth in plan.growths:
            reason = self.state.check_growth(growth)
            if reason is not None:
                self.rejections.append(Rejection(self.now, growth.job, f"growth: {reason}"))
                rejected += 1
                continue
            self.grow(growth)
        record = SimulatedRound(self.now, wall, pending, placed, rejected, preempted, plan.status, plan.objective,
                             plan.bound)
        self.rounds.append(record)
        if self.on_round is not None:
            self.on_round(record)


    def grow(self, growth: Placement) -> None:
        """Add pods to a running elastic job: the work done so far is kept, the rest runs
        at the new size (and the tier of the now larger set of nodes)."""
        run = self.state.running[growth.job]
        run.progress += (self.now - run.since) / (run.ends_at - run.since) * (1.0 - run.progress) \
            if run.ends_at > run.since else 0.0
        run.since = self.now
        self.state.grow(growth)
        run.epoch = next(self.epochs)
        run.ends_at = self.now + self.runtime(run)
        self.push(run.ends_at, _FINISH, (growth.job, run.epoch))
        self.tracker.grew(growth.job, run.tier, run.requests)
        self.starts.append(Start(self.now, growth, growth=True))


def simulate(
    scenario: Scenario,
    planner: Planner,
    *,
    round_interval: float = DEFAULT_ROUND_INTERVAL,
    limits: PlanLimits | None = None,
    timer: Callable[[], float] = time.perf_counter,
    on_round: Callable[[SimulatedRound], None] | None = None,
    max_rounds: int = 1_000_000,
) -> SimResult:
    """Run ``scenario`` to completion with ``planner`` deciding every round.

    ``timer`` measures the planner's wall time (inject a fake one for exact tests);
    ``on_round`` is called after each round (live progress for the demo). The run ends
    when no event is left: every job finished, or the rest can never be placed.
    """
    if round_interval <= 0:
        raise ValueError("round_interval must be > 0")
    sim = _Simulation(scenario, planner, round_interval, limits or PlanLimits(), timer, on_round, max_rounds)
    return sim.run()
