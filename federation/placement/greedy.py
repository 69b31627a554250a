"""A complete greedy planner: the CP-SAT hint, its fallback, and a baseline.

Order of work (the same layering as the objective, see ``score``):

1. priority bands, highest first — queue priority, then job priority;
2. inside a band, DRF progressive filling (Armada): repeatedly take the head job of the
   queue whose dominant share after adding that job, divided by its fair share, is the
   smallest; a job that does not fit is skipped, its queue carries on;
3. each job goes to the lowest tier, then the fullest domain, of the first affinity group
   that can hold it, with pods packed onto nodes (``rounds.PlanningRound.place``); among equally
   full domains, the one whose ancestors are fullest (``Scoring.guard``);
4. the band's leftovers then try preemption / reclaim (``preempt``) before any lower band
   is looked at, so lower-priority pending work never takes room a preemption would free.

Gangs: the planner places ALL replicas of a job together. A job whose ``minAvailable`` is
below its replica count is treated as a gang of all its replicas — the elastic part is not
started later by the planner; documented in docs/design/placement.md.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable

from federation.domain.plans import FederationSnapshot, PendingJob, Plan, PlanLimits, Unplaced
from federation.placement.opening import open_round
from federation.placement.preempt import preempt_for
from federation.placement.reasons import Diagnoses
from federation.placement.rounds import PlanningRound


def _key(rnd: PlanningRound, queue: str, head: PendingJob) -> tuple[float, float, str]:
    led = rnd.ledger
    fair = led.fair.get(queue, 0.0)
    after = led.share(queue) + led.size(head.job)
    ratio = after / fair if fair > 0 else float("inf")
    return (ratio, head.submitted_at, queue)


def run_bands(rnd: PlanningRound, pending: tuple[PendingJob, ...], preempt: bool = True) -> list[PendingJob]:
    """Place ``pending`` band by band on ``rnd``; return what stayed pending (in order)."""
    bands: dict[int, dict[str, deque[PendingJob]]] = {}
    for p in pending:
        if p.job.name in rnd.placements:
            continue
        bands.setdefault(rnd.scoring.band(p.job), {}).setdefault(p.job.queue, deque()).append(p)
    left: list[PendingJob] = []
    for band in sorted(bands):
        queues = bands[band]
        heap = [(_key(rnd, q, jobs[0]), q) for q, jobs in queues.items()]
        heapq.heapify(heap)
        failed: list[PendingJob] = []
        while heap:
            _, q = heapq.heappop(heap)
            head = queues[q].popleft()
            if rnd.expired() or rnd.place(head.job) is None:
                failed.append(head)
            if queues[q]:
                heapq.heappush(heap, (_key(rnd, q, queues[q][0]), q))
        for p in failed:
            if not preempt or rnd.expired() or preempt_for(rnd, p.job) is None:
                left.append(p)
    return left


def finish(rnd: PlanningRound, left: list[PendingJob], status: str, started: float, timed_out: bool = False) -> Plan:
    """``started``: the round's start on ``rnd.clock``."""
    """Turn a round's decisions into a Plan with reasons and score terms."""
    diagnose = Diagnoses(rnd)
    unplaced: list[Unplaced] = []
    for p in left:
        why = diagnose(p.job)
        if timed_out and not why.unschedulable:
            why = Unplaced(p.job.name, "the planner ran out of time before placing it", "time-limit",
                           why.closest_cluster)
        unplaced.append(why)
    order = {p.job.name: i for i, p in enumerate(rnd.snapshot.pending)}
    placements = tuple(sorted(rnd.placements.values(), key=lambda pl: order.get(pl.job, 0)))
    plan = Plan(placements, tuple(unplaced), tuple(rnd.preempted.values()), status=status)
    vector = rnd.scoring.vector(plan)
    objective = rnd.scoring.fold(vector)
    terms = {pl.job: rnd.scoring.terms(pl) for pl in placements}
    return Plan(
        placements,
        tuple(unplaced),
        tuple(rnd.preempted.values()),
        status=status,
        objective=objective,
        bound=objective,
        solve_seconds=rnd.clock() - started,
        score_terms=terms,
    )


DEFAULT_LIMITS = PlanLimits()


def greedy_plan(snapshot: FederationSnapshot, limits: PlanLimits = DEFAULT_LIMITS,
                clock: Callable[[], float] = time.monotonic) -> Plan:
    """Plan a round greedily (bands, DRF order, lowest tier + best fit, then preemption)."""
    started = clock()
    rnd = open_round(snapshot, limits, deadline=started + max(5.0, limits.time_limit_seconds * 10), clock=clock)
    left = run_bands(rnd, snapshot.pending)
    return finish(rnd, left, "GREEDY", started, timed_out=rnd.expired())
