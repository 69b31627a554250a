"""Baseline ``armada-drf``: Armada's DRF progressive filling over one pooled node database.

Modelled from the published descriptions (no code copied), armadaproject/armada:

* ``internal/scheduler/scheduling/fairness/fairness.go`` and
  ``docs/scheduling_and_preempting_jobs.md``: a queue's cost is its dominant share
  ``max_r alloc_r / total_r`` over the pool; progressive filling repeatedly takes the
  head job of the queue whose cost *after adding that job*, divided by its weight
  (``1/priorityFactor``; here the queue weight), is smallest. Within a queue jobs go by
  priority then submit time (``jobdb/comparison.go``). Queue priority does not exist.
* ``internal/scheduler/scheduling/scheduling_algo.go``: all nodes of all healthy
  executors form one pool, so the cluster is only an implicit result of node choice.
* ``internal/scheduler/nodedb/nodedb.go``: nodes are scanned best-fit, least available
  first (GPU, then CPU, then memory).
* ``internal/scheduler/scheduling/gang_scheduler.go``: a gang is placed member by member
  inside one transaction that commits only if every member fits; with a *node
  uniformity label* the gang is tried once per label value and the first perfect fit is
  kept. Our gangs may not span clusters, so the uniformity label is the cluster.
  Armada has no topology tiers; for a job with a *hard* ``networkTopology`` we give it
  what an Armada operator could — a one-level uniformity label on the HyperNodes at
  the widest allowed tier — so its plans stay valid and the comparison is about
  ordering and node choice, not about ignoring constraints (noted in the bench docs).
  Soft topology is ignored.
* Preemption (evict-and-reschedule) is omitted.
"""

from __future__ import annotations

from collections import deque

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PlanLimits, Unplaced
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.placement.baselines.common import (
    Attempt,
    BaselineLedger,
    Failures,
    assign_pods,
    by_submission,
    kept_partitions,
    placed_request,
    placement_for,
    unplaced,
)
from federation.placement.eligibility import allowed_clusters, candidate_domains, tier_limit, usable_nodes


def best_fit(node: Node, have: Resources, request: Resources) -> float:
    """Least available first: the node with the least free (GPU, CPU, memory) scores highest."""
    del node, request
    return -(have.get(GPU) * 1e12 + have.get(CPU) * 1e3 + have.get(MEMORY) / 2**30)


Group = tuple[ClusterSnapshot, str | None, list[Node]]


def _uniformity_groups(job: Job, snapshot: FederationSnapshot) -> list[Group]:
    """(cluster, HyperNode or None, nodes) per uniformity-label value, in try order."""
    groups: list[Group] = []
    for affinity_group in allowed_clusters(job, snapshot):
        for cluster in sorted(affinity_group, key=lambda c: c.name):
            usable = usable_nodes(cluster, job)
            if tier_limit(job, cluster) is None:
                groups.append((cluster, None, sorted(usable, key=lambda n: n.name)))
                continue
            domains = candidate_domains(job, cluster)
            if not domains:
                continue
            widest = max(d.tier for d in domains)
            for domain in sorted((d for d in domains if d.tier == widest), key=lambda d: d.name):
                members = sorted((n for n in usable if n.name in domain.nodes), key=lambda n: n.name)
                groups.append((cluster, domain.name, members))
        if groups:
            break  # a later clusterAffinities group only when an earlier one matched nothing
    return groups


class _Pool:
    """The round's node pool split by uniformity label, per kind of job (cached)."""

    def __init__(self, snapshot: FederationSnapshot) -> None:
        self.snapshot = snapshot
        self._groups: dict[tuple[object, ...], list[Group]] = {}

    def groups(self, job: Job) -> list[Group]:
        key = (job.propagation, job.node_constraints, job.network_topology)
        if key not in self._groups:
            self._groups[key] = _uniformity_groups(job, self.snapshot)
        return self._groups[key]


def _schedule(job: Job, pool: _Pool, ledger: BaselineLedger) -> Attempt:
    for cluster, hypernode, nodes in pool.groups(job):
        pods = assign_pods(job, cluster.name, nodes, ledger, best_fit)
        if pods is not None:
            return Attempt(placement_for(job, cluster, pods, hypernode))
    if job.network_topology is not None and job.network_topology.hard:
        return Attempt(None, "topology", "no uniformity-label domain within the tier limit holds the gang now")
    return Attempt(None, "capacity", "no cluster of the pool holds the whole gang now")


def _cost(usage: Resources, request: Resources, capacity: Resources, weight: int) -> float:
    """Dominant share of usage + request over the pool, divided by the queue weight."""
    share = 0.0
    have = usage.amounts
    for key, cap in capacity:
        if cap > 0:
            share = max(share, (have.get(key, 0) + request.get(key)) / cap)
    return share / max(1, weight)


def _try(job: Job, pool: _Pool, ledger: BaselineLedger, failures: Failures) -> Placement | Unplaced:
    """Schedule one gang; failures are remembered per gang shape (free only shrinks)."""
    known = failures.get(job)
    if known is not None:
        return known
    if not ledger.within_capability(job, ledger.gang_request(job)):
        why = Attempt(None, "queue-capability", f"queue {job.queue} capability would be exceeded")
        return failures.add(job, unplaced(job, ledger, why))
    attempt = kept_partitions(job, ledger, _schedule(job, pool, ledger))
    if attempt.placement is not None and ledger.within_capability(job, placed_request(job, attempt.placement)):
        return attempt.placement
    return failures.add(job, unplaced(job, ledger, attempt))


def plan(snapshot: FederationSnapshot, limits: PlanLimits | None = None, previous: Plan | None = None) -> Plan:
    """Progressive filling over all queues until every head job is placed or has failed."""
    del limits, previous
    ledger = BaselineLedger(snapshot)
    queues: dict[str, deque[PendingJob]] = {}
    for pending in by_submission(snapshot.pending):
        queues.setdefault(pending.job.queue, deque()).append(pending)
    weights = {q.name: q.weight for q in snapshot.queues}
    placements: list[Placement] = []
    failed: list[Unplaced] = []
    failures = Failures()
    pool = _Pool(snapshot)
    costs: dict[str, tuple[float, str]] = {}  # per queue, valid until its head or usage changes

    def cost(name: str) -> tuple[float, str]:
        if name not in costs:
            head = ledger.gang_request(queues[name][0].job)
            costs[name] = (_cost(ledger.usage(name), head, ledger.capacity, weights.get(name, 1)), name)
        return costs[name]

    while queues:
        name = min(queues, key=cost)
        job = queues[name].popleft().job
        costs.pop(name, None)
        if not queues[name]:
            del queues[name]
        outcome = _try(job, pool, ledger, failures)
        if isinstance(outcome, Placement):
            ledger.commit(job, outcome)
            placements.append(outcome)
        else:
            failed.append(outcome)
    return Plan(tuple(placements), tuple(failed), (), "GREEDY")
