"""The snapshot message an agent sends: built from the cluster, invalid trees included.

A valid snapshot is converted as is. When the HyperNode tree is invalid the agent still
sends the cluster as it sees it (nodes with free resources, the HyperNode objects as
read): central validates every snapshot at its edge, refuses this one with the field
path and rule (``Ack{what: "snapshot-rejected"}``), records the reason for
``fedctl cluster list`` and keeps planning on the last valid snapshot. Doing the refusal
in one place (central) keeps the rule and the message identical for every agent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from agents.backend import ClusterBackend
from agents.core.snapshot import build_snapshot, to_nodes
from federation.domain.topology import HyperNodeSpec, HyperNodeTree
from federation.v1 import types_pb2
from federation.wire.convert import hypernode_to_proto, node_to_proto, snapshot_to_proto, timestamp_to_proto

log = logging.getLogger(__name__)


async def snapshot_message(
    backend: ClusterBackend,
    *,
    now: float,
    label_keys: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
) -> tuple[types_pb2.ClusterSnapshot | None, HyperNodeTree | None]:
    """The message to send (None when the HyperNode objects cannot even be read) and the
    tree, when valid."""
    cluster = backend.cluster
    nodes = await backend.list_nodes()
    pods = await backend.list_pods({})
    try:
        specs: list[HyperNodeSpec] = await backend.list_hypernodes()
    except ValueError as exc:
        log.warning("agent %s: HyperNode objects unreadable, snapshot not sent: %s", cluster, exc)
        return None, None
    result = build_snapshot(cluster, nodes, pods, specs, label_keys=label_keys, now=now, labels=labels)
    if result.snapshot is not None:
        return snapshot_to_proto(result.snapshot), result.snapshot.tree
    log.warning("agent %s: %s", cluster, result.error)
    return types_pb2.ClusterSnapshot(
        cluster=cluster, labels=dict(labels or {}),
        nodes=[node_to_proto(n) for n in to_nodes(nodes, pods)],
        hyper_nodes=[hypernode_to_proto(h) for h in (*specs, *result.discovered)],
        taken_at=timestamp_to_proto(now)), None
