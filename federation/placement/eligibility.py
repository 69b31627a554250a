"""Which clusters, nodes and network domains a job may use at all.

These are the hard filters every planner (ours and the baselines) applies before any
scoring, kept in one place so that ``validate()`` and all policies agree on them:

* clusters: healthy, matching the propagation ``clusterAffinity`` — or the ordered
  ``clusterAffinities`` groups, a later group used only when no cluster of an earlier group
  can hold the job (Karmada's fallback) — and whose taints the ``clusterTolerations`` cover;
* nodes: ready, not cordoned, every NoSchedule/NoExecute taint tolerated by the job's pods;
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
from federation.domain.nodes import Node, Toleration, untolerated
from federation.domain.plans import FederationSnapshot
from federation.domain.propagation import ClusterAffinity
from federation.domain.resources import Resources, total
from federation.domain.topology import Domain
from federation.placement.packing import pack_vectors, resource_keys, vector

AffinityGroups = tuple[tuple[ClusterSnapshot, ...], ...]


def cluster_block(job: Job, cluster: ClusterSnapshot, affinity: ClusterAffinity | None = None) -> str | None:
    """Why ``cluster`` is closed to ``job`` under ``affinity`` (a BLOCKED_BY name), or None."""
    if not cluster.healthy:
        return "unschedulable"
    if affinity is not None and not affinity.matches(cluster.name, cluster.labels):
        return "affinity"
    tolerations = job.propagation.cluster_tolerations if job.propagation is not None else ()
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


def _taints_key(tolerations: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    return tolerations


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
_PROFILE = _PerCluster()
_EMPTY = _PerCluster()


def _usable_nodes(cluster: ClusterSnapshot, tolerations: tuple[Toleration, ...]) -> tuple[Node, ...]:
    return _USABLE.get(cluster, tolerations, lambda: tuple(
        n for n in cluster.nodes if n.usable and not untolerated(n.taints, tolerations)))


def usable_nodes(cluster: ClusterSnapshot, job: Job) -> tuple[Node, ...]:
    """Nodes of ``cluster`` the job's pods may land on (ready, uncordoned, taints tolerated)."""
    return _usable_nodes(cluster, _taints_key(job.tolerations))


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


Shape = tuple[tuple[tuple[int, Resources], ...], tuple[Toleration, ...]]


def shape_key(job: Job) -> Shape:
    """What determines where a gang can fit: its pods' requests and tolerations."""
    return (tuple((t.replicas, t.resources) for t in job.tasks), job.tolerations)


Profile = tuple[tuple[int, tuple[tuple[Resources, int], ...]], ...]
_PROFILE_IDS: dict[Profile, int] = {}


def _profile_id(cluster: ClusterSnapshot, tolerations: tuple[Toleration, ...]) -> int:
    return _PROFILE.get(cluster, tolerations, lambda: _compute_profile_id(cluster, tolerations))


def _compute_profile_id(cluster: ClusterSnapshot, tolerations: tuple[Toleration, ...]) -> int:
    """An id for the cluster's EMPTY shape: per distinct domain, its tier and node allocatables.

    Identical clusters (the common case in a fleet) share an id, so the lowest empty tier of
    a gang shape is computed once per fleet rather than once per cluster.
    """
    nodes = _usable_nodes(cluster, tolerations)
    keyed: dict[tuple[tuple[str, int], ...], Resources] = {}
    alloc: dict[str, tuple[tuple[str, int], ...]] = {}
    for n in nodes:
        key = tuple(n.allocatable.amounts.items())
        keyed.setdefault(key, n.allocatable)
        alloc[n.name] = key
    seen: dict[tuple[tuple[Resources, int], ...], int] = {}
    for domain in cluster.tree.by_tier:
        counts: dict[tuple[tuple[str, int], ...], int] = {}
        for name in domain.nodes:
            found = alloc.get(name)
            if found is not None:
                counts[found] = counts.get(found, 0) + 1
        if counts:
            items = tuple((keyed[k], c) for k, c in sorted(counts.items()))
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
    tasks, _ = shape
    requests = [res for replicas, res in tasks for _ in range(replicas)]
    keys = resource_keys(requests)
    demands = [vector(r, keys) for r in requests]
    for tier, items in _PROFILES[profile_id]:
        buckets: dict[tuple[int, ...], list[str]] = {}
        for res, count in items:
            buckets.setdefault(vector(res, keys), []).extend(["."] * count)
        if pack_vectors(demands, buckets) is not None:
            return tier
    return None


def lowest_feasible_tier(job: Job, cluster: ClusterSnapshot) -> int | None:
    """The lowest tier at which ``cluster``, if EMPTY, could hold the whole gang (None: never).

    Ignores the job's tier limit (the caller compares); honours node health and taints.
    Used for unschedulable verdicts and the ``lowestTierFraction`` metric.
    """
    shape = shape_key(job)
    return _lowest_empty_tier(_profile_id(cluster, shape[1]), shape)


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
    for cluster in clusters:
        tier = _lowest_empty_tier(_profile_id(cluster, shape[1]), shape)
        limit = tier_limit(job, cluster)
        if tier is not None and (limit is None or tier <= limit):
            out.append(cluster)
    return out


def empty_capacity(cluster: ClusterSnapshot, job: Job) -> Resources:
    """Allocatable of the nodes the job may use (what an empty cluster would offer it)."""
    return _empty_capacity(cluster, job.tolerations)


def _empty_capacity(cluster: ClusterSnapshot, tolerations: tuple[Toleration, ...]) -> Resources:
    return _EMPTY.get(cluster, tolerations, lambda: total(n.allocatable for n in _usable_nodes(cluster, tolerations)))
