"""``validate()``'s guarantee rules: a queue's guarantee is never lent, nor reclaimed away.

Read from the snapshot and the plan alone (the state after the whole plan), like the rest
of ``validate``; the planners apply the same rules as they go (``QueueLedger.guarantee_ok``
for the greedy search, ``cpsat/quota.py`` for the model), and the end state is what a
step-wise check guarantees, because every later step was checked against the same rule.

1. **Placing never borrows** (Volcano ``capacity`` plugin): for every queue X the plan adds
   work to (placements, growths) and every resource that added work requests, the
   federation's free capacity after the plan (usable nodes of healthy clusters) still
   covers the unused guarantees of every guarded queue outside X's line. X may use its
   own and its ancestors' guarantees; a guarantee nested inside a guarded queue outside
   X's line counts with that outer one (``QueueLedger.held_back``).
2. **Reclaiming stops at the guarantee**: evictions that ``may_evict`` calls *reclaim* (the
   taker is of another queue) never leave the victim's guarded queue (its subtree) below
   its guarantee, in any resource the reclaimed gangs held — Volcano's ``reclaimableFn``
   (pkg/scheduler/plugins/capacity: a reclaimee is skipped unless ``guarantee <=
   allocated - reclaimee``). ``may_evict``'s "victim's queue above its fair share" implies
   it before the eviction, since a fair share is floored by the guarantee; this rule holds
   the plan to it after all of its evictions. Preemption inside one queue may go below,
   as in Volcano (the queue gives its own room to its own higher band).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, Placement, Plan
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.placement.elastic import placed_requests
from federation.placement.eviction import may_evict
from federation.placement.hierarchy import ancestors
from federation.placement.ledger import band_key, bands_of, federation_free, queue_of


def _line(queues: dict[str, Queue], name: str) -> set[str]:
    return {name, *ancestors(queues, name)}


def _usage_after(snapshot: FederationSnapshot, plan: Plan, jobs: dict[str, Job]) -> dict[str, Resources]:
    """Each queue's own usage after the plan (running - evicted + placed + grown)."""
    usage: dict[str, Resources] = {}
    evicted = {v.job for v in plan.preemptions}
    for r in snapshot.running:
        if r.job.name not in evicted:
            usage[r.job.queue] = usage.get(r.job.queue, Resources()) + placed_requests(r.job, r.placement.pods)
    for p in (*plan.placements, *plan.growths):
        job = jobs.get(p.job)
        if job is not None:
            usage[job.queue] = usage.get(job.queue, Resources()) + placed_requests(job, p.pods)
    return usage


def _subtree(queues: dict[str, Queue], usage: dict[str, Resources], name: str) -> Resources:
    acc = Resources()
    for q, u in usage.items():
        if q == name or name in ancestors(queues, q):
            acc = acc + u
    return acc


def _added(plan: Plan, jobs: dict[str, Job]) -> dict[str, Resources]:
    out: dict[str, Resources] = {}
    for p in (*plan.placements, *plan.growths):
        job = jobs.get(p.job)
        if job is not None:
            out[job.queue] = out.get(job.queue, Resources()) + placed_requests(job, p.pods)
    return out


def _free_after(snapshot: FederationSnapshot, plan: Plan, jobs: dict[str, Job]) -> Resources:
    """Federation free capacity after the plan, counted as ``QueueLedger.free_total`` is."""
    free = federation_free(snapshot)
    running = {r.job.name: r for r in snapshot.running}
    for v in plan.preemptions:
        if v.job in running:
            free = free + placed_requests(running[v.job].job, running[v.job].placement.pods)
    placed: Iterable[Placement] = (*plan.placements, *plan.growths)
    for p in placed:
        job = jobs.get(p.job)
        if job is not None:
            free = free - placed_requests(job, p.pods)
    return free


def _lent(snapshot: FederationSnapshot, plan: Plan, queues: dict[str, Queue], jobs: dict[str, Job],
          usage: dict[str, Resources]) -> Iterator[str]:
    guarded = [q for q in queues.values() if q.guarantee]
    if not guarded:
        return
    free = _free_after(snapshot, plan, jobs)
    for name, more in sorted(_added(plan, jobs).items()):
        mine = _line(queues, name)
        held = Resources()
        for g in guarded:
            outer = [a for a in ancestors(queues, g.name) if a not in mine and a in queues and queues[a].guarantee]
            if g.name in mine or outer:
                continue
            assert g.guarantee is not None
            held = held + (g.guarantee - _subtree(queues, usage, g.name)).clamp_min_zero()
        short = {k: v - free.get(k) for k, v in held if more.get(k) > 0 and free.get(k) < v}
        if short:
            yield f"queue {name} uses other queues' unused guarantees: short by {short}"


def _reclaimed(snapshot: FederationSnapshot, plan: Plan, queues: dict[str, Queue],
               usage: dict[str, Resources]) -> Iterator[str]:
    running = {r.job.name: r for r in snapshot.running}
    pending = {p.job.name: p.job for p in snapshot.pending}
    placed = [pending[p.job] for p in plan.placements if p.job in pending]
    rank = {key: i for i, key in enumerate(bands_of(snapshot).order)}

    def preempts(taker: Job, victim: Job) -> bool:
        kind = may_evict(queue_of(snapshot, taker.queue), rank[band_key(snapshot, taker)], True,
                         queue_of(snapshot, victim.queue), rank[band_key(snapshot, victim)], True)
        return kind == "preempt"

    held: dict[str, Resources] = {}  # victim queue -> what its reclaimed gangs held
    for v in plan.preemptions:
        run = running.get(v.job)
        if run is None:
            continue  # reported by _bookkeeping
        taker = pending.get(v.preemptor) if v.preemptor is not None else None
        if taker is not None and taker.queue == run.job.queue:
            continue
        if taker is None and any(preempts(t, run.job) for t in placed):
            continue  # a gang of its own queue may have taken the room
        for name in _line(queues, run.job.queue):
            held[name] = held.get(name, Resources()) + placed_requests(run.job, run.placement.pods)
    for name, taken in sorted(held.items()):
        guarantee = queues[name].guarantee if name in queues else None
        if not guarantee:
            continue
        after = _subtree(queues, usage, name)
        below = {k: v - after.get(k) for k, v in guarantee if taken.get(k) > 0 and after.get(k) < v}
        if below:
            yield f"reclaim takes queue {name} below its guarantee by {below}"


def guarantee_problems(snapshot: FederationSnapshot, plan: Plan) -> Iterator[str]:
    """Both rules of the module doc, as ``validate`` sentences."""
    queues = {q.name: q for q in snapshot.queues}
    jobs = {p.job.name: p.job for p in snapshot.pending} | {r.job.name: r.job for r in snapshot.running}
    usage = _usage_after(snapshot, plan, jobs)
    yield from _lent(snapshot, plan, queues, jobs, usage)
    yield from _reclaimed(snapshot, plan, queues, usage)
