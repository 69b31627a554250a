"""Partitions of a gang (Volcano task ``partitionPolicy``) inside the HyperNode it was given.

Volcano places a job with partitions in two levels (volcano-sh/volcano
pkg/scheduler/actions/allocate ``allocateForJob``): the job gets a HyperNode within its
own ``networkTopology``; inside it each partition, a sub-job of ``partitionSize`` pods,
gets a HyperNode of tier <= the partition's ``highestTierAllowed`` (hard mode), lowest
tier first, and is allocated only whole (``allocateResourcesForTasks`` keeps a sub-job's
pods only once it is ready). Soft mode only prefers the lowest tier (``SubJobInfo.
ConvertToHardTopology`` lifts the limit to the top). Here the same two levels: the planner
chooses the gang's domain as for any job, and ``pack_partitioned`` then packs each
partition into the lowest-tier, fullest descendant HyperNode of that domain where it fits
(best fit decreasing, ``packing.pack_masked``), before the job's other pods go anywhere in
the domain. Greedy partition by partition, it may miss a packing a joint search would
find; it never returns one that breaks a partition. ``partition_problems`` is the check
``validate()`` and the tests apply to any placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import sub

from federation.domain.jobs import Job
from federation.domain.partitions import PodKey, homes, partition_cap, partition_groups
from federation.domain.plans import PodAssignment
from federation.domain.topology import Domain, HyperNodeTree
from federation.placement.packing import Vector, pack_masked


def partitioned(job: Job) -> bool:
    return any(t.partition_policy is not None for t in job.tasks)


def strict_partitions(job: Job) -> bool:
    """Whether some partition must stay within a tier (hard mode): only then can the
    partitions, rather than the pods' room, be why a gang does not fit a domain."""
    return any(t.partition_policy is not None and t.partition_policy.network_topology is not None
               and t.partition_policy.network_topology.hard for t in job.tasks)


def pack_partitioned(
    job: Job, pods: Sequence[PodKey], demands: Sequence[Vector], classes: Sequence[int], tree: HyperNodeTree,
    domain: Domain, free: Mapping[str, Vector], masks: Mapping[str, int], exclusive: int,
) -> list[str] | None:
    """A node for each of ``pods`` (demand vectors and task indices aligned with it) inside
    ``domain``, every partition whole inside one HyperNode it may use, or None.

    ``free`` and ``masks`` cover the nodes the job may use (``masks``: task bits allowed,
    ``exclusive``: tasks taking one node per pod, as in ``pack_masked``); not mutated.
    Partitions go first, each to the lowest-tier HyperNode where it packs, the fullest
    among equals; then the job's other pods anywhere in ``domain``.
    """
    room = {n: free[n] for n in masks if n in domain.nodes and n in free}
    allowed = {n: masks[n] for n in room}
    at = {key: k for k, key in enumerate(pods)}
    out = [""] * len(pods)
    policies = {t.name: t.partition_policy for t in job.tasks}
    groups = partition_groups(job, pods)

    def place(members: list[int], within: frozenset[str] | None) -> bool:
        buckets: dict[tuple[Vector, int], list[str]] = {}
        for name, vec in room.items():
            if within is None or name in within:
                buckets.setdefault((vec, allowed[name]), []).append(name)
        found = pack_masked([demands[k] for k in members], [classes[k] for k in members], buckets, exclusive)
        if found is None:
            return False
        for k, name in zip(members, found, strict=True):
            out[k] = name
            room[name] = tuple(map(sub, room[name], demands[k]))
            allowed[name] &= ~((1 << classes[k]) & exclusive)
        return True

    candidates: dict[str, list[Domain]] = {}  # per task: its partitions share their possible homes
    for (task, _), keys in groups.items():
        if task not in candidates:
            policy = policies[task]
            assert policy is not None
            candidates[task] = homes(tree, domain, partition_cap(policy, tree))
        members = [at[k] for k in keys]
        ranked = sorted(candidates[task], key=lambda d: (d.tier, _free_first(d, room), d.name))
        if not any(place(members, d.nodes) for d in ranked):
            return None
    rest = [k for k, (task, _) in enumerate(pods) if policies.get(task) is None]
    if rest and not place(rest, None):
        return None
    return out


def _free_first(domain: Domain, room: Mapping[str, Vector]) -> int:
    """The domain's free amount of the scarcest resource: fullest first keeps empty
    HyperNodes whole for larger partitions."""
    return sum(room[n][0] for n in domain.nodes if room.get(n))


def partition_problems(who: str, job: Job, tree: HyperNodeTree, pods: Iterable[PodAssignment]) -> Iterator[str]:
    """Each partition placed whole, and with a hard limit inside one HyperNode of that tier."""
    placed = list(pods)
    for task in job.tasks:
        policy = task.partition_policy
        if policy is None:
            continue
        cap = partition_cap(policy, tree)
        parts: dict[int, list[str]] = {}
        for a in placed:
            if a.task == task.name:
                parts.setdefault(policy.partition_of(a.index), []).append(a.node)
        for part, nodes in sorted(parts.items()):
            if len(nodes) != policy.partition_size:
                yield (f"{who}: partition {part} of task {task.name} has {len(nodes)} of its "
                       f"{policy.partition_size} pods (a partition is placed whole)")
            if cap is None:
                continue
            lowest = tree.lowest_domain_holding(nodes)
            if lowest is None or lowest.tier > cap:
                where = f"HyperNode {lowest.name} (tier {lowest.tier})" if lowest is not None else "no one HyperNode"
                yield (f"{who}: partition {part} of task {task.name} spans {where}, above its hard limit "
                       f"tier {cap}")
