"""Baseline ``karmada-spread``: Karmada dynamic weights by available replicas, then kube-scheduler.

Modelled from the published descriptions (no code copied):

* karmada-io/karmada ``pkg/apis/policy/v1alpha1/propagation_types.go``
  (``replicaScheduling: Divided``, ``replicaDivisionPreference: Aggregated``,
  ``weightPreference.dynamicWeight: AvailableReplicas``) and the general estimator
  (``pkg/estimator/client/general.go``): each cluster's *available replicas* is estimated
  per pod from its summed free resources, ignoring gangs and topology (KEP-521 rules
  gang estimation out). Aggregated division fills the fewest clusters, i.e. the cluster
  with the most available replicas. A gang cannot span clusters in this federation, so
  the whole job goes to that one cluster; when the estimate was optimistic (fragmented
  nodes) the pods do not fit and the job stays pending — that optimism is the model.
* Karmada schedules bindings in priority order (``schedulePriority``), FIFO otherwise.
* Inside the member, the default kube-scheduler binds pod by pod with the
  NodeResourcesFit *LeastAllocated* score over cpu and memory (spreading), unaware of
  the network topology. Jobs with a *hard* ``networkTopology`` are only filtered (as the
  member's Volcano would reject a bind outside the limit): the widest allowed HyperNodes
  are tried in name order, the first where spreading fits wins. Soft topology is ignored.
* Karmada has no queues: ``capability`` is still honoured (it is a member Queue limit).
"""

from __future__ import annotations

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, Placement, Plan, PlanLimits, Unplaced
from federation.domain.resources import CPU, MEMORY, Resources
from federation.placement.baselines.common import (
    Attempt,
    BaselineLedger,
    Failures,
    assign_pods,
    by_submission,
    placement_for,
    try_job,
)
from federation.placement.eligibility import allowed_clusters, candidate_domains, tier_limit, usable_nodes


def available_replicas(cluster: ClusterSnapshot, job: Job, ledger: BaselineLedger) -> int:
    """General-estimator view: how many of the job's (largest) pods the summed free holds."""
    pod = max((t.resources for t in job.tasks), key=lambda r: (r.gpus, r.get(CPU), r.get(MEMORY)))
    free = ledger.cluster_free(cluster, job)
    counts = [free.get(k) // v for k, v in pod if v > 0]
    return min(counts) if counts else 0


def least_allocated(node: Node, have: Resources, request: Resources) -> float:
    """kube-scheduler LeastAllocated over cpu and memory: share left free after the pod."""
    scores = [
        (have.get(k) - request.get(k)) / node.allocatable.get(k)
        for k in (CPU, MEMORY)
        if node.allocatable.get(k) > 0
    ]
    return sum(scores) / len(scores) if scores else 0.0


def _bind(job: Job, cluster: ClusterSnapshot, ledger: BaselineLedger) -> Attempt:
    nodes = list(usable_nodes(cluster, job))
    if tier_limit(job, cluster) is None:
        pods = assign_pods(job, cluster.name, nodes, ledger, least_allocated)
        if pods is None:
            return Attempt(None, "capacity", f"estimated room in {cluster.name} but the pods do not fit its nodes",
                           cluster.name)
        return Attempt(placement_for(job, cluster, pods))
    usable = {n.name: n for n in nodes}
    domains = sorted(candidate_domains(job, cluster), key=lambda d: (-d.tier, d.name))
    for domain in domains:
        members = [usable[n] for n in sorted(domain.nodes) if n in usable]
        pods = assign_pods(job, cluster.name, members, ledger, least_allocated)
        if pods is not None:
            return Attempt(placement_for(job, cluster, pods, domain.name))
    return Attempt(None, "topology", f"estimated room in {cluster.name} but no HyperNode within the limit fits",
                   cluster.name)


def _choose(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger) -> ClusterSnapshot | None:
    """Aggregated + AvailableReplicas: the allowed cluster estimating the most replicas."""
    for group in allowed_clusters(job, snapshot):
        if not group:
            continue
        estimates = {c.name: available_replicas(c, job, ledger) for c in group}
        best = min(group, key=lambda c: (-estimates[c.name], c.name))
        if estimates[best.name] >= job.gang_size:
            return best
    return None


def _try(job: Job, snapshot: FederationSnapshot, ledger: BaselineLedger, failures: Failures) -> Placement | Unplaced:
    """Choose then bind one job (``common.try_job``)."""
    return try_job(job, ledger, failures, lambda: _choose(job, snapshot, ledger),
                   "no allowed cluster estimates enough available replicas",
                   lambda cluster: _bind(job, cluster, ledger))


def plan(snapshot: FederationSnapshot, limits: PlanLimits | None = None, previous: Plan | None = None) -> Plan:
    """Schedule every pending job in priority/FIFO order (``limits``/``previous`` unused)."""
    del limits, previous
    ledger = BaselineLedger(snapshot)
    placements: list[Placement] = []
    failed: list[Unplaced] = []
    failures = Failures()
    for pending in by_submission(snapshot.pending):
        outcome = _try(pending.job, snapshot, ledger, failures)
        if isinstance(outcome, Placement):
            ledger.commit(pending.job, outcome)
            placements.append(outcome)
        else:
            failed.append(outcome)
    return Plan(tuple(placements), tuple(failed), (), "GREEDY")
