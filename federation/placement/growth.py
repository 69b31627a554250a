"""Growing running elastic jobs toward ``replicas``, inside the domain they run in.

Volcano keeps scheduling the pending pods of a running elastic job as room appears: once
the gang plugin has seen ``minAvailable`` pods bound, the job is "ready" and its remaining
pods are ordinary tasks of the allocate action (volcano-sh/volcano
``pkg/scheduler/plugins/gang``: ``jobReady``; ``pkg/scheduler/actions/allocate``). Here
that is one step after the round's plan, shared by every planner so the bench compares
placement, not growth policy:

* **Room comes from what the plan leaves.** The step replays the plan (evictions give room
  back, placements take it) and only then adds pods. Every pending gang of the round,
  whatever its priority, is served first: a running job already makes progress, a
  waiting gang makes none, and a replica added now can as well be added next round.
* **Room a waiting gang may need is not taken.** A cluster where some pending job of the
  same or a higher priority band stays unplaced (and is not impossible or blocked by its
  own queue's capability) gets no growth: the room accumulating there is what that gang
  waits for, and growing a lower-priority job into it would only have to be preempted back.
* **Running pods never move.** Added pods go onto nodes of the job's own HyperNode that
  their task may use (``elastic.extra_pods``, the function that chose the extras at
  start), within the queue's capability; the plan lists them as a ``Placement`` of the
  added pods only (``Plan.growths``).
* Jobs grow in priority-band order, then the queue furthest below its fair share first
  (fair share counts what runs: the ledger charges a running elastic job its pods).
"""

from __future__ import annotations

from dataclasses import replace

from federation.domain.plans import FederationSnapshot, Placement, Plan, RunningJob
from federation.placement.elastic import extra_pods, placed_requests
from federation.placement.packing import vector
from federation.placement.rounds import PlanningRound

# Unplaced reasons that say the job could not use a cluster's room anyway.
_NOT_WAITING_FOR_ROOM = frozenset({"queue-capability", "unschedulable", "node-constraints"})


def growable(snapshot: FederationSnapshot) -> tuple[RunningJob, ...]:
    """Running elastic jobs that run fewer pods than their replicas (and whose placement
    records its pods: a placed job whose Work is not created yet has none to grow from)."""
    return tuple(r for r in snapshot.running
                 if r.job.elastic and r.placement.pods and len(r.placement.pods) < r.job.total_replicas)


def grow(snapshot: FederationSnapshot, plan: Plan) -> Plan:
    """``plan`` with ``growths`` for the running elastic jobs that can grow after it."""
    preempted = {v.job for v in plan.preemptions}
    candidates = [r for r in growable(snapshot) if r.job.name not in preempted]
    if not candidates:
        return plan
    rnd = PlanningRound(snapshot)
    _replay(rnd, plan)
    bands = {r.job.name: rnd.scoring.band(r.job) for r in candidates}
    blocked = _blocked(rnd, plan)
    candidates.sort(key=lambda r: (bands[r.job.name], rnd.ledger.share(r.job.queue), r.started_at, r.job.name))
    growths: list[Placement] = []
    for run in candidates:
        cluster = run.placement.cluster
        if any(band <= bands[run.job.name] for band in blocked.get(cluster, ())):
            continue
        uid = rnd.state.uid_of.get((cluster, run.placement.hypernode))
        if uid is None:  # the domain is gone (cluster unhealthy, nodes lost): nothing to grow into
            continue
        added = extra_pods(rnd, run.job, rnd.state.domains[uid], run.placement.pods, running=True)
        if not added:
            continue
        rnd.ledger.add(run.job, -1)
        rnd.ledger.add(run.job, +1, placed_requests(run.job, (*run.placement.pods, *added)))
        growths.append(replace(run.placement, pods=tuple(added)))
    return replace(plan, growths=tuple(growths)) if growths else plan


def _replay(rnd: PlanningRound, plan: Plan) -> None:
    """Apply the plan's evictions and placements to the round's room and ledger."""
    for v in plan.preemptions:
        victim = rnd.running.get(v.job)
        if victim is not None:
            rnd.state.give(victim.placement.cluster, rnd.state.running_pods(victim))
            rnd.ledger.add(victim.job, -1)
    jobs = {p.job.name: p.job for p in rnd.snapshot.pending}
    for p in plan.placements:
        job = jobs.get(p.job)
        if job is None:
            continue
        need = {(t, i): vector(r, rnd.state.keys) for t, i, r in job.pods()}
        rnd.state.take(p.cluster, [(a.node, need[(a.task, a.index)]) for a in p.pods])
        rnd.ledger.add(job, +1, placed_requests(job, p.pods) if job.elastic else None)


def _blocked(rnd: PlanningRound, plan: Plan) -> dict[str, list[int]]:
    """Per cluster, the priority bands of pending jobs left waiting for room there."""
    jobs = {p.job.name: p.job for p in rnd.snapshot.pending}
    out: dict[str, list[int]] = {}
    for u in plan.unplaced:
        job = jobs.get(u.job)
        if job is None or u.unschedulable or u.constraint in _NOT_WAITING_FOR_ROOM:
            continue
        band = rnd.scoring.band(job)
        for names in rnd.groups(job):
            for name in names:
                out.setdefault(name, []).append(band)
    return out
