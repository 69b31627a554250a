"""Volcano's task ``partitionPolicy``: a task split into equal partitions, each kept whole.

A task of ``replicas = totalPartitions x partitionSize`` pods is cut into partitions by
pod index (pod ``i`` is in partition ``i // partitionSize``; Volcano's job controller
labels it ``volcano.sh/partition-id``, pkg/controllers/job/job_controller_util.go). The
scheduler turns each task's policy into a PodGroup ``subGroupPolicy`` (pkg/controllers/
job/job_controller_actions.go ``getSubGroupPolicy``): one sub-job per partition, ready
only when all ``partitionSize`` pods are allocated (pkg/scheduler/api/sub_job_info.go
``MinAvailable = SubGroupSize``), so a partition is placed whole or not at all; with a
hard ``networkTopology`` its pods sit inside one HyperNode of tier <= its limit, within
the HyperNode the job as a whole was given (pkg/scheduler/actions/allocate
``allocateForJob`` -> ``allocateForSubJob``). ``minPartitions`` is how many partitions
must be ready for the job to run (``MinSubGroups``; gang ``CheckSubJobReady``); the
mutating webhook makes the task's ``minAvailable`` ``minPartitions x partitionSize`` when
it is not given, and the validating webhook refuses a ``minAvailable`` that differs
(pkg/webhooks/admission/jobs/{mutate,validate}). The policy itself is
``jobs.PartitionPolicy``; the HyperNodes a partition may use are found here, shared by
the planner (placement/partitions.py) and the agent (agents/core/binding.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from federation.domain.errors import require
from federation.domain.topology import Domain, HyperNodeTree

if TYPE_CHECKING:  # annotations only: jobs.py, which defines the policy, imports this module
    from federation.domain.jobs import Job, PartitionPolicy

PodKey = tuple[str, int]


def check_partition_policy(policy: PartitionPolicy, replicas: int, min_available: int | None) -> None:
    """Volcano's admission rules for a task's policy (validatePartitionPolicy): the
    partitions cover the replicas exactly, and an explicit ``minAvailable`` agrees with
    ``minPartitions`` when that is set. Paths are relative to the task."""
    require(policy.replicas == replicas, "partitionPolicy", f"totalPartitions x partitionSize "
            f"({policy.total_partitions} x {policy.partition_size} = {policy.replicas}) must equal replicas "
            f"({replicas})")
    if policy.min_partitions > 0 and min_available is not None:
        want = policy.min_partitions * policy.partition_size
        require(min_available == want, "minAvailable", f"must equal minPartitions x partitionSize ({want}) "
                "when partitionPolicy.minPartitions is set (Volcano's job admission)")


def partition_cap(policy: PartitionPolicy, tree: HyperNodeTree) -> int | None:
    """The hard tier limit of each partition in this cluster (None: none). As for a job,
    ``highestTierName`` resolves per cluster and a tree without that tierName sets none."""
    nt = policy.network_topology
    if nt is None or not nt.hard:
        return None
    if nt.highest_tier_allowed is not None:
        return nt.highest_tier_allowed
    return tree.tier_for_name(nt.highest_tier_name) if nt.highest_tier_name is not None else None


def partition_groups(job: Job, pods: Iterable[PodKey]) -> dict[tuple[str, int], list[PodKey]]:
    """``pods`` of partitioned tasks grouped by (task, partition), in task then partition order."""
    policies = {t.name: t.partition_policy for t in job.tasks}
    order = {t.name: i for i, t in enumerate(job.tasks)}
    out: dict[tuple[str, int], list[PodKey]] = {}
    for task, index in sorted(pods, key=lambda k: (order.get(k[0], 0), k[1])):
        policy = policies.get(task)
        if policy is not None:
            out.setdefault((task, policy.partition_of(index)), []).append((task, index))
    return out


def homes(tree: HyperNodeTree, domain: Domain, cap: int | None, holding: Iterable[str] = ()) -> list[Domain]:
    """HyperNodes a partition may sit in: ``domain`` or one below it, of tier <= ``cap``,
    holding the nodes in ``holding``; lowest tier first (then smallest, then name)."""
    need = frozenset(holding)

    def may_hold(d: Domain) -> bool:
        return (cap is None or d.tier <= cap) and need <= d.nodes

    below = [d for d in tree.by_tier if d.nodes <= domain.nodes and may_hold(d)]
    # ``domain`` is among ``below`` when the tree holds it; otherwise it is a home of its own.
    return below + ([domain] if domain.name not in tree.domains and may_hold(domain) else [])
