"""One planning round's mutable context: where a gang can go now, and recording it.

Shared by the greedy planner, the preemption search and the CP-SAT repair pass, so that
all of them apply the same hard rules (eligibility, queue capability, guarantees, pod-level
packing inside one domain of one cluster) and the same preference: lowest tier first, then
the fullest domain that still packs (best fit keeps empty domains whole for big gangs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from operator import ge

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, Placement, Plan, Preemption, RunningJob
from federation.domain.propagation import PropagationPolicy
from federation.domain.resources import GPU, Resources
from federation.placement.elastic import extra_pods, placed_requests
from federation.placement.eligibility import (
    allowed_clusters,
    ever_holding,
    exclusive_mask,
    needs_masks,
    node_masks,
    pod_classes,
    tier_limit,
    usable_nodes,
)
from federation.placement.intent import TopologyWait, topology_wait, wait_seconds
from federation.placement.ledger import QueueLedger
from federation.placement.packing import Vector, vector
from federation.placement.partitions import pack_partitioned, partitioned, strict_partitions
from federation.placement.preference import prefers
from federation.placement.score import Scoring
from federation.placement.state import DomainState, RoundState

MAX_PACK_FAILS = 48  # per tier: give up on a tier after this many domains that fail to pack
MAX_TIED = 8  # equally tight domains compared on ``Scoring.guard`` before packing


class PlanningRound:
    """State, ledger and decisions of one round.

    ``grace`` and ``topology_wait`` are the policy of ``PlanLimits`` (planners open a round
    with ``open_round``, which passes it); the defaults here are the rules alone — evict at
    once, never hold a gang back. ``clock`` (monotonic seconds) is what ``deadline`` and
    every time budget of the round are measured on.
    """

    def __init__(self, snapshot: FederationSnapshot, deadline: float | None = None, grace: float | None = 0.0,
                 topology_wait: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.snapshot = snapshot
        self.deadline = deadline
        self.clock = clock
        self.queues = {q.name: q for q in snapshot.queues}
        # Pending gangs that have waited out the preemption grace and so may evict others.
        self.may_evict = frozenset(
            p.job.name for p in snapshot.pending
            if p.may_preempt and grace is not None and (grace <= 0 or snapshot.now - p.submitted_at >= grace))
        # Gangs still inside their opt-in topology wait (job annotation, queue default or
        # ``topology_wait``, the service default; placement/intent.py): offered only their
        # lowest tier. With none of those set no gang waits (Volcano semantics).
        self.topology_wait = topology_wait
        self._topology_waiting = frozenset(
            p.job.name for p in snapshot.pending
            if (wait := self.wait_seconds(p.job)) > 0 and snapshot.now - p.submitted_at < wait)
        self.state = RoundState(snapshot)
        self.ledger = QueueLedger(snapshot)
        self.scoring = Scoring(snapshot, self.ledger)
        gi = self.state.gpu_index
        if self.state.keys[gi] == GPU:  # GPU domains: free and allocatable straight from the round state
            self.scoring.prime({
                (d.cluster.name, d.domain.name): (self.state.start_domain_free[d.uid][gi], d.alloc_gpu)
                for d in self.state.domains
            })
        self.placements: dict[str, Placement] = {}
        self.preempted: dict[str, Preemption] = {}
        self.running = {r.job.name: r for r in snapshot.running}
        self.running_by_cluster: dict[str, list[RunningJob]] = {}
        for r in snapshot.running:
            self.running_by_cluster.setdefault(r.placement.cluster, []).append(r)
        self._groups: dict[PropagationPolicy | None, tuple[tuple[str, ...], ...]] = {}
        self._tainted = {c.name for c in snapshot.clusters if any(n.taints for n in c.nodes if n.usable)}
        self._allowed_nodes: dict[tuple[str, object, frozenset[tuple[str, str]] | None], dict[str, Node]] = {}
        self._pods: dict[str, tuple[list[Vector], Vector]] = {}
        self._failed: set[object] = set()
        self._sets: dict[tuple[str, ...], frozenset[str]] = {}
        self._ever: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._limits: dict[tuple[object, tuple[str, ...], int | None], tuple[dict[str, int | None], int | None]] = {}
        self.barred: dict[str, frozenset[tuple[str, str]]] = {}
        # Every hold of the round, in the order made: (job, cluster, domain, held nodes, why,
        # constraint); ``reasons`` names the one whose nodes a barred job would have used.
        self.holds: list[tuple[str, str, str, frozenset[tuple[str, str]], str, str]] = []
        # Gangs offered only their lowest feasible tier because room is reserved for them
        # there (``tier_reserve``): job -> the bound they waited past, in seconds.
        self.tier_reserved: dict[str, float] = {}

    def bar_returning_victims(self, previous: Plan | None) -> None:
        """Keep last round's victims off the room last round planned for still-pending jobs.

        Why: an eviction frees room for its preemptor; if the preemptor has not started by
        the next round (the agent was slow, the placement was rejected) that room looks
        free, the requeued victim grabs it back, its queue goes above its fair share again
        and the round after reclaims it again — an evict/re-place cycle that runs nothing.
        """
        if previous is None or not previous.preemptions:
            return
        pending = {p.job.name for p in self.snapshot.pending}
        held = frozenset((p.cluster, a.node) for p in previous.placements if p.job in pending for a in p.pods)
        if held:
            self.barred = {v.job: held for v in previous.preemptions if v.job in pending}

    def wait_of(self, job: Job) -> TopologyWait:
        """The topology wait that applies to ``job`` and where it comes from."""
        return topology_wait(job, self.queues.get(job.queue), self.topology_wait)

    def wait_seconds(self, job: Job) -> float:
        """``wait_of(job).seconds``, without building the explanation."""
        return wait_seconds(job, self.queues.get(job.queue), self.topology_wait)

    def waiting_tier(self, job: Job) -> int | None:
        """The tier a gang inside its topology wait, or with room reserved at its lowest tier
        (``tier_reserve``), holds out for (None: not waiting)."""
        if job.name not in self._topology_waiting and job.name not in self.tier_reserved:
            return None
        return self.scoring.lowest_tier(job)

    def bar(self, job: str, nodes: frozenset[tuple[str, str]]) -> None:
        """Keep ``nodes`` ((cluster, node) pairs) from ``job`` this round, on top of what it is already kept from."""
        self.barred[job] = self.barred.get(job, frozenset()) | nodes

    def holds_room(self, job: str) -> bool:
        """Whether some hold of this round keeps room for ``job`` (any of ``holds``, not only the last)."""
        return any(h[0] == job for h in self.holds)

    def reserve_tier(self, job: str, after: float) -> None:
        """Offer ``job`` only its lowest feasible tier this round (``tier_reserve``, which
        opens the round and calls this before any search); ``after`` is the bound it waited past."""
        self.tier_reserved[job] = after

    def release_tier(self, job: str) -> None:
        self.tier_reserved.pop(job, None)

    def tier_cap(self, job: Job, cluster: ClusterSnapshot, waiting: bool = True) -> int | None:
        """The highest tier offered to ``job`` in ``cluster`` this round (None: any).

        The hard ``networkTopology`` limit, lowered to the gang's lowest feasible tier while
        it is inside its topology wait (``waiting=False`` gives the hard limit alone).
        """
        limit = tier_limit(job, cluster)
        wait = self.waiting_tier(job) if waiting else None
        if wait is None:
            return limit
        return wait if limit is None else min(limit, wait)

    def limits(
        self, job: Job, names: tuple[str, ...], waiting: bool = True
    ) -> tuple[dict[str, int | None], int | None]:
        """Tier cap per cluster name (``tier_cap``), and the largest one (None: some cluster has none)."""
        wait = self.waiting_tier(job) if waiting else None
        key = (job.network_topology, names, wait)
        found = self._limits.get(key)
        if found is None:
            per = {n: self.tier_cap(job, self.state.clusters[n], waiting) for n in names}
            top = None if any(v is None for v in per.values()) else max(v for v in per.values() if v is not None)
            found = self._limits[key] = (per, top)
        return found

    def expired(self) -> bool:
        return self.deadline is not None and self.clock() > self.deadline

    # -- eligibility -------------------------------------------------------------------
    def groups(self, job: Job) -> tuple[tuple[str, ...], ...]:
        """Allowed cluster names per affinity group, in fallback order (cached per policy)."""
        key = job.propagation
        if key not in self._groups:
            self._groups[key] = tuple(tuple(c.name for c in g) for g in allowed_clusters(job, self.snapshot))
        return self._groups[key]

    def ever_holding(self, job: Job, names: tuple[str, ...]) -> tuple[str, ...]:
        """The clusters of ``names`` that, empty, could hold the gang within its hard tier
        limit (``eligibility.ever_holding``), cached per gang shape, topology and names.

        Why cached: every job left pending asks it for its reason, and at 10,000 jobs the
        ~250 distinct reasons asked it over all 100 clusters each (~40 ms); they share a
        few dozen shapes."""
        key = (self.ledger.shapes(job), job.network_topology, names)
        found = self._ever.get(key)
        if found is None:
            clusters = self.state.clusters
            found = self._ever[key] = tuple(c.name for c in ever_holding(job, [clusters[n] for n in names]))
        return found

    def allowed_nodes(self, cluster: ClusterSnapshot, job: Job) -> dict[str, Node] | None:
        """The nodes some pod of the job may use in ``cluster``; None when that is every usable node."""
        held = self.barred.get(job.name)
        uniform = job.uniform_constraints
        if held is None and cluster.name not in self._tainted and uniform is not None and not uniform.selective:
            return None
        key = (cluster.name, job.node_constraints, held)
        found = self._allowed_nodes.get(key)
        if found is None:
            found = self._allowed_nodes[key] = {
                n.name: n for n in usable_nodes(cluster, job) if held is None or (cluster.name, n.name) not in held}
        return found

    def pack(self, dom: DomainState, job: Job, start: bool = False) -> list[str] | None:
        """Pack the gang's pods onto nodes of ``dom`` each pod may use (None: it does not fit).

        ``start`` packs against the free capacity at the start of the round.
        """
        pods, _ = self.demand(job)
        allowed = self.allowed_nodes(dom.cluster, job)
        if partitioned(job):
            found = self._pack_partitions(dom, job, pods, allowed, start)
            if found is not None or strict_partitions(job):
                return found  # soft or no partition topology: a plain packing will do
        if any(c.preferred for c in job.node_constraints):
            # Preferred node affinity, a soft term below topology: the domain is already
            # chosen; inside it, the nodes every task prefers are tried first, alone.
            nodes = self.state.nodes[dom.cluster.name]
            liked = {n for n in dom.nodes if n in nodes and (allowed is None or n in allowed)
                     and all(c.preference(nodes[n]) > 0 for c in job.node_constraints if c.preferred)}
            found = self._pack_on(dom, job, pods, liked, start) if liked else None
            if found is not None:
                return found
        if not needs_masks(job):
            return self.state.pack(dom, pods, allowed, start)
        return self._pack_on(dom, job, pods, allowed, start)

    def _pack_on(self, dom: DomainState, job: Job, pods: list[Vector], allowed: Collection[str] | None,
                 start: bool) -> list[str] | None:
        masks = node_masks(dom.cluster, job)
        if allowed is not None:
            masks = {n: m for n, m in masks.items() if n in allowed}
        return self.state.pack_masked(dom, pods, pod_classes(job), masks, exclusive_mask(job), start)

    def _pack_partitions(self, dom: DomainState, job: Job, pods: list[Vector], allowed: Collection[str] | None,
                         start: bool) -> list[str] | None:
        """``pack`` keeping each partition whole in one HyperNode it may use (placement/partitions.py)."""
        masks = node_masks(dom.cluster, job)
        if allowed is not None:
            masks = {n: m for n, m in masks.items() if n in allowed}
        free = (self.state.start_node_free if start else self.state.node_free)[dom.cluster.name]
        keys = [(t, i) for t, i, _ in job.gang_pods()]
        return pack_partitioned(job, keys, pods, pod_classes(job), dom.cluster.tree, dom.domain, free, masks,
                                exclusive_mask(job))

    def demand(self, job: Job) -> tuple[list[Vector], Vector]:
        if job.name not in self._pods:
            self._pods[job.name] = self.state.demand(job)
        return self._pods[job.name]

    # -- search ------------------------------------------------------------------------
    def find_home(
        self, job: Job, names: tuple[str, ...], ignore_limit: bool = False, waiting: bool = True
    ) -> tuple[DomainState, list[str]] | None:
        """Lowest tier first, then fullest domain: the first domain the gang packs into.

        Among equally full domains the one whose ancestors are fullest wins
        (``Scoring.guard``): whole spines stay whole for the gangs that need them. On a fleet
        of mixed node sizes, domains that keep the node class the largest queued pods need
        come first within a tier (``Scoring.oversize``): big nodes stay for big pods."""
        pods, need = self.demand(job)
        st = self.state
        allowed = self._sets.get(names)
        if allowed is None:
            allowed = self._sets[names] = frozenset(names)
        limits, top = self.limits(job, names, waiting) if not ignore_limit else ({n: None for n in names}, None)
        probe = st.probe(pods, need)
        ix = probe[0]
        largest, wanted = st.slot_need(pods)
        sc = self.scoring
        passes: tuple[bool | None, ...] = (False, True) if sc.charged_need(job) else (None,)
        for tier in st.tiers:
            if top is not None and tier > top:
                break
            for oversized in passes:
                fails = 0
                tied: list[DomainState] = []
                for dom in st.candidates(tier, probe, names):
                    if tied and (dom.index[ix] != tied[0].index[ix] or len(tied) >= MAX_TIED):
                        found = self._pack_tied(job, tied)
                        if found is not None:
                            return found
                        fails += len(tied)
                        tied = []
                        if fails >= MAX_PACK_FAILS:
                            break
                    cname = dom.cluster.name
                    if cname not in allowed:
                        continue
                    limit = limits[cname]
                    if limit is not None and tier > limit:
                        continue
                    if oversized is not None and (sc.oversize(job, cname, dom.domain.name) > 0) != oversized:
                        continue  # this pass takes only the other node class
                    if not all(map(ge, dom.free, need)) or not st.has_slots(dom, largest, wanted):
                        continue
                    tied.append(dom)
                if tied and fails < MAX_PACK_FAILS:
                    found = self._pack_tied(job, tied)
                    if found is not None:
                        return found
        return None

    def _pack_tied(self, job: Job, tied: list[DomainState]) -> tuple[DomainState, list[str]] | None:
        """Pack into the first of equally tight domains, those with the fullest ancestors first."""
        if len(tied) > 1:
            guard, liked = self.scoring.guard, self.scoring.preference
            weigh = prefers(job)  # without a preferred affinity the term is 0 everywhere: not asked per domain
            tied.sort(key=lambda d: guard(d.cluster.name, d.domain.name)
                      - (liked(job, d.cluster.name, d.domain.name) if weigh else 0))
        for dom in tied:
            nodes = self.pack(dom, job)
            if nodes is not None:
                return dom, nodes
        return None

    def admissible(self, job: Job) -> bool:
        """Queue-level rules: capability not exceeded, others' guarantees not borrowed."""
        return self.ledger.capability_ok(job) and self.ledger.guarantee_ok(job)

    def place(self, job: Job) -> Placement | None:
        """Place ``job`` in the first affinity group that can hold it now, or return None.

        A gang that found no room stays unplaceable until room is given back (placements
        only take room), so identical gangs after it are refused without searching. Identical
        means the same gang shape (``ledger.shapes``: the pods that must start together and
        their node constraints; an elastic job that needs fewer pods than one that failed may
        still fit), topology, policy, barred nodes and tier held out for.
        """
        if not self.admissible(job):
            return None
        key = (self.ledger.shapes(job), job.network_topology, job.propagation, self.barred.get(job.name),
               self.waiting_tier(job))
        if key in self._failed:
            return None
        for names in self.groups(job):
            if not names:
                continue
            found = self.find_home(job, names)
            if found is not None:
                return self.commit(job, *found)
        self._failed.add(key)
        return None

    # -- recording ---------------------------------------------------------------------
    def commit(self, job: Job, dom: DomainState, nodes: Sequence[str]) -> Placement:
        """Place the gang's pods on ``nodes`` (``job.gang_pods()`` order); an elastic job
        also starts as many further replicas as fit in ``dom`` (placement/elastic.py)."""
        pods, _ = self.demand(job)
        self.state.take(dom.cluster.name, list(zip(nodes, pods, strict=True)))
        assigned = self.state.assignments(job, nodes)
        if job.elastic:
            assigned += tuple(extra_pods(self, job, dom, assigned))
            self.ledger.add(job, +1, placed_requests(job, assigned))
        else:
            self.ledger.add(job, +1)
        placement = Placement(job.name, dom.cluster.name, dom.domain.name, dom.tier, assigned)
        self.placements[job.name] = placement
        return placement

    def undo(self, job: Job) -> None:
        self._failed.clear()
        placement = self.placements.pop(job.name)
        vectors = {(t, i): vector(r, self.state.keys) for t, i, r in job.pods()}
        self.state.give(placement.cluster, [(a.node, vectors[(a.task, a.index)]) for a in placement.pods])
        self.ledger.add(job, -1)

    def evict(self, running: RunningJob, reason: str, preemptor: str | None) -> None:
        self._failed.clear()
        self.state.give(running.placement.cluster, self.state.running_pods(running))
        self.ledger.add(running.job, -1)
        self.preempted[running.job.name] = Preemption(running.job.name, reason, preemptor)

    def unevict(self, running: RunningJob) -> None:
        """Undo ``evict`` (the caller checked that the victim's pods still fit)."""
        del self.preempted[running.job.name]
        self.state.take(running.placement.cluster, self.state.running_pods(running))
        self.ledger.add(running.job, +1)

    def fits_back(self, running: RunningJob) -> bool:
        """Would an evicted gang's pods still fit where they were (nothing took the room)?"""
        frees = self.state.node_free.get(running.placement.cluster, {})
        merged = self.state._merge(self.state.running_pods(running))
        return all(
            node in frees and all(f >= d for f, d in zip(frees[node], need, strict=True)) for node, need in merged
        )

    # -- checkpoints ---------------------------------------------------------------------
    def mark(self) -> Mark:
        """A cheap checkpoint for a change confined to a few clusters (a neighbourhood step):
        queue usage and decisions are copied now, node and domain state copy-on-write, per
        cluster, when first touched. Close it with ``roll_back`` or ``keep``; no nesting."""
        if self.state.journal is not None:
            raise RuntimeError("a mark is already open")
        self.state.journal = {}
        return Mark(dict(self.ledger.usage), self.ledger.free_total, dict(self.placements), dict(self.preempted))

    def roll_back(self, mark: Mark) -> None:
        """Return to ``mark`` and close it."""
        self._failed.clear()
        self.state.roll_back()
        self.ledger.usage = dict(mark.usage)
        self.ledger.free_total = mark.free_total
        self.placements = dict(mark.placements)
        self.preempted = dict(mark.preempted)

    def keep(self) -> None:
        """Close the open mark, keeping what changed since."""
        self.state.journal = None

    def checkpoint(self) -> Checkpoint:
        """A copy of everything a round mutates (cheap: flat dicts and small lists)."""
        st = self.state
        return Checkpoint(
            {c: dict(d) for c, d in st.node_free.items()},
            [(list(d.free), dict(d.gpu_hist), dict(d.index)) for d in st.domains],
            {k: list(v) for k, v in st.rows.items()},
            dict(self.ledger.usage),
            self.ledger.free_total,
            dict(self.placements),
            dict(self.preempted),
        )

    def restore(self, cp: Checkpoint) -> None:
        """Return to ``cp`` (which stays reusable)."""
        self._failed.clear()
        st = self.state
        st.node_free = {c: dict(d) for c, d in cp.node_free.items()}
        for dom, (free, hist, index) in zip(st.domains, cp.domains, strict=True):
            dom.free, dom.gpu_hist, dom.index = list(free), dict(hist), dict(index)
        st.rows = {k: list(v) for k, v in cp.rows.items()}
        self.ledger.usage = dict(cp.usage)
        self.ledger.free_total = cp.free_total
        self.placements = dict(cp.placements)
        self.preempted = dict(cp.preempted)


@dataclass(frozen=True)
class Mark:
    usage: dict[str, Resources]
    free_total: Resources
    placements: dict[str, Placement]
    preempted: dict[str, Preemption]


@dataclass(frozen=True)
class Checkpoint:
    node_free: dict[str, dict[str, Vector]]
    domains: list[tuple[list[int], dict[int, int], dict[int, int]]]
    rows: dict[tuple[int, int], list[int]]
    usage: dict[str, Resources]
    free_total: Resources
    placements: dict[str, Placement]
    preempted: dict[str, Preemption]

