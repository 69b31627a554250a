"""Which clusters, nodes and network domains a job may use at all.

These are the hard filters every planner (ours and the baselines) applies before any
scoring, kept in one place so that ``validate()`` and all policies agree on them:

* clusters: healthy, matching the propagation ``clusterAffinity`` — or the ordered
  ``clusterAffinities`` groups, a later group used only when no cluster of an earlier group
  can hold the job (Karmada's fallback) — and whose taints the ``clusterTolerations`` cover;
* nodes: ready, not cordoned, and per task: its ``nodeSelector`` and required node affinity
  met and every NoSchedule/NoExecute taint tolerated (``domain/scheduling.py``); tasks with
  different constraints pack with a per-node task mask (``packing.pack_masked``);
* domains: HyperNodes of tier <= the job's hard ``networkTopology`` limit, lowest tier first
  (soft mode and jobs without a topology may use any domain, the cluster root included, but
  still prefer lower tiers because every tier crossed slows collective communication).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node, untolerated
from federation.domain.plans import FederationSnapshot
from federation.domain.propagation import ClusterAffinity
from federation.domain.resources import Resources, total
from federation.domain.scheduling import NodeConstraints
from federation.domain.topology import Domain
from federation.placement.packing import pack_masked, resource_keys, vector

AffinityGroups = tuple[tuple[ClusterSnapshot, ...], ...]


def cluster_block(job: Job, cluster: ClusterSnapshot, affinity: ClusterAffinity | None = None) -> str | None:
    """Why ``cluster`` is closed to ``job`` under ``affinity`` (a BLOCKED_BY name), or None."""
    if not cluster.healthy:
        return "unschedulable"
    if affinity is not None and not affinity.matches(cluster.name, cluster.labels):
        return "affinity"
    weights = job.propagation.weighted_clusters() if job.propagation is not None else {}
    if weights and cluster.name not in weights:  # Karmada staticWeightList: unlisted clusters get nothing
        return "affinity"
    tolerations = job.propagation.placement_tolerations if job.propagation is not None else ()
    if untolerated(cluster.taints, tolerations):
        return "taints"
    return None


def affinity_terms(job: Job) -> tuple[ClusterAffinity | None, ...]:
    return job.propagation.affinity_groups() if job.propagation is not None else (None,)


def allowed_clusters(job: Job, snapshot: FederationSnapshot) -> AffinityGroups:
    """Clusters the job may use, as affinity groups in fallback order.

    Without a propagation policy (or with a single ``clusterAffinity``) there is exactly one
    group. Groups may be empty; callers try them in order and use a later group only if no
    cluster of an earlier group can hold the job.
    """
    return tuple(
        tuple(c for c in snapshot.clusters if cluster_block(job, c, term) is None) for term in affinity_terms(job)
    )


T = TypeVar("T")


class _PerCluster:
    """A cache keyed by cluster IDENTITY (plus a hashable extra key).

    ``functools.lru_cache`` would key on ``ClusterSnapshot.__hash__``, which is cheap but
    collides for snapshots of the same cluster at the same ``taken_at``, and then falls
    back to the dataclass ``__eq__`` — a deep comparison of every node. Snapshots are
    immutable, so identity is the right key; the entry keeps the object alive so its id
    cannot be reused while cached.
    """

    def __init__(self, limit: int = 8192) -> None:
        self._entries: dict[tuple[int, object], tuple[ClusterSnapshot, object]] = {}
        self._limit = limit

    def get(self, cluster: ClusterSnapshot, key: object, compute: Callable[[], T]) -> T:
        slot = (id(cluster), key)
        entry = self._entries.get(slot)
        if entry is not None and entry[0] is cluster:
            return entry[1]  # type: ignore[return-value]  # the cache holds every key's own T
        value = compute()
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[slot] = (cluster, value)
        return value


_USABLE = _PerCluster()
_MASKS = _PerCluster()
_PROFILE = _PerCluster()
_EMPTY = _PerCluster()

Constraints = tuple[NodeConstraints, ...]


def _usable_for(cluster: ClusterSnapshot, constraints: NodeConstraints) -> tuple[Node, ...]:
    return _USABLE.get(cluster, constraints, lambda: tuple(
        n for n in cluster.nodes if n.usable and constraints.allows(n)))


def _masks(cluster: ClusterSnapshot, constraints: Constraints) -> dict[str, int]:
    """Usable node name -> bitmask of the task indices whose constraints it meets (never 0)."""
    def compute() -> dict[str, int]:
        out: dict[str, int] = {}
        for i, c in enumerate(constraints):
            for n in _usable_for(cluster, c):
                out[n.name] = out.get(n.name, 0) | (1 << i)
        return {n.name: out[n.name] for n in cluster.nodes if n.name in out}  # node order
    return _MASKS.get(cluster, constraints, compute)


def needs_masks(job: Job) -> bool:
    """Whether pods of ``job`` differ in the nodes they may use (or take one node each)."""
    return job.uniform_constraints is None or any(c.one_per_node for c in job.node_constraints)


def exclusive_mask(job: Job) -> int:
    """Task indices whose pods take one node each (required pod anti-affinity on the hostname)."""
    return sum(1 << i for i, c in enumerate(job.node_constraints) if c.one_per_node)


def pod_classes(job: Job) -> list[int]:
    """The task index of every gang pod, in ``job.gang_pods()`` order."""
    return [i for i, n in enumerate(job.gang_counts) for _ in range(n)]


def _usable_nodes(cluster: ClusterSnapshot, constraints: Constraints) -> tuple[Node, ...]:
    if len(set(constraints)) == 1:
        return _usable_for(cluster, constraints[0])
    masks = _masks(cluster, constraints)
    return tuple(n for n in cluster.nodes if n.name in masks)


def usable_nodes(cluster: ClusterSnapshot, job: Job) -> tuple[Node, ...]:
    """Nodes of ``cluster`` some pod of the job may land on (ready, uncordoned, its task's
    nodeSelector, required node affinity and tolerations met); per pod see ``pod_allows``."""
    return _usable_nodes(cluster, job.node_constraints)


def node_masks(cluster: ClusterSnapshot, job: Job) -> dict[str, int]:
    """Usable node name -> bitmask of the job's task indices that may use it."""
    return _masks(cluster, job.node_constraints)


def nodes_allowed(job: Job, cluster: ClusterSnapshot, nodes: list[str]) -> bool:
    """Whether gang pod i of ``job`` (``job.gang_pods()`` order) may sit on ``nodes[i]``, one-per-node included."""
    if not needs_masks(job):
        c = job.node_constraints[0]
        allowed = {n.name for n in _usable_for(cluster, c)}
        return all(n in allowed for n in nodes)
    masks = _masks(cluster, job.node_constraints)
    exclusive = exclusive_mask(job)
    taken: set[tuple[int, str]] = set()
    for cls, node in zip(pod_classes(job), nodes, strict=False):
        if not masks.get(node, 0) & (1 << cls):
            return False
        if exclusive & (1 << cls):
            if (cls, node) in taken:
                return False
            taken.add((cls, node))
    return True


def pod_allows(job: Job, task: str, node: Node) -> bool:
    """Whether a pod of ``task`` may be bound to ``node`` (health aside)."""
    for t, c in zip(job.tasks, job.node_constraints, strict=True):
        if t.name == task:
            return c.allows(node)
    return False


def tier_limit(job: Job, cluster: ClusterSnapshot) -> int | None:
    """The hard tier limit for ``job`` in ``cluster``'s own tree, or None for no hard limit.

    Soft mode never blocks, so it has no hard limit. ``highestTierName`` is resolved per
    cluster; a tree without a HyperNode of that tierName applies no limit (Volcano).
    """
    topo = job.network_topology
    if topo is None or not topo.hard:
        return None
    if topo.highest_tier_allowed is not None:
        return topo.highest_tier_allowed
    if topo.highest_tier_name is not None:
        return cluster.tree.tier_for_name(topo.highest_tier_name)
    return None


def candidate_domains(job: Job, cluster: ClusterSnapshot) -> tuple[Domain, ...]:
    """Non-empty domains within the job's hard tier limit, lowest tier (then smallest) first."""
    return tuple(d for d in cluster.tree.domains_up_to(tier_limit(job, cluster)) if d.nodes)


Shape = tuple[tuple[tuple[int, Resources], ...], Constraints]


def shape_key(job: Job) -> Shape:
    """What determines where a gang can fit: its gang pods' requests and node constraints."""
    return (tuple((n, t.resources) for t, n in zip(job.tasks, job.gang_counts, strict=True)), job.node_constraints)


class ShapeIds:
    """One round's small-int id per distinct ``shape_key``, memoised per job name.

    Why: a shape key is a tuple of per-task ``Resources`` and node constraints; building it
    and hashing / comparing it (Python-level ``__hash__`` and ``__eq__`` of each job's own,
    equal ``Resources``) cost ~2-3 us, and at 10,000 pending jobs the ledger, the lowest
    tiers and the reasons each asked it per job. Jobs are named uniquely in a snapshot and
    immutable, so one id per name is exact for the round."""

    def __init__(self) -> None:
        self._ids: dict[Shape, int] = {}
        self._of: dict[str, int] = {}

    def __call__(self, job: Job) -> int:
        found = self._of.get(job.name)
        if found is None:
            shape = shape_key(job)
            found = self._ids.get(shape)
            if found is None:
                found = self._ids[shape] = len(self._ids)
            self._of[job.name] = found
        return found


Profile = tuple[tuple[int, tuple[tuple[Resources, int, int], ...]], ...]
_PROFILE_IDS: dict[Profile, int] = {}


def _profile_id(cluster: ClusterSnapshot, constraints: Constraints) -> int:
    return _PROFILE.get(cluster, constraints, lambda: _compute_profile_id(cluster, constraints))


def _compute_profile_id(cluster: ClusterSnapshot, constraints: Constraints) -> int:
    """An id for the cluster's EMPTY shape: per distinct domain, its tier and node allocatables
    (with the mask of the tasks each node admits).

    Identical clusters (the common case in a fleet) share an id, so the lowest empty tier of
    a gang shape is computed once per fleet rather than once per cluster.
    """
    masks = _masks(cluster, constraints)
    keyed: dict[tuple[tuple[tuple[str, int], ...], int], Resources] = {}
    alloc: dict[str, tuple[tuple[tuple[str, int], ...], int]] = {}
    for n in cluster.nodes:
        if n.name not in masks:
            continue
        key = (tuple(n.allocatable.amounts.items()), masks[n.name])
        keyed.setdefault(key, n.allocatable)
        alloc[n.name] = key
    seen: dict[tuple[tuple[Resources, int, int], ...], int] = {}
    for domain in cluster.tree.by_tier:
        counts: dict[tuple[tuple[tuple[str, int], ...], int], int] = {}
        for name in domain.nodes:
            found = alloc.get(name)
            if found is not None:
                counts[found] = counts.get(found, 0) + 1
        if counts:
            items = tuple((keyed[k], k[1], c) for k, c in sorted(counts.items()))
            seen[items] = min(seen.get(items, domain.tier), domain.tier)
    profile = tuple(sorted((tier, items) for items, tier in seen.items()))
    if profile not in _PROFILE_IDS:
        if len(_PROFILE_IDS) > 100_000:
            _PROFILE_IDS.clear()
        _PROFILE_IDS[profile] = len(_PROFILE_IDS)
        _PROFILES[_PROFILE_IDS[profile]] = profile
    return _PROFILE_IDS[profile]


_PROFILES: dict[int, Profile] = {}


@lru_cache(maxsize=65536)
def _lowest_empty_tier(profile_id: int, shape: Shape) -> int | None:
    tasks, constraints = shape
    requests = [res for replicas, res in tasks for _ in range(replicas)]
    classes = [i for i, (replicas, _) in enumerate(tasks) for _ in range(replicas)]
    exclusive = sum(1 << i for i, c in enumerate(constraints) if c.one_per_node)
    keys = resource_keys(requests)
    demands = [vector(r, keys) for r in requests]
    for tier, items in _PROFILES[profile_id]:
        buckets: dict[tuple[tuple[int, ...], int], list[str]] = {}
        for n, (res, mask, count) in enumerate(items):
            buckets.setdefault((vector(res, keys), mask), []).extend(f"{n}.{k}" for k in range(count))
        if pack_masked(demands, classes, buckets, exclusive) is not None:
            return tier
    return None


def lowest_feasible_tiers(job: Job, clusters: Iterable[ClusterSnapshot]) -> list[int]:
    """``lowest_feasible_tier`` of every cluster that could ever hold the gang (None left
    out), with the shape hashed once and identical clusters answered once."""
    shape = shape_key(job)
    known: dict[int, int | None] = {}
    out = []
    for cluster in clusters:
        pid = _profile_id(cluster, shape[1])
        if pid not in known:
            known[pid] = _lowest_empty_tier(pid, shape)
        tier = known[pid]
        if tier is not None:
            out.append(tier)
    return out


def lowest_feasible_tier(job: Job, cluster: ClusterSnapshot) -> int | None:
    """The lowest tier at which ``cluster``, if EMPTY, could hold the whole gang (None: never).

    Ignores the job's tier limit (the caller compares); honours node health and taints.
    Used for unschedulable verdicts and the ``lowestTierFraction`` metric.
    """
    shape = shape_key(job)
    return _lowest_empty_tier(_profile_id(cluster, shape[1]), shape)  # shape[1]: node constraints


def can_ever_hold(job: Job, cluster: ClusterSnapshot) -> bool:
    """True when an empty ``cluster`` could hold the gang within the job's hard tier limit."""
    tier = lowest_feasible_tier(job, cluster)
    if tier is None:
        return False
    limit = tier_limit(job, cluster)
    return limit is None or tier <= limit


def ever_holding(job: Job, clusters: Iterable[ClusterSnapshot]) -> list[ClusterSnapshot]:
    """The clusters that, empty, could hold the gang within its hard tier limit."""
    shape = shape_key(job)
    out = []
    known: dict[int, int | None] = {}  # per empty profile: identical clusters answer once
    for cluster in clusters:
        pid = _profile_id(cluster, shape[1])
        if pid not in known:
            known[pid] = _lowest_empty_tier(pid, shape)
        tier = known[pid]
        limit = tier_limit(job, cluster)
        if tier is not None and (limit is None or tier <= limit):
            out.append(cluster)
    return out


def empty_capacity(cluster: ClusterSnapshot, job: Job) -> Resources:
    """Allocatable of the nodes the job may use (what an empty cluster would offer it)."""
    constraints = job.node_constraints
    return _EMPTY.get(cluster, constraints, lambda: total(n.allocatable for n in _usable_nodes(cluster, constraints)))


def unmatched_constraints(job: Job, clusters: Iterable[ClusterSnapshot]) -> str | None:
    """A reason naming the first task constraint no usable node of ``clusters`` meets, or None.

    E.g. "nodeSelector nvidia.com/gpu.product=H100 (task worker) matches no node in clusters a, b".
    """
    clusters = list(clusters)
    for task, c in zip(job.tasks, job.node_constraints, strict=True):
        if not any(_usable_for(cl, c) for cl in clusters):
            names = ", ".join(cl.name for cl in clusters) or "-"
            return f"{c.describe()} (task {task.name}) matches no node in clusters {names}"
    return None
