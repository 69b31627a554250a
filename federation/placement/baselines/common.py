"""What every baseline shares: a round ledger, greedy pod-by-pod node choice, reasons.

The baselines differ in *order* (which job next), *cluster choice* and *node scoring*;
the bookkeeping — tentative free resources per node within one round, queue usage
against ``capability``, turning pod assignments into a ``Placement`` in the lowest
domain that holds them, and explaining failures with the planner's vocabulary
(``BLOCKED_BY``) — is the same and lives here so each baseline module reads as the
peer's algorithm only. Hard filters (health, affinity, taints, tier limits) come from
``federation.placement.eligibility`` so baselines and our planner agree on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, PodAssignment, Unplaced
from federation.domain.resources import CPU, MEMORY, Resources, total
from federation.domain.scheduling import NodeConstraints
from federation.placement.eligibility import (
    affinity_terms,
    allowed_clusters,
    can_ever_hold,
    cluster_block,
    needs_masks,
    tier_limit,
    unmatched_constraints,
    usable_nodes,
)
from federation.placement.hierarchy import ancestors
from federation.placement.partitions import partition_problems, partitioned

Pod = tuple[str, int, Resources]
#: Score of putting ``pod`` on ``node`` given the node's current free; higher is better.
NodeScore = Callable[[Node, Resources, Resources], float]


_VERDICTS: dict[tuple[object, ...], Unplaced | None] = {}


@dataclass(frozen=True)
class JobFacts:
    """Derived, immutable facts about a job that every round asks for again."""

    pods: tuple[Pod, ...]
    gang_request: Resources
    largest_pod: Resources
    shape: tuple[object, ...]


_FACTS: dict[int, tuple[Job, JobFacts]] = {}


def facts(job: Job) -> JobFacts:
    """``JobFacts`` of ``job``, remembered by identity across rounds (jobs are immutable).

    The cache holds the job itself, so an ``id`` is never reused while its entry lives.
    """
    hit = _FACTS.get(id(job))
    if hit is not None and hit[0] is job:
        return hit[1]
    pods = job.pods()
    found = JobFacts(
        pods=pods,
        gang_request=total(r for _, _, r in pods[: job.gang_size]),
        largest_pod=max((r for _, _, r in pods), key=lambda r: (r.gpus, r.get(CPU), r.get(MEMORY))),
        shape=(
            tuple((t.replicas, t.resources) for t in job.tasks), job.gang_size, job.network_topology,
            job.propagation, job.node_constraints, job.queue,
        ),
    )
    if len(_FACTS) > 200_000:
        _FACTS.clear()
    _FACTS[id(job)] = (job, found)
    return found


class BaselineLedger:
    """Tentative free resources per node and usage per queue during one round."""

    def __init__(self, snapshot: FederationSnapshot) -> None:
        self.snapshot = snapshot
        self.free: dict[tuple[str, str], Resources] = {
            (c.name, n.name): n.free for c in snapshot.clusters for n in c.nodes
        }
        by_queue: dict[str, list[Resources]] = {}
        for run in snapshot.running:  # running jobs hold all their replicas
            by_queue.setdefault(run.job.queue, []).append(run.job.requests)
        self.queue_usage: dict[str, Resources] = {q: total(reqs) for q, reqs in by_queue.items()}
        # What ``verdict`` depends on besides the job: health, unusable nodes, and the node
        # profiles (sizes, labels, taints) and tree of each cluster. Names alone were not
        # enough: two snapshots with the same node names but other sizes shared a verdict.
        self.signature = tuple(
            (c.name, c.healthy, tuple(n.name for n in c.nodes if not n.usable),
             frozenset((n.allocatable, tuple(sorted(n.labels.items())), n.taints) for n in c.nodes),
             tuple(sorted((d.name, d.tier, len(d.nodes)) for d in c.tree.domains.values())))
            for c in snapshot.clusters
        )
        self.capacity = total(
            n.allocatable for c in snapshot.clusters if c.healthy for n in c.nodes if n.usable
        )
        # Caches: rounds ask the same questions for many similar pending jobs.
        self._cluster_free: dict[tuple[str, tuple[NodeConstraints, ...]], Resources] = {}
        self._shares: dict[str, float] = {}

    def pods(self, job: Job) -> tuple[Pod, ...]:
        return facts(job).pods

    def gang_request(self, job: Job) -> Resources:
        """Volcano ``minResources``: requests of the first ``minAvailable`` pods."""
        return facts(job).gang_request

    def node_free(self, cluster: str, node: Node) -> Resources:
        return self.free[(cluster, node.name)]

    def cluster_free(self, cluster: ClusterSnapshot, job: Job) -> Resources:
        key = (cluster.name, job.node_constraints)
        if key not in self._cluster_free:
            self._cluster_free[key] = total(self.free[(cluster.name, n.name)] for n in usable_nodes(cluster, job))
        return self._cluster_free[key]

    def usage(self, queue: str) -> Resources:
        return self.queue_usage.get(queue, Resources())

    def share(self, queue: str) -> float:
        """The queue's dominant share of the healthy federation (cached until it changes)."""
        if queue not in self._shares:
            self._shares[queue] = self.usage(queue).dominant_share(self.capacity)
        return self._shares[queue]

    def verdict(self, job: Job) -> Unplaced | None:
        """Unplaced when no allowed cluster could ever hold the job.

        It depends only on the gang's shape and on which clusters and nodes are healthy,
        so it is remembered across rounds (bounded) rather than re-packed every round.
        """
        key = (shape(job), self.signature)
        if key not in _VERDICTS:
            if len(_VERDICTS) > 50_000:
                _VERDICTS.clear()
            _VERDICTS[key] = _never_fits(job, self.snapshot)
        found = _VERDICTS[key]
        return None if found is None else replace(found, job=job.name)

    def within_capability(self, job: Job, request: Resources) -> bool:
        """Usage after ``request`` stays within ``capability`` in every capped resource it asks
        for, for the job's queue and every parent over its subtree (hierarchical queues)."""
        queues = {q.name: q for q in self.snapshot.queues}
        for name in (job.queue, *ancestors(queues, job.queue)):
            queue = queues.get(name)
            if queue is None or queue.capability is None:
                continue
            below = [u for q, u in self.queue_usage.items() if q == name or name in ancestors(queues, q)]
            after = total(below) + request
            if not all(after.get(k) <= cap for k, cap in queue.capability if request.get(k) > 0):
                return False
        return True

    def commit(self, job: Job, placement: Placement) -> None:
        reqs = {(t, i): r for t, i, r in self.pods(job)}
        for pod in placement.pods:
            key = (placement.cluster, pod.node)
            self.free[key] = self.free[key] - reqs[(pod.task, pod.index)]
        used = total(reqs[(p.task, p.index)] for p in placement.pods)
        self.queue_usage[job.queue] = self.usage(job.queue) + used
        self._shares.pop(job.queue, None)
        for stale in [k for k in self._cluster_free if k[0] == placement.cluster]:
            del self._cluster_free[stale]


def assign_pods(
    job: Job, cluster: str, nodes: Sequence[Node], ledger: BaselineLedger, score: NodeScore
) -> tuple[PodAssignment, ...] | None:
    """Place pods one by one on the best-scoring node that fits (ties: node order).

    The gang's pods (``Job.gang_pods``: every replica unless elastic) or none; an elastic
    job's further replicas are placed after them where they fit, as Volcano's gang plugin
    lets them. The ledger is not changed.
    """
    free = {n.name: ledger.node_free(cluster, n) for n in nodes}
    out: list[PodAssignment] = []
    allows = PodFilter(job)
    gang = {(t, i) for t, i, _ in job.gang_pods()}
    for task, index, request in gang_first(job, ledger.pods(job)):
        best: Node | None = None
        best_score = 0.0
        wanted = tuple(request)
        for node in nodes:
            have = free[node.name]
            amounts = have.amounts
            if any(amounts.get(k, 0) < v for k, v in wanted) or not allows(task, node):
                continue
            value = score(node, have, request)
            if best is None or value > best_score:
                best, best_score = node, value
        if best is None:
            if (task, index) in gang:
                return None
            continue
        free[best.name] = free[best.name] - request
        allows.took(task, best)
        out.append(PodAssignment(task, index, best.name))
    return tuple(out)


def gang_first(job: Job, pods: Sequence[Pod]) -> list[Pod]:
    """``pods`` with the gang's own pods first (stable), then an elastic job's extras."""
    gang = {(t, i) for t, i, _ in job.gang_pods()}
    return sorted(pods, key=lambda p: (p[0], p[1]) not in gang)


def gang_met(job: Job, pods: Sequence[PodAssignment]) -> bool:
    """Every gang pod is placed (the extras of an elastic job are optional)."""
    placed = {(p.task, p.index) for p in pods}
    return all((t, i) in placed for t, i, _ in job.gang_pods())


class PodFilter:
    """Per-pod node check for baselines that choose nodes pod by pod.

    ``usable_nodes`` already narrows to nodes SOME task may use; when tasks differ in their
    node constraints (or take one node per pod) each pod is checked against its own task's.
    """

    def __init__(self, job: Job) -> None:
        self.active = needs_masks(job)
        self.constraints = dict(zip((t.name for t in job.tasks), job.node_constraints, strict=True))
        self.taken: set[tuple[str, str]] = set()

    def __call__(self, task: str, node: Node) -> bool:
        if not self.active:
            return True
        c = self.constraints[task]
        return c.allows(node) and not (c.one_per_node and (task, node.name) in self.taken)

    def took(self, task: str, node: Node) -> None:
        if self.active and self.constraints[task].one_per_node:
            self.taken.add((task, node.name))


def placed_request(job: Job, placement: Placement) -> Resources:
    """Summed requests of the pods a placement binds."""
    reqs = {(t, i): r for t, i, r in job.pods()}
    return total(reqs[(p.task, p.index)] for p in placement.pods)


def placement_for(job: Job, cluster: ClusterSnapshot, pods: tuple[PodAssignment, ...],
                  hypernode: str | None = None) -> Placement:
    """A placement in ``hypernode`` (or the lowest domain holding all the pods)."""
    if hypernode is not None:
        domain = cluster.tree.domains[hypernode]
    else:
        lowest = cluster.tree.lowest_domain_holding({p.node for p in pods})
        assert lowest is not None, "every cluster has a domain holding all of its nodes"
        domain = lowest
    return Placement(job.name, cluster.name, domain.name, domain.tier, pods)


def fraction_used(node: Node, have: Resources, request: Resources, keys: Iterable[str]) -> float:
    """Mean over ``keys`` of (used + request) / allocatable: the bin-pack ratio."""
    ratios = [
        (node.allocatable.get(k) - have.get(k) + request.get(k)) / node.allocatable.get(k)
        for k in keys
        if node.allocatable.get(k) > 0
    ]
    return sum(ratios) / len(ratios) if ratios else 0.0


@dataclass(frozen=True)
class Attempt:
    """Outcome of trying one job: a placement, or why not (a ``BLOCKED_BY`` name)."""

    placement: Placement | None = None
    constraint: str = "capacity"
    reason: str = ""
    cluster: str | None = None


def unplaced(job: Job, ledger: BaselineLedger, attempt: Attempt) -> Unplaced:
    """Explain a failed attempt; ``unschedulable`` when no allowed cluster could ever hold it."""
    verdict = ledger.verdict(job)
    if verdict is not None:
        return verdict
    return Unplaced(job.name, attempt.reason or "no room now", attempt.constraint, attempt.cluster)


def _never_fits(job: Job, snapshot: FederationSnapshot) -> Unplaced | None:
    clusters = [c for group in allowed_clusters(job, snapshot) for c in group]
    if any(can_ever_hold(job, c) for c in clusters):
        return None
    # Unavailable is not impossible: a lost cluster that could hold the gang once it is
    # back makes the job wait (the planner's reasons make the same distinction).
    lost = [
        c.name for c in snapshot.clusters if not c.healthy
        for revived in (replace(c, healthy=True),)
        if any(cluster_block(job, revived, t) is None for t in affinity_terms(job)) and can_ever_hold(job, revived)
    ]
    if lost:
        return Unplaced(job.name, f"allowed clusters unavailable: {', '.join(lost)} (lost); it waits for them",
                        "capacity", lost[0])
    if not clusters:
        blocks = {cluster_block(job, c, t) for c in snapshot.clusters for t in affinity_terms(job)}
        constraint = "taints" if "taints" in blocks else "affinity" if "affinity" in blocks else "capacity"
        return Unplaced(job.name, "no healthy cluster matches the job's affinity and tolerations", constraint)
    unmatched = unmatched_constraints(job, clusters)
    if unmatched is not None:
        return Unplaced(job.name, unmatched, "node-constraints", unschedulable=True)
    limited = any(tier_limit(job, c) is not None for c in clusters)
    why = "within its hard tier limit " if limited else ""
    return Unplaced(job.name, f"no allowed cluster could hold the gang {why}even when empty", "unschedulable",
                    unschedulable=True)


def by_submission(pending: Iterable[PendingJob]) -> list[PendingJob]:
    """Job priority (higher first), then submit time, then snapshot order."""
    indexed = list(enumerate(pending))
    indexed.sort(key=lambda item: (-item[1].job.priority, item[1].submitted_at, item[0]))
    return [p for _, p in indexed]


def shape(job: Job) -> tuple[object, ...]:
    """Everything that decides whether a job fits: failed shapes are not retried in a round.

    Within one round free capacity only shrinks, so a job identical in pods, gang size,
    topology, placement policy and queue to one that already failed would fail too; the
    memo keeps rounds over thousands of similar pending jobs fast.
    """
    return facts(job).shape


class Failures:
    """Failed gang shapes of this round (optionally per cluster) and why they failed."""

    def __init__(self) -> None:
        self._seen: dict[tuple[object, ...], Unplaced] = {}

    def get(self, job: Job, where: str = "") -> Unplaced | None:
        found = self._seen.get((shape(job), where))
        return None if found is None else replace(found, job=job.name)

    def add(self, job: Job, why: Unplaced, where: str = "") -> Unplaced:
        self._seen[(shape(job), where)] = why
        return why


def kept_partitions(job: Job, ledger: BaselineLedger, attempt: Attempt) -> Attempt:
    """``attempt``, unless its placement breaks a partition (Volcano's task partitionPolicy,
    placement/partitions.py), which these peer models do not place by: such a placement is
    refused rather than emitted, so every baseline plan stays valid."""
    p = attempt.placement
    if p is None or not partitioned(job):
        return attempt
    cluster = ledger.snapshot.cluster(p.cluster)
    if cluster is not None and next(partition_problems("", job, cluster.tree, p.pods), None) is None:
        return attempt
    return Attempt(None, "topology", f"this baseline does not model partitionPolicy, and its placement in "
                   f"{p.cluster} breaks a partition", p.cluster)


def try_job(job: Job, ledger: BaselineLedger, failures: Failures, choose: Callable[[], ClusterSnapshot | None],
            no_cluster: str, bind: Callable[[ClusterSnapshot], Attempt]) -> Placement | Unplaced:
    """Choose a cluster, then bind one job in it: the two-step shape of the Volcano and
    Karmada baselines. Failures are remembered per gang shape (and cluster), because free
    capacity only shrinks within a round, so an identical gang fails again."""
    known = failures.get(job)
    if known is not None:
        return known
    if not ledger.within_capability(job, ledger.gang_request(job)):
        why = Attempt(None, "queue-capability", f"queue {job.queue} capability would be exceeded")
        return failures.add(job, unplaced(job, ledger, why))
    cluster = choose()
    if cluster is None:
        return failures.add(job, unplaced(job, ledger, Attempt(None, "capacity", no_cluster)))
    known = failures.get(job, cluster.name)
    if known is not None:
        return known
    attempt = kept_partitions(job, ledger, bind(cluster))
    if attempt.placement is not None and ledger.within_capability(job, placed_request(job, attempt.placement)):
        return attempt.placement
    return failures.add(job, unplaced(job, ledger, attempt), cluster.name)
