"""Frozen domain types shared by every part of the federation; imports nothing of ours."""

from federation.domain.clusters import ClusterSnapshot
from federation.domain.errors import InvalidInput, require
from federation.domain.jobs import Job, LifecyclePolicy, NetworkTopology, Task
from federation.domain.nodes import Node, Taint, Toleration, untolerated
from federation.domain.plans import (
    FederationSnapshot,
    PendingJob,
    Placement,
    Plan,
    PlanLimits,
    PodAssignment,
    Preemption,
    RunningJob,
    Unplaced,
)
from federation.domain.propagation import (
    ClusterAffinity,
    ClusterAffinityTerm,
    PropagationPolicy,
    ReplicaScheduling,
    SpreadConstraint,
)
from federation.domain.queues import Queue
from federation.domain.resources import CPU, GPU, MEMORY, Resources, parse_quantity
from federation.domain.topology import Domain, HyperNodeMember, HyperNodeSpec, HyperNodeTree, MemberSelector

__all__ = [
    "CPU",
    "GPU",
    "MEMORY",
    "ClusterAffinity",
    "ClusterAffinityTerm",
    "ClusterSnapshot",
    "Domain",
    "FederationSnapshot",
    "HyperNodeMember",
    "HyperNodeSpec",
    "HyperNodeTree",
    "InvalidInput",
    "Job",
    "LifecyclePolicy",
    "MemberSelector",
    "NetworkTopology",
    "Node",
    "PendingJob",
    "Placement",
    "Plan",
    "PlanLimits",
    "PodAssignment",
    "Preemption",
    "PropagationPolicy",
    "Queue",
    "ReplicaScheduling",
    "Resources",
    "RunningJob",
    "SpreadConstraint",
    "Taint",
    "Task",
    "Toleration",
    "Unplaced",
    "parse_quantity",
    "require",
    "untolerated",
]
