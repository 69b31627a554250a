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

from collections.abc import Sequence

from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PlanLimits, Unplaced
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.placement.baselines.common import (
    Attempt,
    Ledger,
    assign_pods,
    by_submission,
    placed_request,
    placement_for,
    shape,
    unplaced,
)
from federation.placement.eligibility import allowed_clusters, candidate_domains, tier_limit, usable_nodes


def best_fit(node: Node, have: Resources, request: Resources) -> float:
    """Least available first: the node with the least free (GPU, CPU, memory) scores highest."""
    del node, request
    return -(have.get(GPU) * 1e12 + have.get(CPU) * 1e3 + have.get(MEMORY) / 2**30)


def _uniformity_groups(job: Job, snapshot: FederationSnapshot) -> list[tuple[str, str | None, list[str]]]:
    """(cluster, HyperNode or None, node names) per uniformity-label value, in try order."""
    groups: list[tuple[str, str | None, list[str]]] = []
    for affinity_group in allowed_clusters(job, snapshot):
        for cluster in sorted(affinity_group, key=lambda c: c.name):
            usable = {n.name for n in usable_nodes(cluster, job)}
            if tier_limit(job, cluster) is None:
                groups.append((cluster.name, None, sorted(usable)))
                continue
            domains = candidate_domains(job, cluster)
            if not domains:
                continue
            widest = max(d.tier for d in domains)
            for domain in sorted((d for d in domains if d.tier == widest), key=lambda d: d.name):
                groups.append((cluster.name, domain.name, sorted(domain.nodes & usable)))
        if groups:
            break  # a later clusterAffinities group only when an earlier one matched nothing
    return groups


def _schedule(job: Job, snapshot: FederationSnapshot, ledger: Ledger) -> Attempt:
    topology = job.network_topology is not None and job.network_topology.hard
    for cluster_name, hypernode, names in _uniformity_groups(job, snapshot):
        cluster = snapshot.cluster(cluster_name)
        assert cluster is not None
        by_name = {n.name: n for n in cluster.nodes}
        nodes = [by_name[n] for n in names]
        pods = assign_pods(job, cluster_name, nodes, ledger, best_fit)
        if pods is not None:
            return Attempt(placement_for(job, cluster, pods, hypernode))
    if topology:
        return Attempt(None, "topology", "no uniformity-label domain within the tier limit holds the gang now")
    return Attempt(None, "capacity", "no cluster of the pool holds the whole gang now")


def _cost(usage: Resources, capacity: Resources, weight: int) -> float:
    return usage.dominant_share(capacity) / max(1, weight)


def plan(snapshot: FederationSnapshot, limits: PlanLimits | None = None, previous: Plan | None = None) -> Plan:
    """Progressive filling over all queues until every head job is placed or has failed."""
    del limits, previous
    ledger = Ledger(snapshot)
    queues: dict[str, list[PendingJob]] = {}
    for pending in by_submission(snapshot.pending):
        queues.setdefault(pending.job.queue, []).append(pending)
    weights = {q.name: q.weight for q in snapshot.queues}
    placements: list[Placement] = []
    failed: list[Unplaced] = []
    memo: set[tuple[object, ...]] = set()
    costs: dict[str, tuple[float, str]] = {}  # per queue, valid until its head or usage changes

    def cost(name: str, jobs: Sequence[PendingJob]) -> tuple[float, str]:
        if name not in costs:
            after = ledger.usage(name) + ledger.gang_request(jobs[0].job)
            costs[name] = (_cost(after, ledger.capacity, weights.get(name, 1)), name)
        return costs[name]

    while any(queues.values()):
        name = min((q for q, jobs in queues.items() if jobs), key=lambda q: cost(q, queues[q]))
        job = queues[name].pop(0).job
        costs.pop(name, None)
        key = shape(job)
        if key in memo:  # free only shrinks within a round: an identical gang fails again
            failed.append(unplaced(job, ledger, Attempt(None, "capacity", "an identical gang did not fit")))
            continue
        if not ledger.within_capability(job, ledger.gang_request(job)):
            failed.append(unplaced(job, ledger, Attempt(None, "queue-capability",
                                                          f"queue {job.queue} capability would be exceeded")))
            continue
        attempt = _schedule(job, snapshot, ledger)
        if attempt.placement is not None and ledger.within_capability(job, placed_request(job, attempt.placement)):
            ledger.commit(job, attempt.placement)
            placements.append(attempt.placement)
            continue
        memo.add(key)
        failed.append(unplaced(job, ledger, attempt))
    return Plan(tuple(placements), tuple(failed), (), "GREEDY")
