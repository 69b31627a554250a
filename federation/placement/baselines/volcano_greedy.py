"""Baseline ``volcano-greedy``: volcano-global dispatch + Volcano's topology-aware allocate.

Modelled from the published descriptions (no code copied):

* volcano-sh/volcano-global ``pkg/dispatcher/dispatcher.go`` with its capacity and
  priority plugins: queues ordered by ``Queue.spec.priority``; a job is let through when
  the summed free resources allow it. The member cluster is then chosen by Karmada, which
  volcano-global does not optimise: we model it as *the first allowed cluster, in name
  order, whose summed free resources cover the gang's minResources and whose nodes have
  enough pod slots* (Karmada's accurate scheduler-estimator; still topology-blind —
  volcano-global itself checks sums only, issue #32). If Volcano then cannot
  place the gang in that cluster, the job stays pending there this round.
* volcano-sh/volcano ``pkg/scheduler/actions/allocate/allocate.go`` and
  ``pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go``: queues by
  priority then share (proportion plugin), jobs by priority then creation time. Hard
  mode: HyperNodes of tier <= ``highestTierAllowed`` whose idle covers minResources are
  grouped into gradients by ascending tier (``hyperNodeGradientFn``); the whole gang is
  dry-run on every HyperNode of the lowest gradient, the best by bin-pack score
  (weighted mean of (used+request)/allocatable) wins, and the next tier is tried only
  when none fits. Soft mode and jobs without topology use the whole cluster as one
  gradient; nodes are chosen by the binpack plugin (most allocated first), soft-mode
  pods preferring nodes whose lowest common HyperNode with the pods already placed has
  the lowest tier (the plugin's LCA tier score).
* Volcano's ``enqueue`` action runs first (``volcano_enqueue``): only jobs its overcommit
  and proportion plugins admitted (``JobEnqueueable``) are allocated, each in the cluster
  it was admitted to; admission persists across rounds as the PodGroup's Inqueue phase,
  until karmada-descheduler has the job re-dispatched because the estimator says its
  cluster cannot hold it while another can (``_redispatched``). Overcommit is per
  member cluster, proportion per federation queue (volcano-global's dispatcher).
* No preemption (``preempt``/``reclaim`` are not in Volcano's default action list).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PlanLimits, PodAssignment, Unplaced
from federation.domain.resources import CPU, MEMORY, Resources, total
from federation.domain.topology import Domain
from federation.placement.baselines.common import (
    Attempt,
    BaselineLedger,
    Failures,
    PodFilter,
    assign_pods,
    by_submission,
    fraction_used,
    gang_first,
    gang_met,
    placed_request,
    placement_for,
    unplaced,
)
from federation.placement.baselines.volcano_enqueue import EnqueueGate, rejection
from federation.placement.eligibility import allowed_clusters, can_ever_hold, candidate_domains, usable_nodes


def _binpack(request: Resources) -> list[str]:
    return [k for k, _ in request]


def _hypernode_score(nodes: list[Node], ledger: BaselineLedger, cluster: str, request: Resources) -> float:
    """Weighted mean over requested resources of (used + request) / allocatable of the domain."""
    alloc = total(n.allocatable for n in nodes)
    free = total(ledger.node_free(cluster, n) for n in nodes)
    ratios = [(alloc.get(k) - free.get(k) + v) / alloc.get(k) for k, v in request if alloc.get(k) > 0]
    return sum(ratios) / len(ratios) if ratios else 0.0


def _hard(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger) -> Attempt:
    need = ledger.gang_request(job)
    usable = {n.name: n for n in usable_nodes(cluster, job)}
    gradients: dict[int, list[Domain]] = {}
    for domain in candidate_domains(job, cluster):
        members = [usable[n] for n in sorted(domain.nodes) if n in usable]
        idle = total(ledger.node_free(cluster.name, n) for n in members)
        if members and need.fits_in(idle):
            gradients.setdefault(domain.tier, []).append(domain)
    keys = _binpack(need)

    def binpack(node: Node, have: Resources, request: Resources) -> float:
        return fraction_used(node, have, request, keys)

    for tier in sorted(gradients):
        best: tuple[float, str, tuple[PodAssignment, ...]] | None = None
        for domain in gradients[tier]:
            members = [usable[n] for n in sorted(domain.nodes) if n in usable]
            pods = assign_pods(job, cluster.name, members, ledger, binpack)
            if pods is None:
                continue
            score = _hypernode_score(members, ledger, cluster.name, need)
            if best is None or score > best[0]:
                best = (score, domain.name, pods)
        if best is not None:
            return Attempt(placement_for(job, cluster, best[2], best[1]))
    return Attempt(None, "topology", f"no HyperNode of tier <= limit in {cluster.name} can hold the gang now",
                   cluster.name)


def _whole_cluster(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger) -> Attempt:
    nodes = list(usable_nodes(cluster, job))
    keys = _binpack(ledger.gang_request(job))
    tree = cluster.tree
    soft = job.network_topology is not None and not job.network_topology.hard
    placed: set[str] = set()

    def score(node: Node, have: Resources, request: Resources) -> float:
        packing = fraction_used(node, have, request, keys)
        if not soft or not placed:
            return packing
        lca = tree.lowest_domain_holding(placed | {node.name})
        tier = lca.tier if lca is not None else tree.max_tier + 1
        return (tree.max_tier + 1 - tier) * 10.0 + packing

    # Score sees the pods placed so far (LCA tier); assign pod by pod with a growing set.
    free = {n.name: ledger.node_free(cluster.name, n) for n in nodes}
    out: list[PodAssignment] = []
    allows = PodFilter(job)
    for task, index, request in gang_first(job, ledger.pods(job)):
        best: Node | None = None
        best_score = 0.0
        for node in nodes:
            have = free[node.name]
            if request.fits_in(have) and allows(task, node):
                value = score(node, have, request)
                if best is None or value > best_score:
                    best, best_score = node, value
        if best is None:
            continue
        free[best.name] = free[best.name] - request
        allows.took(task, best)
        placed.add(best.name)
        out.append(PodAssignment(task, index, best.name))
    if gang_met(job, out):
        return Attempt(placement_for(job, cluster, tuple(out)))
    return Attempt(None, "capacity", f"Volcano in {cluster.name} cannot bind the gang (fragmented nodes)",
                   cluster.name)


def _room(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger) -> bool:
    """Karmada's estimate that the cluster can run the gang: enough summed free for its
    minResources and enough pod slots node by node (the accurate scheduler-estimator,
    ``pkg/estimator/server``), still blind to the network topology."""
    if not ledger.gang_request(job).fits_in(ledger.cluster_free(cluster, job)):
        return False
    pod = max((r for _, _, r in ledger.pods(job)), key=lambda r: (r.gpus, r.get(CPU), r.get(MEMORY)))
    slots = 0
    for node in usable_nodes(cluster, job):
        have = ledger.node_free(cluster.name, node)
        slots += min((have.get(k) // v for k, v in pod if v > 0), default=0)
        if slots >= job.gang_size:
            return True
    return False


def _dispatch(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger) -> ClusterSnapshot | None:
    """volcano-global lets the job through; Karmada picks the first allowed cluster with room."""
    for group in allowed_clusters(job, snapshot):
        for cluster in sorted(group, key=lambda c: c.name):
            if _room(job, cluster, ledger):
                return cluster
    return None


def _allocate(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger) -> Attempt:
    if job.network_topology is not None and job.network_topology.hard:
        return _hard(job, cluster, ledger)
    return _whole_cluster(job, cluster, ledger)


def _gating_cluster(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger) -> ClusterSnapshot | None:
    """The member cluster whose Volcano sees the job: Karmada's choice (the first with room).

    When no cluster has room now, Karmada does not bind the job anywhere, so no Volcano
    gates it, unless it may use one cluster only. Then it is created there and waits in
    that cluster's enqueue, as on a single Volcano cluster.
    """
    chosen = _dispatch(job, snapshot, ledger)
    if chosen is not None:
        return chosen
    allowed = [c for group in allowed_clusters(job, snapshot) for c in group]
    if len(allowed) == 1 and can_ever_hold(job, allowed[0]):
        return allowed[0]
    return None


def _redispatched(job: Job, home: str, snapshot: FederationSnapshot, ledger: BaselineLedger) -> bool:
    """Karmada takes an Inqueue job away from ``home``: the cluster was lost or is no longer
    allowed, or karmada-descheduler evicts its unschedulable pods because the estimator
    says ``home`` cannot hold the gang (no summed room now, or never within its hard tier
    limit) while another allowed cluster can (``volcano_enqueue`` module docstring)."""
    allowed = [c for group in allowed_clusters(job, snapshot) for c in group]
    cluster = next((c for c in allowed if c.name == home), None)
    if cluster is None:
        return True
    if can_ever_hold(job, cluster) and _room(job, cluster, ledger):
        return False
    return any(c.name != home and can_ever_hold(job, c) and _room(job, c, ledger) for c in allowed)


def _enqueue(order: list[PendingJob], snapshot: FederationSnapshot, ledger: BaselineLedger,
             gate: EnqueueGate) -> dict[str, Unplaced]:
    """Volcano's enqueue action over the round's jobs; returns the ones it left Pending."""
    jobs = {p.job.name: p.job for p in order}
    for name, home in list(gate.admitted.items()):
        job = jobs.get(name)
        if job is None or _redispatched(job, home, snapshot, ledger):
            del gate.admitted[name]  # dispatched afresh below
    gate.hold((p.job, ledger.gang_request(p.job)) for p in order)
    rejected: dict[str, Unplaced] = {}
    for pending in order:
        job = pending.job
        if job.name in gate.admitted or ledger.verdict(job) is not None:
            continue
        cluster = _gating_cluster(job, snapshot, ledger)
        if cluster is None:
            continue
        plugin = gate.verdict(job, ledger.gang_request(job), cluster)
        if plugin is not None:
            constraint, reason = rejection(plugin, cluster.name)
            rejected[job.name] = Unplaced(job.name, reason, constraint, cluster.name)
    return rejected


def _try(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger, failures: Failures,
         admitted: ClusterSnapshot | None = None) -> Placement | Unplaced:
    """Dispatch then allocate one job; failures are remembered per gang shape (and cluster)
    because free capacity only shrinks within a round, so an identical gang fails again.
    A job Volcano enqueued in ``admitted`` is allocated there only."""
    known = failures.get(job, admitted.name if admitted is not None else "")
    if known is not None:
        return known
    if not ledger.within_capability(job, ledger.gang_request(job)):
        why = Attempt(None, "queue-capability", f"queue {job.queue} capability would be exceeded")
        return failures.add(job, unplaced(job, ledger, why))
    cluster = admitted if admitted is not None else _dispatch(job, snapshot, ledger)
    if cluster is None:
        why = Attempt(None, "capacity", "no allowed cluster has room for the gang")
        return failures.add(job, unplaced(job, ledger, why))
    known = failures.get(job, cluster.name)
    if known is not None:
        return known
    attempt = _allocate(job, cluster, ledger)
    if attempt.placement is not None and ledger.within_capability(job, placed_request(job, attempt.placement)):
        return attempt.placement
    return failures.add(job, unplaced(job, ledger, attempt), cluster.name)


def _interleaved(snapshot: FederationSnapshot, ledger: BaselineLedger) -> list[PendingJob]:
    """Queue order (priority, then share / weight, from the ledger as it is now), jobs in
    job order inside each queue: the walk of Volcano's enqueue and allocate actions."""
    queues: dict[str, deque[PendingJob]] = {}
    for pending in by_submission(snapshot.pending):
        queues.setdefault(pending.job.queue, deque()).append(pending)
    shares = {name: ledger.share(name) for name in queues}
    taken = dict.fromkeys(queues, 0.0)
    out: list[PendingJob] = []

    def order(name: str) -> tuple[int, float, str]:
        queue = snapshot.queue(name)
        weight = queue.weight if queue is not None else 1
        return (-(queue.priority if queue is not None else 0), (shares[name] + taken[name]) / weight, name)

    while queues:
        name = min(queues, key=order)
        pending = queues[name].popleft()
        out.append(pending)
        taken[name] += ledger.gang_request(pending.job).dominant_share(ledger.capacity)
        if not queues[name]:
            del queues[name]
    return out


def plan(snapshot: FederationSnapshot, limits: PlanLimits | None = None, previous: Plan | None = None) -> Plan:
    """Volcano's enqueue then allocate over all pending jobs (``limits`` unused; ``previous``
    tells which jobs were already Inqueue)."""
    del limits
    ledger = BaselineLedger(snapshot)
    gate = EnqueueGate(snapshot, previous)
    rejected = _enqueue(_interleaved(snapshot, ledger), snapshot, ledger, gate)
    queues: dict[str, deque[PendingJob]] = {}
    for pending in by_submission(snapshot.pending):
        queues.setdefault(pending.job.queue, deque()).append(pending)
    placements: list[Placement] = []
    failed: list[Unplaced] = []
    failures = Failures()
    clusters = {c.name: c for c in snapshot.clusters}

    def order(name: str) -> tuple[int, float, str]:
        queue = snapshot.queue(name)
        weight = queue.weight if queue is not None else 1
        return (-(queue.priority if queue is not None else 0), ledger.share(name) / weight, name)

    while queues:
        name = min(queues, key=order)
        job = queues[name].popleft().job
        if not queues[name]:
            del queues[name]
        if job.name in rejected:
            failed.append(rejected[job.name])
            continue
        home = gate.admitted.get(job.name)
        outcome = _try(job, snapshot, ledger, failures, clusters[home] if home is not None else None)
        if isinstance(outcome, Placement):
            ledger.commit(job, outcome)
            placements.append(outcome)
        elif home is not None and not outcome.unschedulable:
            failed.append(replace(outcome, closest_cluster=home))  # stays Inqueue in ``home``
        else:
            failed.append(outcome)
    return Plan(tuple(placements), tuple(failed), (), "GREEDY")
