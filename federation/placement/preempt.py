"""Preemption (within a queue) and reclaim (across queues), whole gangs only.

Who may be evicted for a pending gang P of queue Q (the one rule, ``eviction.may_evict``;
Volcano ``preempt`` / ``reclaim`` actions, gang-aware as in Volcano's 2026 gang-aware
eviction design):

* **preempt** — running gangs of Q itself with a lower job priority;
* **reclaim** — running gangs of another queue that is ``reclaimable``, has a queue
  priority not above Q's and is above its fair share, in a band not above P's; only
  while Q is below its own fair share, and never so much that the victim's queue drops
  below its fair share (capacity lent beyond a fair share is taken back; a fair share
  itself is never reclaimed).

Victims are chosen per candidate domain (lowest tier first, at most ``MAX_DOMAINS`` per
cluster, like Volcano's capped eviction gradients): cheapest first — lowest priority band,
then fewest GPU-hours already run, then smallest gang — added until P packs, then any
victim that turns out unnecessary is given back. The domain with the cheapest victim set
wins. Running gangs are never moved: a victim is stopped, not relocated.
"""

from __future__ import annotations

from federation.domain.jobs import Job
from federation.domain.plans import Placement, RunningJob
from federation.placement.eviction import may_evict
from federation.placement.ledger import EPS
from federation.placement.rounds import PlanningRound
from federation.placement.state import DomainState

MAX_DOMAINS = 8


def _eligible(rnd: PlanningRound, job: Job, victim: RunningJob, under: bool) -> bool:
    if victim.job.name in rnd.preempted or not victim.placement.pods:
        return False
    led, sc = rnd.ledger, rnd.scoring
    vq = victim.job.queue
    return may_evict(led.queues[job.queue], sc.band(job), under,
                     led.queues[vq], sc.band(victim.job), vq != job.queue and led.over(vq)) is not None


def _cost(rnd: PlanningRound, victim: RunningJob) -> tuple[int, int, int]:
    sc = rnd.scoring
    return (-sc.band(victim.job), sc.run_cost(victim), victim.job.gang_size)


def _fits(rnd: PlanningRound, dom: DomainState, job: Job) -> list[str] | None:
    pods, need = rnd.demand(job)
    if any(f < n for f, n in zip(dom.free, need, strict=True)) or not rnd.state.slots_ok(dom, pods):
        return None
    return rnd.pack(dom, job)


def _try_domain(rnd: PlanningRound, job: Job, dom: DomainState, victims: list[RunningJob]) -> list[RunningJob] | None:
    """A minimal-ish victim set inside ``dom`` that lets ``job`` pack (state left unchanged)."""
    st = rnd.state
    cluster = dom.cluster.name
    removed: dict[str, float] = {}
    chosen: list[RunningJob] = []
    ok = False
    for victim in sorted(victims, key=lambda v: _cost(rnd, v)):
        vq = victim.job.queue
        if vq != job.queue:
            after = rnd.ledger.share(vq) - removed.get(vq, 0.0) - rnd.ledger.size(victim.job)
            if after < rnd.ledger.fair[vq] - EPS:  # a reclaim never takes a queue below its fair share
                continue
            removed[vq] = removed.get(vq, 0.0) + rnd.ledger.size(victim.job)
        st.give(cluster, st.running_pods(victim))
        chosen.append(victim)
        if _fits(rnd, dom, job) is not None:
            ok = True
            break
    if ok:
        for victim in sorted(chosen[:-1], key=lambda v: _cost(rnd, v), reverse=True):
            st.take(cluster, st.running_pods(victim))
            if _fits(rnd, dom, job) is None:
                st.give(cluster, st.running_pods(victim))
            else:
                chosen.remove(victim)
    for victim in chosen:
        st.take(cluster, st.running_pods(victim))
    return chosen if ok else None


def preempt_for(rnd: PlanningRound, job: Job) -> Placement | None:
    """Evict the cheapest whole gangs that let ``job`` be placed, or return None."""
    if not rnd.running or job.name not in rnd.may_evict or not rnd.admissible(job):
        return None
    led = rnd.ledger
    under = led.under(job.queue)
    for names in rnd.groups(job):
        best: tuple[tuple[int, int], DomainState, list[RunningJob]] | None = None
        for cname in names:
            victims = [v for v in rnd.running_by_cluster.get(cname, ()) if _eligible(rnd, job, v, under)]
            if not victims:
                continue
            limit = rnd.tier_cap(job, rnd.state.clusters[cname])
            tried = 0
            for uid in rnd.state.cluster_domains.get(cname, ()):
                dom = rnd.state.domains[uid]
                if limit is not None and dom.tier > limit:
                    continue
                inside = [v for v in victims if any(p.node in dom.domain.nodes for p in v.placement.pods)]
                if not inside:
                    continue
                tried += 1
                chosen = _try_domain(rnd, job, dom, inside)
                if chosen is not None:
                    cost = (sum(rnd.scoring.victim_cost(v) for v in chosen), dom.tier)
                    if best is None or cost < best[0]:
                        best = (cost, dom, chosen)
                if tried >= MAX_DOMAINS:
                    break
        if best is not None:
            _, dom, chosen = best
            for victim in chosen:
                kind = "preempt" if victim.job.queue == job.queue else "reclaim"
                why = (
                    f"{kind}: evicted for higher-priority job {job.name}"
                    if kind == "preempt"
                    else f"reclaim: queue {victim.job.queue} is above its fair share; {job.queue} is below"
                )
                rnd.evict(victim, why, job.name)
            nodes = _fits(rnd, dom, job)
            if nodes is None:  # pragma: no cover - the dry run above proved it packs
                return None
            return rnd.commit(job, dom, nodes)
    return None
