"""Choose nodes for a gang inside the HyperNode (domain) the central planner chose.

The planner decides the cluster and the domain, and usually proposes a node for every
pod. By the time the agent binds, the cluster may have moved on (a node went NotReady,
another scheduler took room), so the agent re-checks: planned assignments that are still
valid are kept, the rest are re-packed best-fit inside the SAME domain, never outside it
(the network-topology promise — Volcano's hard mode, volcano-sh/volcano
pkg/scheduler/plugins/network-topology-aware — is the planner's decision to keep).

Each pod goes only to a node its task's nodeSelector, required node affinity and
tolerations allow (``Job.node_constraints``), as the planner assumed, and that its
PersistentVolumeClaims allow (agents/core/volumes.py: a bound PV's node affinity, a
WaitForFirstConsumer claim's chosen node). Pods sharing a WaitForFirstConsumer claim not
yet given a node all go where the first of them goes. The planner knows no PV, so a
domain where the volumes allow no node fails here and the Work reports Replan.

A task with a ``partitionPolicy`` is bound partition by partition: each partition whole,
inside one HyperNode of the domain's subtree within its tier (its planned nodes when they
still hold it, else the lowest-tier HyperNode where it fits best; placement/partitions.py),
as Volcano allocates a partition only whole (pkg/scheduler/actions/allocate).

The result is all-or-nothing, like Volcano's gang plugin (pkg/scheduler/plugins/gang):
either an assignment holding at least ``minAvailable`` pods (and every task's own
``minAvailable``), or None with the reason. Pure: inputs are immutable domain values and
the free resources are the snapshot's, so the same inputs always give the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agents.core.volumes import VolumeRules
from federation.domain.jobs import Job
from federation.domain.nodes import Node, Toleration, untolerated
from federation.domain.partitions import homes, partition_cap, partition_groups
from federation.domain.plans import PodAssignment
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.domain.scheduling import NodeConstraints
from federation.domain.topology import Domain, HyperNodeTree

PodKey = tuple[str, int]  # (task name, index within the task)


@dataclass(frozen=True)
class GangBinding:
    """``assignments`` is None when the gang cannot be bound; ``reason`` then says why."""

    assignments: tuple[PodAssignment, ...] | None
    reason: str = ""
    reused: int = 0  # assignments taken unchanged from the plan

    @property
    def ok(self) -> bool:
        return self.assignments is not None


def eligible(domain: Domain, nodes: Iterable[Node], tolerations: tuple[Toleration, ...] = (),
             constraints: NodeConstraints | None = None) -> list[Node]:
    """Nodes a pod may go to: inside the domain, ready, not cordoned, with no
    NoSchedule/NoExecute taint it does not tolerate, and (given ``constraints``, its task's)
    matching its nodeSelector and required node affinity (domain/scheduling.py, the check a
    kubelet makes on admission, so the agent never binds a pod the node would reject)."""
    if constraints is not None:  # the task's own tolerations count, with any given for the job
        tolerations = tolerations + constraints.tolerations
        constraints = constraints.with_tolerations(tolerations)
    return sorted(
        (n for n in nodes if n.name in domain.nodes and n.usable
         and (constraints.allows(n) if constraints is not None else not untolerated(n.taints, tolerations))),
        key=lambda n: n.name,
    )


def _size_key(requests: Resources) -> tuple[int, ...]:
    """Biggest pods first: GPUs dominate, then CPU, memory, anything else."""
    others = sum(v for k, v in requests if k not in (GPU, CPU, MEMORY))
    return (-requests.get(GPU), -requests.get(CPU), -requests.get(MEMORY), -others)


def _best_fit(requests: Resources, candidates: Sequence[Node], free: Mapping[str, Resources]) -> str | None:
    """The node whose leftover (on the resources this pod uses, GPUs first) is smallest."""
    keys = sorted((k for k, _ in requests), key=lambda k: (k != GPU, k != CPU, k != MEMORY, k))
    best: tuple[tuple[int, ...], str] | None = None
    for node in candidates:
        room = free[node.name]
        if not requests.fits_in(room):
            continue
        score = (tuple(room.get(k) - requests.get(k) for k in keys), node.name)
        if best is None or score < best:
            best = score
    return None if best is None else best[1]


def replacement_node(
    requests: Resources,
    domain: Domain,
    nodes: Sequence[Node],
    free: Mapping[str, Resources] | None = None,
    *,
    tolerations: tuple[Toleration, ...] = (),
    constraints: NodeConstraints | None = None,
    exclude: Iterable[str] = (),
) -> str | None:
    """A node inside the same HyperNode with room for one replacement pod (RestartPod or a
    pod whose node was lost), best-fit; None means the caller must escalate (report Replan).
    ``free`` overrides the nodes' own free resources (e.g. after earlier replacements);
    ``constraints`` are the pod's task's node constraints."""
    skip = set(exclude)
    candidates = [n for n in eligible(domain, nodes, tolerations, constraints) if n.name not in skip]
    room = dict(free) if free is not None else {n.name: n.free for n in candidates}
    room = {n.name: room.get(n.name, Resources()) for n in candidates}
    return _best_fit(requests, candidates, room)


def bind_gang(
    job: Job,
    domain: Domain,
    nodes: Sequence[Node],
    *,
    planned: Sequence[PodAssignment] = (),
    pending: Sequence[PodKey] | None = None,
    bound: Sequence[PodAssignment] = (),
    waiting: frozenset[str] = frozenset(),
    volumes: VolumeRules | None = None,
    tree: HyperNodeTree | None = None,
) -> GangBinding:
    """Assign nodes inside ``domain`` to the ``pending`` pods (default: every pod of the job).

    ``bound`` are pods of this gang already running on nodes (their room is already out of
    the nodes' ``free``); they count toward ``minAvailable``. Planned assignments are
    reused when the node is still eligible and still has room; the remaining pods are
    packed best-fit-decreasing, pods that a task's own ``minAvailable`` requires first.
    Pods beyond the gang minimum that do not fit are simply left out (elastic jobs).
    ``waiting`` tasks (dependsOn not met, no pods yet) do not count their own minimum.
    ``volumes`` narrow each pod's nodes further and pin shared unprovisioned claims.
    ``tree`` is the cluster's HyperNode tree, where partitions find their HyperNodes
    (without it, only ``domain`` itself).
    """
    keys: list[PodKey] = list(pending) if pending is not None else [(t, i) for t, i, _ in job.pods()]
    requests = {(t.name, i): t.resources for t in job.tasks for i in range(t.replicas)}
    per_task = {t.name: eligible(domain, nodes, constraints=c) for t, c in zip(job.tasks, job.node_constraints,
                                                                               strict=True)}
    exclusive = {t.name for t, c in zip(job.tasks, job.node_constraints, strict=True) if c.one_per_node}
    candidates = sorted({n.name: n for ns in per_task.values() for n in ns}.values(), key=lambda n: n.name)
    allowed = {task: {n.name for n in ns} for task, ns in per_task.items()}
    free = {n.name: n.free for n in candidates}
    chosen: dict[PodKey, str] = {}
    taken: set[tuple[str, str]] = {(a.task, a.node) for a in bound if a.task in exclusive}
    claimed: dict[str, str] = {}  # WaitForFirstConsumer claim -> the node its first pod was given
    by_name = {n.name: n for n in candidates}

    def fits_volumes(key: PodKey, node: str) -> bool:
        if volumes is None:
            return True
        return volumes.allows(key, by_name[node]) and all(claimed.get(c, node) == node
                                                          for c in volumes.selects(key))

    def take(key: PodKey, node: str) -> None:
        chosen[key] = node
        free[node] = free[node] - requests[key]
        if key[0] in exclusive:
            taken.add((key[0], node))
        if volumes is not None:
            for claim in volumes.selects(key):
                claimed.setdefault(claim, node)

    plan = {(a.task, a.index): a.node for a in planned}
    reused = 0

    def fit_partition(members: list[PodKey], home: frozenset[str], hinted: bool) -> list[str] | None:
        """Nodes in ``home`` for every pod of one partition (the planned ones when
        ``hinted``), best fit against what is free; None if one does not fit."""
        trial = dict(free)
        found: list[str] = []
        for key in members:
            options = [n for n in per_task.get(key[0], ()) if n.name in home and fits_volumes(key, n.name)
                       and (key[0], n.name) not in taken and not (key[0] in exclusive and n.name in found)]
            if hinted:
                node = plan.get(key)
                node = node if node in {n.name for n in options} and requests[key].fits_in(trial[node]) else None
            else:
                node = _best_fit(requests[key], options, trial)
            if node is None:
                return None
            trial[node] = trial[node] - requests[key]
            found.append(node)
        return found

    # Partitions first: those whose planned nodes still hold them whole, then the others
    # repacked into the lowest-tier HyperNode (of the domain's subtree) where they fit.
    homeless: list[tuple[list[PodKey], list[frozenset[str]]]] = []
    for (task_name, part), members in partition_groups(job, keys).items():
        policy = job.task(task_name).partition_policy
        assert policy is not None
        anchor = [a.node for a in bound if a.task == task_name and policy.partition_of(a.index) == part]
        known = tree if tree is not None else HyperNodeTree({})
        places = [d.nodes for d in homes(known, domain, partition_cap(policy, known), anchor)]
        wanted = frozenset(plan.get(k, "") for k in members)
        found = (fit_partition(members, wanted, True)
                 if "" not in wanted and any(wanted | set(anchor) <= d for d in places) else None)
        if found is None:
            homeless.append((members, places))
            continue
        reused += len(members)
        for key, where in zip(members, found, strict=True):
            take(key, where)
    for members, places in homeless:
        for home in places:
            found = fit_partition(members, home, False)
            if found is not None:
                for key, where in zip(members, found, strict=True):
                    take(key, where)
                break
    partitions = {t.name for t in job.tasks if t.partition_policy is not None}
    keys = [k for k in keys if k[0] not in partitions or k in chosen]
    for key in keys:
        if key in chosen:
            continue
        node = plan.get(key)
        if node is not None and node in allowed.get(key[0], ()) and (key[0], node) not in taken \
                and requests[key].fits_in(free[node]) and fits_volumes(key, node):
            take(key, node)
            reused += 1

    bound_per_task: dict[str, int] = {}
    for a in bound:
        bound_per_task[a.task] = bound_per_task.get(a.task, 0) + 1

    def mandatory(key: PodKey) -> bool:
        task = job.task(key[0])
        need = task.min_available if task.min_available is not None else 0
        return key[1] < need

    rest = sorted((k for k in keys if k not in chosen),
                  key=lambda k: (not mandatory(k), _size_key(requests[k]), k))
    missed: PodKey | None = None
    for key in rest:
        options = [n for n in per_task.get(key[0], ()) if (key[0], n.name) not in taken and fits_volumes(key, n.name)]
        node = _best_fit(requests[key], options, free)
        if node is None:
            missed = missed or key
            continue
        take(key, node)

    total = len(chosen) + len(bound)
    if total < job.gang_size:
        reason = _shortfall(job, domain, total, missed, requests, len(candidates))
        if missed is not None and volumes is not None and volumes.describe(missed):
            room = [n for n in per_task.get(missed[0], ()) if volumes.allows(missed, n)]
            reason += (f"; its volumes ({volumes.describe(missed)}) allow {len(room)} of the "
                       f"{len(per_task.get(missed[0], ()))} nodes its task may use there")
        return GangBinding(None, reason)
    for task in job.tasks:
        have = bound_per_task.get(task.name, 0) + sum(1 for k in chosen if k[0] == task.name)
        if task.min_available is not None and have < task.min_available and task.name not in waiting:
            return GangBinding(
                None,
                f"task {task.name} needs {task.min_available} pods in {domain.name}, only {have} fit",
            )
    ordered = tuple(PodAssignment(t, i, chosen[(t, i)]) for t, i in keys if (t, i) in chosen)
    return GangBinding(ordered, "", reused)


def _shortfall(
    job: Job, domain: Domain, total: int, missed: PodKey | None, requests: Mapping[PodKey, Resources], usable: int
) -> str:
    detail = ""
    if missed is not None:
        quantities = ", ".join(f"{k}={v}" for k, v in sorted(requests[missed].to_quantities().items()))
        detail = f"; no node has room for {job.name}-{missed[0]}-{missed[1]} ({quantities})"
    return (
        f"gang {job.name} needs {job.gang_size} pods inside {domain.name} but only {total} fit "
        f"on its {usable} usable nodes{detail}"
    )
