"""Reservation: keep the fewest nodes a starved queue's oldest job needs, until they drain.

Why: without eviction, a job that needs whole nodes can wait forever while jobs that
need less keep taking each node as it frees. Measured on our `fair-saturated` scenario:
the heaviest-weighted queue, left with only 8- and 16-GPU jobs to run, sat 0.16-0.33
below its fair share for thousands of seconds while the other queues' 1-4 GPU jobs took
every GPU that freed.

The answer of batch schedulers is a reservation: Slurm's backfill plans a start time for
the highest-priority pending job and lets nothing else take those resources (it can
backfill jobs that end first; with no runtimes we backfill nothing), and Volcano's
`reserve`/`elect` plugins (v1.0-1.4) picked the most starved job and locked nodes for it.

The rule, per round, is pure and deterministic, so the same nodes are kept round after
round and drain as their jobs finish:

1. candidates: pending jobs that have waited at least ``reserve_after`` and whose queue is
   more than ``STARVED_MARGIN`` of the fleet below its fair share (a queue at or near its
   share is not starved, however long one of its jobs waits), highest priority band first,
   then oldest; the first few are tried, and the first that cannot be placed now but fits
   some allowed domain when empty is chosen;
2. its domain: among the domains of its first affinity group within its tier cap (the
   topology wait included) that could hold it empty, the lowest tier, then the fewest
   GPUs still missing (the closest to fitting), then the name;
3. inside it, only the fewest nodes that could hold the job once emptied, freest first
   (``held_nodes``): the rest of the domain stays open to everyone;
4. those nodes are barred this round to the other jobs of the job's band and below whose
   queue is not itself below its fair share: taking them would widen the gap the hold
   closes, while a queue that is also short may still use them. Jobs of higher bands are
   not barred (priority still comes first).

The first form of this rule (the whole domain, barred to every queue) cost 2-12 % of avg
JCT across the bench scenarios. Steps 3 and 4 and the margin bring that to 1-2 % on the
saturated fair-share scenarios, for most of the fairness gain; where a queue's deficit
comes from job shapes no hold fixes it still costs 3-8 %, which is why the rule is opt-in
(docs/benchmarks.md, issue 12, sixth session).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from federation.domain.jobs import Job
from federation.domain.plans import PendingJob
from federation.placement.eligibility import exclusive_mask, node_masks, pod_classes
from federation.placement.packing import pack_masked, vector
from federation.placement.state import DomainState

if TYPE_CHECKING:  # only for annotations
    from federation.placement.rounds import PlanningRound

MAX_CANDIDATES = 8  # starving jobs examined per round (each costs a search)
# How far (dominant share of the fleet) below its fair share a queue must be for its jobs
# to have room kept: a queue a few GPUs short is not starved, and every hold idles nodes.
STARVED_MARGIN = 0.1


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


def held_nodes(rnd: PlanningRound, dom: DomainState, job: Job) -> list[str] | None:
    """The fewest nodes of ``dom``, freest first, that could hold ``job`` once emptied.

    Only nodes that are room for the job count: some pod of it may use the node (another
    GPU model, a node selector or a taint make a node no room for it, however free), the
    node could take one of its pods once emptied (a remnant node too small for any pod is
    not), and it is not held for another job this round (``allowed_nodes`` leaves those
    out). Counting the others would hold nodes the job can never use."""
    gi = rnd.state.gpu_index
    name = dom.cluster.name
    frees = rnd.state.node_free.get(name, {})
    nodes = rnd.state.nodes[name]
    masks = node_masks(dom.cluster, job)
    allowed = rnd.allowed_nodes(dom.cluster, job)
    pods, _ = rnd.demand(job)
    classes = pod_classes(job)

    def room_for_a_pod(node: str) -> bool:
        have = vector(nodes[node].allocatable, rnd.state.keys)
        return any(masks[node] & (1 << c) and all(h >= d for h, d in zip(have, pod, strict=True))
                   for pod, c in zip(pods, classes, strict=True))

    usable = sorted((n for n in dom.nodes if n in frees and n in masks and (allowed is None or n in allowed)
                     and room_for_a_pod(n)),
                    key=lambda n: (-frees[n][gi], n))
    for k in range(1, len(usable) + 1):
        if holds_when_empty(rnd, dom, job, usable[:k]):
            return usable[:k]
    return None


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


def bar(rnd: PlanningRound, job: Job, held: frozenset[tuple[str, str]],
        spared: Callable[[Job], bool] = lambda _other: False) -> None:
    """Keep ``held`` (cluster, node) pairs from every other pending job of ``job``'s band
    and below, except the jobs ``spared`` says may still use them."""
    band = rnd.scoring.band(job)
    for other in rnd.snapshot.pending:
        if other.job.name != job.name and rnd.scoring.band(other.job) >= band and not spared(other.job):
            rnd.bar(other.job.name, held)


# Why a starved job's domain is kept, and the BLOCKED_BY name given to the jobs kept out.
STARVED_WHY = ("pending longest in a queue below its fair share", "fairness")


def reserve_for_starved(rnd: PlanningRound, reserve_after: float | None) -> str | None:
    """Bar the jobs of queues not short of their share from the nodes kept for the most
    starved job; return its name."""
    if reserve_after is None:
        return None
    now = rnd.snapshot.now
    led = rnd.ledger
    starved = sorted(
        (p for p in rnd.snapshot.pending
         if now - p.submitted_at >= reserve_after and led.under(p.job.queue, STARVED_MARGIN)),
        key=lambda p: (rnd.scoring.band(p.job), p.submitted_at, p.job.name),
    )

    def spared(job: Job, other: Job) -> bool:  # another queue that is short of its share too
        return other.queue != job.queue and led.under(other.queue)

    kept = keep_for_first(rnd, starved, lambda dom, job: held_nodes(rnd, dom, job), lambda _job: STARVED_WHY, spared)
    return kept.name if kept is not None else None


def keep_for_first(rnd: PlanningRound, candidates: Sequence[PendingJob],
                   nodes_of: Callable[[DomainState, Job], Sequence[str] | None],
                   why: Callable[[Job], tuple[str, str]],
                   spared: Callable[[Job, Job], bool] = lambda _job, _other: False) -> Job | None:
    """Keep room for the first of ``candidates`` (at most ``MAX_CANDIDATES`` tried) that is
    admissible, cannot be placed now, and has a ``target`` domain; ``nodes_of`` says which of
    that domain's nodes to keep (None: skip the job); ``why`` gives the reason and
    BLOCKED_BY name recorded with the hold (``rnd.holds``); ``spared(job, other)`` names the
    other jobs the hold does not bar. Returns the job kept for."""
    for p in candidates[:MAX_CANDIDATES]:
        job = p.job
        if not rnd.admissible(job) or any(rnd.find_home(job, g) is not None for g in rnd.groups(job) if g):
            continue
        dom = target(rnd, job)
        nodes = nodes_of(dom, job) if dom is not None else None
        if dom is None or nodes is None:
            continue
        held = frozenset((dom.cluster.name, n) for n in nodes)
        bar(rnd, job, held, partial(spared, job))
        rnd.holds.append((job.name, dom.cluster.name, dom.domain.name, held, *why(job)))
        return job
    return None
