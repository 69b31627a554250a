"""Decode: turn the solver's counts into concrete placements, repairing what must be.

* evictions first (``e[v] = 1``), so their room is free;
* each class's jobs are handed out in submission order to its domains, lowest tier first;
  in exact mode the pods go where ``p`` says; in aggregate mode ``pack_gang``-style
  best-fit packing inside the chosen domain decides, and a gang that does not pack there
  (the aggregate model is a relaxation) is re-placed greedily or left for the greedy pass;
* victims whose room nobody ended up using — node room or queue quota — are given back
  (never evict for nothing);
* a victim whose nodes went only to jobs that may not evict it is given back too, and
  those jobs are left for the greedy pass: the model's preemption constraint counts units
  per cluster, so a strictly-higher-priority job placed *anywhere* in the cluster used to
  license evicting a gang for an equal-priority neighbour (demo: fdn-sft-2 for fdn-rlhf).

Every decision goes through ``PlanningRound.commit``/``evict``, the same bookkeeping the greedy
planner uses, so ``validate()`` holds whatever the solver returned.
"""

from __future__ import annotations

from typing import Any

from federation.domain.jobs import Job
from federation.domain.plans import PodAssignment, RunningJob
from federation.placement.cpsat.classes import JobClass
from federation.placement.cpsat.preemption import kind
from federation.placement.cpsat.preemption import under as under_share
from federation.placement.cpsat.variables import Vars, Window
from federation.placement.eligibility import nodes_allowed
from federation.placement.eviction import may_evict
from federation.placement.partitions import partition_problems, partitioned
from federation.placement.state import DomainState


def _exact_nodes(w: Window, v: Vars, solver: Any, jc: JobClass, uid: int, count: int) -> list[list[str]]:
    pools: dict[str, list[str]] = {}
    for task, _, _ in jc.tasks:
        pool: list[str] = []
        for node in w.rnd.state.domains[uid].nodes:
            var = v.p.get((jc.uid, uid, node, task))
            if var is not None:
                pool.extend([node] * int(solver.value(var)))
        pools[task] = pool
    out = []
    for _ in range(count):
        nodes: list[str] = []
        for task, replicas, _ in jc.tasks:
            nodes.extend(pools[task][:replicas])
            pools[task] = pools[task][replicas:]
        out.append(nodes)
    return out


def _fits(w: Window, cluster: str, job: Job, nodes: list[str]) -> bool:
    pods, _ = w.rnd.demand(job)
    frees = w.rnd.state.node_free[cluster]
    need: dict[str, list[int]] = {}
    for node, vec in zip(nodes, pods, strict=False):
        acc = need.setdefault(node, [0] * len(vec))
        for i, a in enumerate(vec):
            acc[i] += a
    return len(nodes) == len(pods) and all(
        node in frees and all(f >= a for f, a in zip(frees[node], acc, strict=True)) for node, acc in need.items()
    )


def _partitions_hold(job: Job, dom: DomainState, nodes: list[str]) -> bool:
    """Whether the solver's nodes keep every partition whole inside a HyperNode it may use:
    the model counts pods per node, not partitions, so a partitioned job is re-packed
    partition-aware (``rnd.pack``) when they do not."""
    if not partitioned(job):
        return True
    pods = tuple(PodAssignment(t, i, n) for (t, i, _), n in zip(job.gang_pods(), nodes, strict=True))
    return next(partition_problems("", job, dom.cluster.tree, pods), None) is None


def apply(w: Window, v: Vars, solver: Any) -> list[Job]:
    """Apply the solution to ``w.rnd``; return the window's jobs left unplaced."""
    rnd = w.rnd
    evicted = []
    # Kinds and takers are decided on the window's starting shares: each eviction lowers
    # its queue's share, and re-asking afterwards mislabelled reclaims as "preempt".
    kinds = {vj.job.name: kind(rnd, w.classes, vj) for vj in w.victims}
    under = {jc.queue: under_share(rnd, jc.queue) for jc in w.classes}
    for victim in w.victims:
        if solver.value(v.e[victim.job.name]):
            how = kinds[victim.job.name] or "preempt"
            why = (
                "preempt: evicted for higher-priority work of its own queue"
                if how == "preempt"
                else f"reclaim: queue {victim.job.queue} is above its fair share"
            )
            rnd.evict(victim, why, None)
            evicted.append(victim)
    left: list[Job] = []
    for jc in w.classes:
        queue = list(jc.jobs)
        order = sorted(jc.candidates, key=lambda u: (rnd.state.domains[u].tier, u))
        for uid in order:
            count = min(int(solver.value(v.x[(jc.uid, uid)])), len(queue))
            if count <= 0:
                continue
            dom = rnd.state.domains[uid]
            planned = _exact_nodes(w, v, solver, jc, uid, count) if w.exact else [[] for _ in range(count)]
            for nodes in planned:
                job = queue.pop(0)
                if not rnd.ledger.capability_ok(job):
                    left.append(job)
                    continue
                if any(c.preferred for c in job.node_constraints):  # the soft term, inside the solver's domain
                    nodes = rnd.pack(dom, job) or nodes
                if not nodes or not _fits(w, dom.cluster.name, job, nodes) \
                        or not nodes_allowed(job, dom.cluster, nodes) or not _partitions_hold(job, dom, nodes):
                    packed = rnd.pack(dom, job)
                    if packed is None:
                        left.append(job)
                        continue
                    nodes = packed
                rnd.commit(job, dom, nodes)
        left.extend(queue)
    for victim in sorted(evicted, key=lambda r: -rnd.scoring.victim_cost(r)):
        left.extend(_unlicensed(w, victim, kinds[victim.job.name], under))
        # Give a victim back only if nothing used its room: neither its nodes nor its
        # queue's quota (an eviction may have been for capability room, not node room).
        if rnd.fits_back(victim) and rnd.admissible(victim.job):
            rnd.unevict(victim)
    return left


def _may_take(w: Window, job: Job, victim: RunningJob, how: str | None, under: dict[str, bool]) -> bool:
    """May ``job`` use room freed by evicting ``victim`` as ``how`` (``eviction.may_evict``
    on the window's starting shares: ``how`` is "reclaim" only if the victim's queue was over)?"""
    if how is None:
        return False
    sc, queues = w.rnd.scoring, w.rnd.ledger.queues
    return may_evict(queues[job.queue], sc.band(job), under.get(job.queue, False),
                     queues[victim.job.queue], sc.band(victim.job), how == "reclaim") == how


def _unlicensed(w: Window, victim: RunningJob, how: str | None, under: dict[str, bool]) -> list[Job]:
    """Undo placements on ``victim``'s nodes by jobs that may not evict it, if that lets it stay.

    Returns the jobs taken back (left for the greedy pass); if the victim still does not
    fit back, every placement is re-committed unchanged and nothing is returned.
    """
    rnd = w.rnd
    cluster = victim.placement.cluster
    nodes = {a.node for a in victim.placement.pods}
    jobs = {jc_job.name: jc_job for jc in w.classes for jc_job in jc.jobs}
    intruders = [
        p for name, p in rnd.placements.items()
        if name in jobs and p.cluster == cluster and any(a.node in nodes for a in p.pods)
        and not _may_take(w, jobs[name], victim, how, under)
    ]
    if not intruders:
        return []
    for p in intruders:
        rnd.undo(jobs[p.job])
    if rnd.fits_back(victim) and rnd.admissible(victim.job):
        return [jobs[p.job] for p in intruders]
    for p in intruders:
        rnd.commit(jobs[p.job], rnd.state.domains[rnd.state.uid_of[(cluster, p.hypernode)]], [a.node for a in p.pods])
    return []
