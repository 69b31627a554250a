"""Preemption and reclaim in the model: which running gangs may be evicted, and their cost.

Potential victims (``e[v]``), the one rule ``placement.eviction.may_evict`` (as for the
greedy ``placement.preempt``):

* **preempt** — a running gang of queue Q when the window has a class of Q in a strictly
  higher band (same queue, so a higher job priority);
* **reclaim** — a running gang of a ``reclaimable`` queue above its fair share, when the
  window has a class of another queue that is below its fair share, with a queue priority
  not below the victim's and a band not below the victim's.

Linking (so evictions only serve who may cause them): per cluster, the units evicted by
preemption from queue Q are at most the units of Q's higher-band classes placed in that
cluster; the units reclaimed are at most the units placed there for under-share queues;
and a queue never loses more than its excess over its fair share. Whole gangs only: ``e``
is per gang and frees all its pods. Cost: the victim's band value plus a term growing
with the GPU-hours it already ran (``score.victim_cost``), weighted by its band.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from federation.domain.plans import RunningJob
from federation.placement.cpsat.classes import JobClass
from federation.placement.cpsat.variables import Vars, Window
from federation.placement.eviction import Eviction, may_evict
from federation.placement.packing import Vector
from federation.placement.rounds import PlanningRound


def under(rnd: PlanningRound, queue: str) -> bool:
    return rnd.ledger.under(queue)


def kind(rnd: PlanningRound, classes: list[JobClass], victim: RunningJob) -> Eviction | None:
    """How ``victim`` may be evicted for this window (``eviction.may_evict`` for some class
    that has waited out the preemption grace), preempt before reclaim; or None."""
    if victim.job.name in rnd.preempted or not victim.placement.pods:
        return None
    led = rnd.ledger
    band = rnd.scoring.band(victim.job)
    vq = led.queues[victim.job.queue]
    over = led.over(vq.name)
    kinds = {may_evict(led.queues[jc.queue], jc.band, led.under(jc.queue), vq, band, over)
             for jc in classes if jc.may_evict}
    return "preempt" if "preempt" in kinds else "reclaim" if "reclaim" in kinds else None


def candidates(rnd: PlanningRound, classes: list[JobClass]) -> list[RunningJob]:
    """Running gangs that some class of the window may evict, in clusters it may use."""
    if not any(jc.may_evict for jc in classes):
        return []  # no class has waited out the preemption grace (the default: never)
    clusters = {name for jc in classes for g in rnd.groups(jc.jobs[0]) for name in g}
    out = []
    for name in sorted(clusters):
        for victim in rnd.running_by_cluster.get(name, ()):
            if kind(rnd, classes, victim) is not None:
                out.append(victim)
    return out


def victim_pods(w: Window, victim: RunningJob) -> list[tuple[str, Vector]]:
    """(node, demand) of the victim's pods on nodes the round tracks."""
    known = w.rnd.state.node_free.get(victim.placement.cluster, {})
    return [(n, vec) for n, vec in w.rnd.state.running_pods(victim) if n in known]


def add(w: Window, v: Vars) -> None:
    """Linking constraints and the eviction cost term."""
    rnd = w.rnd
    m = v.model
    if not w.victims:
        return
    sc = rnd.scoring
    placed_in: dict[tuple[str, int], list[Any]] = defaultdict(list)  # (cluster, class) -> x vars
    for (k, uid), x in v.x.items():
        placed_in[(rnd.state.domains[uid].cluster.name, k)].append(x)
    by_cluster: dict[str, list[RunningJob]] = defaultdict(list)
    for victim in w.victims:
        by_cluster[victim.placement.cluster].append(victim)
    for cluster, victims in by_cluster.items():
        for how in ("preempt", "reclaim"):
            for queue in sorted({vj.job.queue for vj in victims}):
                mine = [vj for vj in victims if vj.job.queue == queue and kind(rnd, w.classes, vj) == how]
                if not mine:
                    continue
                lo = max(sc.band(vj.job) for vj in mine)
                takers = [
                    jc for jc in w.classes
                    if jc.may_evict and (
                        (how == "preempt" and jc.queue == queue and jc.band < lo)
                        or (how == "reclaim" and jc.queue != queue and under(rnd, jc.queue))
                    )
                ]
                lhs = cp_model.LinearExpr.weighted_sum(
                    [v.e[vj.job.name] for vj in mine], [sc.units(vj.job) for vj in mine]
                )
                xs = [(jc.units, x) for jc in takers for x in placed_in.get((cluster, jc.uid), [])]
                rhs = cp_model.LinearExpr.weighted_sum([x for _, x in xs], [u for u, _ in xs]) if xs else 0
                m.add(lhs <= rhs)
    for queue in sorted({vj.job.queue for vj in w.victims}):
        reclaimed = [vj for vj in w.victims if vj.job.queue == queue and kind(rnd, w.classes, vj) == "reclaim"]
        if reclaimed:
            # Floor the excess and ceil each victim's size: rounding either the other way let
            # a reclaim take the victim's queue a fraction below its fair share, so the next
            # round it counted as starved and reclaimed back (an evict/re-place cycle).
            excess = math.floor((rnd.ledger.share(queue) - rnd.ledger.fair[queue]) * sc.scale + 1e-6)
            sizes = [math.ceil(rnd.ledger.size(vj.job) * sc.scale - 1e-6) for vj in reclaimed]
            m.add(sum(n * v.e[vj.job.name] for n, vj in zip(sizes, reclaimed, strict=True)) <= max(0, excess))
    for victim in w.victims:
        v.objective.append((-sc.victim_cost(victim), v.e[victim.job.name], sc.band(victim.job)))
