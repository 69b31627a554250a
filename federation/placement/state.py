"""Mutable working state of one planning round, built from an immutable snapshot.

Why a separate structure: the greedy planner, the CP-SAT repair pass and the preemption
search all ask the same question thousands of times per round — "which domain, lowest tier
first and fullest first, can hold this gang right now?" — and answering it by rescanning
10,000 nodes each time would blow the one-second budget. The state keeps, per domain, the
summed free vector and a histogram of per-node free GPUs, and per tier a list of domains
sorted by free GPUs, so a search bisects to the domains with enough room and packs pods
only there. Only this module mutates; every decision it records ends up in an immutable
``Plan``.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import add, sub

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PodAssignment, RunningJob
from federation.domain.resources import GPU, Resources
from federation.domain.topology import Domain
from federation.placement.packing import Vector, pack_masked, pack_vectors, resource_keys, vector

# A row entry: free amount x UIDS + domain id, one int so that bisect and insort compare
# machine integers instead of (amount, id) tuples (a tenth of the greedy pass at fleet scale).
Key = int
UIDS = 1 << 24


@dataclass
class DomainState:
    """A domain with its live aggregate free vector over usable nodes."""

    uid: int
    cluster: ClusterSnapshot
    domain: Domain
    nodes: tuple[str, ...]
    free: list[int]
    gpu_hist: dict[int, int] = field(default_factory=dict)
    index: dict[int, int] = field(default_factory=dict)  # index id -> sort key (see RoundState)
    alloc_gpu: int = 0

    @property
    def tier(self) -> int:
        return self.domain.tier


class RoundState:
    """Free capacity per node and per domain, queue usage, and what the round decided."""

    def __init__(self, snapshot: FederationSnapshot, extra: Iterable[Resources] = ()) -> None:
        self.snapshot = snapshot
        requests = [t.resources for p in snapshot.pending for t in p.job.tasks]
        requests += [t.resources for r in snapshot.running for t in r.job.tasks]
        self.keys: tuple[str, ...] = resource_keys([*requests, *extra]) or (GPU,)
        self.gpu_index = self.keys.index(GPU) if GPU in self.keys else 0
        self.clusters = {c.name: c for c in snapshot.clusters}
        self.node_free: dict[str, dict[str, Vector]] = {}
        self.nodes: dict[str, dict[str, Node]] = {}
        self.domains: list[DomainState] = []
        self.node_domains: dict[tuple[str, str], tuple[int, ...]] = {}
        top = max((n.allocatable.get(GPU) for c in snapshot.clusters for n in c.nodes), default=0)
        # Index 0 sorts domains by free GPUs; index s >= 2 by "s-slots" = sum over nodes of
        # free_gpus // s, so a gang of k pods of >= s GPUs bisects straight to domains with
        # k such slots instead of trying every domain with enough GPUs in total.
        self.slot_sizes = tuple(1 << i for i in range(1, top.bit_length()) if (1 << i) <= top)
        self.rows: dict[tuple[int, int], list[Key]] = {}
        self._demand: dict[object, tuple[list[Vector], Vector]] = {}
        self.cluster_domains: dict[str, list[int]] = {}
        self.uid_of: dict[tuple[str, str], int] = {}
        for cluster in snapshot.clusters:
            self._add_cluster(cluster)
        self.tiers = sorted({t for _, t in self.rows})
        # Copy-on-write journal of the clusters touched since ``PlanningRound.mark`` (None: off).
        self.journal: dict[str, tuple[dict[str, Vector], list[tuple[int, list[int], dict[int, int], dict[int, int]]]]] \
            | None = None
        self.start_node_free = {c: dict(v) for c, v in self.node_free.items()}
        self.start_domain_free = [tuple(d.free) for d in self.domains]

    # -- construction -------------------------------------------------------------------
    def _add_cluster(self, cluster: ClusterSnapshot) -> None:
        usable = {n.name: n for n in cluster.nodes if n.usable} if cluster.healthy else {}
        self.nodes[cluster.name] = usable
        keys = self.keys
        gi = self.gpu_index
        vectors = {name: vector(n.free, keys) for name, n in usable.items()}
        self.node_free[cluster.name] = vectors
        alloc = {name: n.allocatable.get(GPU) for name, n in usable.items()}
        chains: dict[str, list[int]] = {}
        ids: list[int] = []
        for domain in cluster.tree.by_tier:
            members = tuple(sorted(n for n in domain.nodes if n in usable))
            if not members:
                continue
            uid = len(self.domains)
            if uid >= UIDS:
                raise ValueError(f"more than {UIDS} topology domains in one round")
            vecs = [vectors[name] for name in members]
            free = [sum(col) for col in zip(*vecs, strict=True)]
            hist: dict[int, int] = {}
            for vec in vecs:
                g = vec[gi]
                hist[g] = hist.get(g, 0) + 1
            for name in members:
                chains.setdefault(name, []).append(uid)
            dom = DomainState(uid, cluster, domain, members, free, hist, alloc_gpu=sum(alloc[n] for n in members))
            self._index_values(dom)
            for ix, value in dom.index.items():
                insort(self.rows.setdefault((ix, domain.tier), []), value * UIDS + uid)
            self.domains.append(dom)
            self.uid_of[(cluster.name, domain.name)] = uid
            ids.append(uid)
        self.cluster_domains[cluster.name] = ids
        self.node_domains.update(((cluster.name, name), tuple(uids)) for name, uids in chains.items())

    def ancestors(self, uid: int) -> list[int]:
        """``uid`` and the ids of every domain above it in its cluster's tree."""
        out = [uid]
        dom = self.domains[uid]
        parent = dom.domain.parent
        tree = dom.cluster.tree.domains
        while parent is not None:
            up = self.uid_of.get((dom.cluster.name, parent))
            if up is not None:
                out.append(up)
            parent = tree[parent].parent if parent in tree else None
        return out

    def _index_values(self, dom: DomainState) -> None:
        dom.index[0] = dom.free[self.gpu_index]
        for size in self.slot_sizes:
            dom.index[size] = sum((f // size) * c for f, c in dom.gpu_hist.items() if f >= size)

    # -- queries ------------------------------------------------------------------------
    def demand(self, job: Job) -> tuple[list[Vector], Vector]:
        """Per-pod demand vectors of the pods that must start together (``job.gang_pods()``
        order: every replica unless the gang is elastic) and their sum."""
        shape = tuple((n, t.resources) for t, n in zip(job.tasks, job.gang_counts, strict=True))
        found = self._demand.get(shape)
        if found is None:
            pods = [vector(res, self.keys) for replicas, res in shape for _ in range(replicas)]
            tot = tuple(sum(col) for col in zip(*pods, strict=True)) if pods else tuple(0 for _ in self.keys)
            found = self._demand[shape] = (pods, tot)
        return found

    def probe(self, pods: Sequence[Vector], need: Vector) -> tuple[int, int]:
        """(index id, threshold) that best narrows the domains that could hold ``pods``."""
        g = max((p[self.gpu_index] for p in pods), default=0)
        sizes = [s for s in self.slot_sizes if s <= g]
        if not sizes:
            return 0, need[self.gpu_index]
        size = sizes[-1]
        return size, sum(1 for p in pods if p[self.gpu_index] >= size)

    def candidates(self, tier: int, probe: tuple[int, int], clusters: Sequence[str] | None) -> Iterable[DomainState]:
        """Domains of ``tier`` passing the probe, tightest (least room) first."""
        ix, threshold = probe
        if clusters is not None and len(clusters) * 4 < len(self.cluster_domains):
            picked = [
                self.domains[u]
                for c in clusters
                for u in self.cluster_domains.get(c, ())
                if self.domains[u].tier == tier and self.domains[u].index[ix] >= threshold
            ]
            picked.sort(key=lambda d: (d.index[ix], d.uid))
            yield from picked
            return
        row = self.rows.get((ix, tier), [])
        domains = self.domains
        for pos in range(bisect_left(row, threshold * UIDS), len(row)):
            yield domains[row[pos] % UIDS]

    def slots_ok(self, dom: DomainState, pods: Sequence[Vector]) -> bool:
        """Cheap necessary condition: enough nodes with room for the largest GPU pods."""
        return self.has_slots(dom, *self.slot_need(pods))

    def slot_need(self, pods: Sequence[Vector]) -> tuple[int, int]:
        """(GPUs of the largest pods, how many pods that large): what ``has_slots`` checks."""
        g = max((p[self.gpu_index] for p in pods), default=0)
        return g, sum(1 for p in pods if p[self.gpu_index] >= g)

    def has_slots(self, dom: DomainState, g: int, wanted: int) -> bool:
        """``slots_ok`` for a ``slot_need`` computed once per search rather than per domain
        (a 32-pod gang compared with up to a few hundred candidate domains)."""
        if g <= 0:
            return True
        have = 0
        for free, count in dom.gpu_hist.items():
            if free >= g:
                have += (free // g) * count
                if have >= wanted:
                    return True
        return False

    def pack(
        self, dom: DomainState, pods: Sequence[Vector], allowed: dict[str, Node] | None = None, start: bool = False
    ) -> list[str] | None:
        """Pack pod vectors onto the domain's nodes (restricted to ``allowed`` when given).

        ``start`` packs against the free capacity at the start of the round instead of now.
        """
        free = (self.start_node_free if start else self.node_free)[dom.cluster.name]
        buckets: dict[Vector, list[str]] = {}
        for name in dom.nodes:
            if allowed is not None and name not in allowed:
                continue
            buckets.setdefault(free[name], []).append(name)
        return pack_vectors(pods, buckets)

    def pack_masked(
        self, dom: DomainState, pods: Sequence[Vector], classes: Sequence[int], masks: dict[str, int],
        exclusive: int, start: bool = False,
    ) -> list[str] | None:
        """``pack`` for gangs whose tasks may use different nodes (``masks``: node -> task bits)."""
        free = (self.start_node_free if start else self.node_free)[dom.cluster.name]
        buckets: dict[tuple[Vector, int], list[str]] = {}
        for name in dom.nodes:
            mask = masks.get(name)
            if mask:
                buckets.setdefault((free[name], mask), []).append(name)
        return pack_masked(pods, classes, buckets, exclusive)

    # -- updates ------------------------------------------------------------------------
    def _apply(self, cluster: str, changes: Sequence[tuple[str, Vector]], sign: int) -> None:
        """Shift node free vectors by ``sign x delta`` and re-index each touched domain once.

        The gang's nodes nearly always share their domains (one leaf and its ancestors), so
        deltas are summed per distinct domain chain first and each domain is touched once
        per call, not once per node: the commit step of a 32-pod gang was a fifth of the
        greedy pass at 2,000 gangs x 100 clusters.
        """
        if self.journal is not None and cluster not in self.journal:
            self.journal[cluster] = (dict(self.node_free[cluster]), [
                (uid, list(d.free), dict(d.gpu_hist), dict(d.index))
                for uid in self.cluster_domains.get(cluster, ()) for d in (self.domains[uid],)])
        gi = self.gpu_index
        sizes = self.slot_sizes
        frees = self.node_free[cluster]
        chains = self.node_domains
        width = 1 + len(sizes)
        # chain of domain ids -> (summed delta, GPU histogram delta, index deltas)
        groups: dict[tuple[int, ...], tuple[list[int], dict[int, int], list[int]]] = {}
        for node, delta in changes:
            old = frees[node]
            new = tuple(map(add, old, delta)) if sign > 0 else tuple(map(sub, old, delta))
            frees[node] = new
            uids = chains.get((cluster, node))
            if not uids:
                continue
            acc = groups.get(uids)
            if acc is None:
                acc = groups[uids] = ([0] * len(delta), {}, [0] * width)
            vec, hist, shift = acc
            for i, d in enumerate(delta):
                vec[i] += d
            og, ng = old[gi], new[gi]
            if og != ng:
                hist[og] = hist.get(og, 0) - 1
                hist[ng] = hist.get(ng, 0) + 1
                shift[0] += ng - og
                for i, s in enumerate(sizes, 1):
                    shift[i] += ng // s - og // s
        moved: dict[int, list[int]] = {}  # uid -> index deltas, [free GPUs, slots per size...]
        domains = self.domains
        for uids, (vec, hist_delta, shift) in groups.items():
            for uid in uids:
                dom = domains[uid]
                free = dom.free
                for i, d in enumerate(vec):
                    free[i] += sign * d
                hist = dom.gpu_hist
                for g, c in hist_delta.items():
                    if c:
                        left = hist.get(g, 0) + c
                        if left:
                            hist[g] = left
                        else:
                            del hist[g]
                sums = moved.get(uid)
                if sums is None:
                    moved[uid] = list(shift)
                else:
                    for i, d in enumerate(shift):
                        sums[i] += d
        for uid, sums in moved.items():
            dom = domains[uid]
            index = dom.index
            for ix, d in zip((0, *sizes), sums, strict=True):
                if d:
                    value = index[ix]
                    row = self.rows[(ix, dom.tier)]
                    del row[bisect_left(row, value * UIDS + uid)]
                    insort(row, (value + d) * UIDS + uid)
                    index[ix] = value + d

    def roll_back(self) -> None:
        """Return every cluster touched since the journal started to its saved state."""
        for cluster, (frees, saved) in (self.journal or {}).items():
            self.node_free[cluster] = frees
            for uid, free, hist, index in saved:
                dom = self.domains[uid]
                for ix, value in dom.index.items():
                    if value != index[ix]:
                        row = self.rows[(ix, dom.tier)]
                        del row[bisect_left(row, value * UIDS + uid)]
                        insort(row, index[ix] * UIDS + uid)
                dom.free, dom.gpu_hist, dom.index = free, hist, index
        self.journal = None

    def take(self, cluster: str, pods: Sequence[tuple[str, Vector]]) -> None:
        """Consume ``(node, demand)`` pairs (a placement, or an eviction undone).

        Pods on nodes the round does not track are skipped, exactly as ``give`` skips them:
        a running gang may keep a pod on a NotReady, cordoned or vanished node until its
        agent replaces it, and un-evicting that gang must not touch a node nobody can use.
        """
        self._apply(cluster, self._known(cluster, pods), -1)

    def give(self, cluster: str, pods: Sequence[tuple[str, Vector]]) -> None:
        """Return ``(node, demand)`` pairs (a preemption or an undone placement)."""
        self._apply(cluster, self._known(cluster, pods), +1)

    def _known(self, cluster: str, pods: Sequence[tuple[str, Vector]]) -> list[tuple[str, Vector]]:
        known = self.node_free.get(cluster, {})
        # No merge needed: ``_apply`` shifts a node named twice twice, which sums the same.
        return [(n, d) for n, d in pods if n in known]

    @staticmethod
    def _merge(pods: Sequence[tuple[str, Vector]]) -> list[tuple[str, Vector]]:
        acc: dict[str, list[int]] = {}
        for node, need in pods:
            cur = acc.setdefault(node, [0] * len(need))
            for i, v in enumerate(need):
                cur[i] += v
        return [(n, tuple(v)) for n, v in acc.items()]

    def running_pods(self, running: RunningJob) -> list[tuple[str, Vector]]:
        """(node, demand) of a running job's pods, as recorded in its placement."""
        req = {(t, i): vector(r, self.keys) for t, i, r in running.job.pods()}
        return [(p.node, req[(p.task, p.index)]) for p in running.placement.pods if (p.task, p.index) in req]

    def assignments(self, job: Job, nodes: Sequence[str]) -> tuple[PodAssignment, ...]:
        """Assignments of the gang's pods (``job.gang_pods()`` order) to ``nodes``."""
        return tuple(PodAssignment(t, i, n) for (t, i, _), n in zip(job.gang_pods(), nodes, strict=True))
