"""Cluster snapshots: ``types_pb2.ClusterSnapshot`` <-> ``domain.ClusterSnapshot``.

An agent's snapshot is untrusted input: every quantity is parsed with its path
(``snapshot.nodes[3].free.memory``) and the HyperNode tree is validated as a whole by the
domain, so a bad tree is refused with a path such as
``snapshot.hyperNodes[2].spec.members[0]`` and never half-loaded (the previous valid
snapshot stays in use; the reason is shown as ``tree_error`` by ClusterService).
"""

from __future__ import annotations

import time

from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Node
from federation.domain.patterns import MatchBudget
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector
from federation.v1 import clusters_pb2, types_pb2
from federation.wire.base import (
    build,
    resources_from_proto,
    resources_to_proto,
    taint_from_proto,
    taint_to_proto,
    timestamp_from_proto,
    timestamp_to_proto,
)
from federation.wire.limits import DEFAULT_LIMITS, Limits

# CPU seconds one snapshot's regexMatch patterns may take to match its node names. A real
# tree of thousands of simple patterns over 20,000 nodes takes about 0.1 s; a few dozen
# patterns built to defeat RE2's DFA took minutes (docs/design/limits.md). Thread time, not
# wall time: another thread's load does not make a snapshot fail.
PATTERN_MATCH_CPU_SECONDS = 1.0

_MEMBER_TYPES = {types_pb2.MEMBER_TYPE_NODE: "Node", types_pb2.MEMBER_TYPE_HYPERNODE: "HyperNode"}
_MEMBER_ENUMS = {name: value for value, name in _MEMBER_TYPES.items()}


def node_to_proto(node: Node) -> types_pb2.Node:
    return types_pb2.Node(
        name=node.name, allocatable=resources_to_proto(node.allocatable), free=resources_to_proto(node.free),
        labels=dict(node.labels), taints=[taint_to_proto(t) for t in node.taints],
        ready=node.ready, unschedulable=node.unschedulable,
    )


def node_from_proto(msg: types_pb2.Node, path: str) -> Node:
    return build(
        path, Node,
        name=msg.name,
        allocatable=resources_from_proto(msg.allocatable, f"{path}.allocatable"),
        free=resources_from_proto(msg.free, f"{path}.free"),
        labels=dict(sorted(msg.labels.items())),
        taints=tuple(taint_from_proto(t, f"{path}.taints[{i}]") for i, t in enumerate(msg.taints)),
        ready=msg.ready,
        unschedulable=msg.unschedulable,
    )


def hypernode_to_proto(spec: HyperNodeSpec) -> types_pb2.HyperNode:
    msg = types_pb2.HyperNode(name=spec.name, tier=spec.tier, tier_name=spec.tier_name)
    for member in spec.members:
        out = msg.members.add(type=_MEMBER_ENUMS[member.type])
        sel = member.selector
        if sel.exact_name is not None:
            out.exact_name = sel.exact_name
        elif sel.regex is not None:
            out.regex = sel.regex
        else:
            out.labels.SetInParent()  # an empty labelMatch is still a chosen selector
            out.labels.match_labels.update(dict(sel.labels or {}))
    return msg


def _member_from_proto(msg: types_pb2.HyperNodeMember, path: str) -> HyperNodeMember:
    which = msg.WhichOneof("selector")
    selector = build(
        path, MemberSelector,
        exact_name=msg.exact_name if which == "exact_name" else None,
        regex=msg.regex if which == "regex" else None,
        labels=dict(sorted(msg.labels.match_labels.items())) if which == "labels" else None,
    )
    return build(path, HyperNodeMember, type=_MEMBER_TYPES.get(msg.type, ""), selector=selector)


def hypernode_from_proto(msg: types_pb2.HyperNode, path: str) -> HyperNodeSpec:
    members = tuple(_member_from_proto(m, f"{path}.spec.members[{j}]") for j, m in enumerate(msg.members))
    return build(path, HyperNodeSpec, name=msg.name, tier=msg.tier, members=members, tier_name=msg.tier_name)


def snapshot_to_proto(snapshot: ClusterSnapshot) -> types_pb2.ClusterSnapshot:
    return types_pb2.ClusterSnapshot(
        cluster=snapshot.name, labels=dict(snapshot.labels), taints=[taint_to_proto(t) for t in snapshot.taints],
        nodes=[node_to_proto(n) for n in snapshot.nodes],
        hyper_nodes=[hypernode_to_proto(h) for h in snapshot.hypernodes],
        taken_at=timestamp_to_proto(snapshot.taken_at),
    )


def snapshot_from_proto(
    msg: types_pb2.ClusterSnapshot, path: str = "snapshot", *, healthy: bool = True,
    limits: Limits = DEFAULT_LIMITS,
) -> ClusterSnapshot:
    """Validate an agent's snapshot; ``healthy`` is central's view (heartbeats), not the agent's.
    ``limits`` bounds the nodes its HyperNodes select together (``Limits.max_selected_nodes``)."""
    nodes = tuple(node_from_proto(n, f"{path}.nodes[{i}]") for i, n in enumerate(msg.nodes))
    hypernodes = tuple(hypernode_from_proto(h, f"{path}.hyperNodes[{i}]") for i, h in enumerate(msg.hyper_nodes))
    taints = tuple(taint_from_proto(t, f"{path}.taints[{i}]") for i, t in enumerate(msg.taints))
    # ClusterSnapshot reports "cluster", "nodes[i].name" and the tree's "hyperNodes[i]..." paths.
    return build(
        path, ClusterSnapshot,
        name=msg.cluster, nodes=nodes, hypernodes=hypernodes, labels=dict(sorted(msg.labels.items())),
        taints=taints, healthy=healthy, taken_at=timestamp_from_proto(msg.taken_at),
        match_budget=MatchBudget(PATTERN_MATCH_CPU_SECONDS, time.thread_time),
        max_selected_nodes=limits.max_selected_nodes,
    )


def snapshot_summary_to_proto(snapshot: ClusterSnapshot, tree_error: str = "") -> clusters_pb2.SnapshotSummary:
    """The digest ClusterService shows for the last snapshot (`fedctl cluster list`)."""
    return clusters_pb2.SnapshotSummary(
        taken_at=timestamp_to_proto(snapshot.taken_at),
        nodes=len(snapshot.nodes),
        ready_nodes=sum(1 for n in snapshot.nodes if n.ready),
        allocatable=resources_to_proto(snapshot.allocatable),
        free=resources_to_proto(snapshot.free),
        hypernodes=len(snapshot.hypernodes),
        max_tier=snapshot.tree.max_tier,
        tree_error=tree_error,
    )
