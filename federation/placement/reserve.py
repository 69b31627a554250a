"""Reservation: keep one domain's nodes for the gang that has starved longest.

Why: without eviction, a gang that needs whole nodes can wait forever while jobs that
need less keep taking each node as it frees. Measured on our `fair-saturated` scenario:
the heaviest-weighted queue, left with only 2 x 8-GPU gangs to run, sat 0.16-0.40 below
its fair share for 8,000 s while 10-19 % of the GPUs stood idle in fragments.

The answer of batch schedulers is a reservation: Slurm's backfill plans a start time for
the highest-priority pending job and lets nothing else take those resources (it can
backfill jobs that end first; with no runtimes we backfill nothing), and Volcano's
`reserve`/`elect` plugins (v1.0-1.4) picked the most starved job and locked nodes for it.

The rule, per round, is pure and deterministic, so the same domain is kept round after
round and drains as its jobs finish:

1. candidates: pending jobs that have waited at least ``reserve_after`` and whose queue is
   below its fair share (a queue at its share is not starved, however long one of its
   jobs waits), highest priority band first, then oldest; the first few are tried, and
   the first that cannot be placed now but fits some allowed domain when empty is chosen;
2. its domain: among the domains of its first affinity group within its tier cap (the
   topology wait included) that could hold it empty, the lowest tier (the smallest set
   of nodes to keep), then the fewest GPUs still missing — the closest to fitting — then
   the name;
3. every other pending job of the same or a lower band is barred from that domain's
   nodes this round; jobs of higher bands are not (priority still comes first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from federation.domain.jobs import Job
from federation.domain.plans import PendingJob
from federation.placement.eligibility import exclusive_mask, node_masks, pod_classes
from federation.placement.packing import pack_masked, vector
from federation.placement.state import DomainState

if TYPE_CHECKING:  # only for annotations
    from federation.placement.rounds import PlanningRound

MAX_CANDIDATES = 8  # starving jobs examined per round (each costs a search)


def holds_when_empty(rnd: PlanningRound, dom: DomainState, job: Job, only: Sequence[str] | None = None) -> bool:
    """Could ``dom`` (or just its nodes ``only``) hold the gang once emptied?"""
    pods, _ = rnd.demand(job)
    nodes = rnd.state.nodes[dom.cluster.name]
    allowed = rnd.allowed_nodes(dom.cluster, job)
    masks = node_masks(dom.cluster, job)
    buckets: dict[tuple[tuple[int, ...], int], list[str]] = {}
    for name in dom.nodes if only is None else only:
        if name in nodes and name in masks and (allowed is None or name in allowed):
            buckets.setdefault((vector(nodes[name].allocatable, rnd.state.keys), masks[name]), []).append(name)
    return pack_masked(pods, pod_classes(job), buckets, exclusive_mask(job)) is not None


def target(rnd: PlanningRound, job: Job) -> DomainState | None:
    groups = [g for g in rnd.groups(job) if g]
    if not groups:
        return None
    gi = rnd.state.gpu_index
    _, need = rnd.demand(job)
    best: tuple[tuple[int, int, str, str], DomainState] | None = None
    for name in groups[0]:
        cap = rnd.tier_cap(job, rnd.state.clusters[name])
        for uid in rnd.state.cluster_domains.get(name, ()):
            dom = rnd.state.domains[uid]
            if cap is not None and dom.tier > cap:
                continue
            if not holds_when_empty(rnd, dom, job):
                continue
            key = (dom.tier, max(0, need[gi] - dom.free[gi]), name, dom.domain.name)
            if best is None or key < best[0]:
                best = (key, dom)
    return best[1] if best else None


def bar(rnd: PlanningRound, job: Job, held: frozenset[tuple[str, str]]) -> None:
    """Keep ``held`` (cluster, node) pairs from every other pending job of ``job``'s band and below."""
    band = rnd.scoring.band(job)
    for other in rnd.snapshot.pending:
        if other.job.name != job.name and rnd.scoring.band(other.job) >= band:
            rnd.bar(other.job.name, held)


# Why a starved job's domain is kept, and the BLOCKED_BY name given to the jobs kept out.
STARVED_WHY = ("pending longest in a queue below its fair share", "fairness")


def reserve_for_starved(rnd: PlanningRound, reserve_after: float | None) -> str | None:
    """Bar other jobs from the domain kept for the most starved job; return its name."""
    if reserve_after is None:
        return None
    now = rnd.snapshot.now
    led = rnd.ledger
    starved = sorted(
        (p for p in rnd.snapshot.pending
         if now - p.submitted_at >= reserve_after and led.under(p.job.queue)),
        key=lambda p: (rnd.scoring.band(p.job), p.submitted_at, p.job.name),
    )
    kept = keep_for_first(rnd, starved, lambda dom, _job: list(dom.nodes), lambda _job: STARVED_WHY)
    return kept.name if kept is not None else None


def keep_for_first(rnd: PlanningRound, candidates: Sequence[PendingJob],
                   nodes_of: Callable[[DomainState, Job], Sequence[str] | None],
                   why: Callable[[Job], tuple[str, str]]) -> Job | None:
    """Keep room for the first of ``candidates`` (at most ``MAX_CANDIDATES`` tried) that is
    admissible, cannot be placed now, and has a ``target`` domain; ``nodes_of`` says which of
    that domain's nodes to keep (None: skip the job); ``why`` gives the reason and
    BLOCKED_BY name recorded with the hold (``rnd.holds``). Returns the job kept for."""
    for p in candidates[:MAX_CANDIDATES]:
        job = p.job
        if not rnd.admissible(job) or any(rnd.find_home(job, g) is not None for g in rnd.groups(job) if g):
            continue
        dom = target(rnd, job)
        nodes = nodes_of(dom, job) if dom is not None else None
        if dom is None or nodes is None:
            continue
        held = frozenset((dom.cluster.name, n) for n in nodes)
        bar(rnd, job, held)
        rnd.holds.append((job.name, dom.cluster.name, dom.domain.name, held, *why(job)))
        return job
    return None
