"""Gang admission: a gang that has waited past a bound gets the nodes it needs held.

Why: in a saturated cluster, nodes free one at a time as jobs finish, and each freed node
goes at once to whatever pending job fits it. A gang of eight whole nodes then waits until
eight nodes in one spine happen to be free together. On ``volcano-1cluster`` that was
9,000-10,000 s. When it finally fits somewhere, the room is usually scattered, so it
runs wider and slower. Volcano answers with its ``enqueue`` gate: overcommit and proportion's
``JobEnqueueable`` admit a PodGroup and count its minResources as *inqueue*, so later
jobs are not admitted past the budget while it waits (modelled in
``baselines/volcano_enqueue.py``). The gate is blind to where the gang will fit. We hold
room where it will fit:

1. candidates: pending gangs of several pods that have waited ``hold_after`` seconds or
   more and cannot be placed now. Highest band first, then the most pods, then the
   oldest. The first that some allowed domain within its tier cap could hold when empty is
   chosen;
2. its domain: the lowest tier that could hold it when empty, then the fewest GPUs still
   missing (``reserve.target``, shared with the fair-share reservation);
3. inside that domain, only the nodes it needs are held: the nodes with the most free
   GPUs first, as few as can hold the gang when they are emptied. Every other node of the
   domain stays open, so smaller work backfills there and does not delay the gang;
4. every other pending job of the same or a lower band is barred from the held nodes this
   round. Higher bands are not (priority still comes first).

The choice is a pure function of the snapshot, so the same nodes are held round after
round and drain as their jobs finish. The gang lands at its lowest feasible tier, which
also serves ``lowestTierFraction``. The rule idles at most the held nodes' free GPUs, and
only while they are fewer than the gang needs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, PendingJob, PlanLimits, Unplaced
from federation.domain.resources import Resources, total
from federation.placement.eligibility import allowed_clusters, can_ever_hold
from federation.placement.ledger import QueueLedger, band_key
from federation.placement.reserve import held_nodes, keep_for_first, reserve_for_starved
from federation.placement.rounds import PlanningRound


def hold_for_gangs(rnd: PlanningRound, hold_after: float | None) -> str | None:
    """Bar other jobs from the nodes held for the gang that waited longest; return its name."""
    if hold_after is None:
        return None
    now = rnd.snapshot.now
    waiting = sorted(
        (p for p in rnd.snapshot.pending if p.job.gang_size > 1 and now - p.submitted_at >= hold_after),
        key=lambda p: (rnd.scoring.band(p.job), -p.job.gang_size, p.submitted_at, p.job.name),
    )
    def why(job: Job) -> tuple[str, str]:
        return f"a gang of {job.gang_size} pods waiting over {hold_after:g} s", "capacity"

    kept = keep_for_first(rnd, waiting, lambda dom, job: held_nodes(rnd, dom, job), why)
    return kept.name if kept is not None else None


def hold_room(rnd: PlanningRound, limits: PlanLimits) -> str | None:
    """Every planner's one entry point for held room: the fair-share reservation
    (``reserve``, opt-in) first, else the gang hold; returns the job it is held for."""
    kept = reserve_for_starved(rnd, limits.reserve_after_seconds)
    return kept if kept is not None else hold_for_gangs(rnd, limits.gang_hold_after_seconds)


def enqueue(snapshot: FederationSnapshot, factor: float | None) -> tuple[FederationSnapshot, tuple[Unplaced, ...]]:
    """Volcano's overcommit gate for our planner: which pending jobs this round may plan.

    Jobs are admitted band by band. Inside a band they are admitted in weighted-DRF order,
    the way Volcano's enqueue walks queues by proportion share: the queue furthest below
    its fair share goes next, counting what it already runs and what was admitted, and
    its jobs go oldest first. Admission continues while the admitted jobs' requests plus
    what runs fit ``factor`` x the healthy capacity in every resource. The oldest work of
    each queue is admitted first, so admission persists from round to round as Volcano's
    Inqueue does, with no state. Later jobs cannot crowd the room an admitted gang waits
    for beyond the overcommit budget. Returns the snapshot of admitted jobs and a reason
    for each job left out.
    """
    if factor is None or not snapshot.pending:
        return snapshot, ()
    led = QueueLedger(snapshot)
    healthy = {c.name for c in snapshot.clusters if c.healthy}  # what runs on a lost cluster takes no healthy room
    budget = (Resources({k: int(v * factor) for k, v in led.capacity})
              - total(r.job.requests for r in snapshot.running if r.placement.cluster in healthy))
    bands: dict[tuple[int, int], dict[str, deque[int]]] = {}
    order = sorted(range(len(snapshot.pending)), key=lambda i: (snapshot.pending[i].submitted_at, i))
    for i in order:
        job = snapshot.pending[i].job
        bands.setdefault(_band(snapshot, snapshot.pending[i]), {}).setdefault(job.queue, deque()).append(i)
    inqueue = Resources()
    taken: dict[str, float] = {}
    admitted: list[int] = []
    left: list[Unplaced] = []

    def ratio(queue: str) -> tuple[float, str]:
        fair = led.fair.get(queue, 0.0)
        now = led.share(queue) + taken.get(queue, 0.0)
        return (now / fair if fair > 0 else float("inf"), queue)

    for band in sorted(bands):
        queues = bands[band]
        while queues:
            queue = min(queues, key=ratio)
            i = queues[queue].popleft()
            if not queues[queue]:
                del queues[queue]
            job = snapshot.pending[i].job
            if not any(can_ever_hold(job, c) for g in allowed_clusters(job, snapshot) for c in g):
                admitted.append(i)  # it never fits: planned only to be told why, it holds no budget
                continue
            after = inqueue + job.requests
            if all(v <= budget.get(k) for k, v in after if v > 0) or not admitted:
                inqueue = after
                taken[job.queue] = taken.get(job.queue, 0.0) + led.size(job)
                admitted.append(i)
            else:
                left.append(Unplaced(job.name, f"not admitted yet: older work already fills the enqueue budget "
                                               f"({factor:g} x capacity)", "priority"))
    keep = sorted(admitted)
    return replace(snapshot, pending=tuple(snapshot.pending[i] for i in keep)), tuple(left)


def _band(snapshot: FederationSnapshot, pending: PendingJob) -> tuple[int, int]:
    queue_priority, job_priority = band_key(snapshot, pending.job)
    return (-queue_priority, -job_priority)
