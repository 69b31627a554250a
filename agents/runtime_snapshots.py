"""The snapshot message an agent sends: built from the cluster, invalid trees included.

A valid snapshot is converted as is. When the HyperNode tree is invalid the agent still
sends the cluster as it sees it (nodes with free resources, the HyperNode objects as
read): central validates every snapshot at its edge, refuses this one with the field
path and rule (``Ack{what: "snapshot-rejected"}``), records the reason for
``fedctl cluster list`` and keeps planning on the last valid snapshot. Doing the refusal
in one place (central) keeps the rule and the message identical for every agent.

The snapshot is the runtime's shared cluster view (agents/core/view.py, built off the
event loop once per revision of the backend) encoded to proto in a worker thread: at
20,000 nodes the encoding alone is about 0.4 s of CPU, which on the loop would delay the
Lease renewals that share it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from agents.backend import ClusterBackend
from agents.core.view import ClusterView, ClusterViews, read_view
from federation.domain.topology import HyperNodeTree
from federation.v1 import types_pb2
from federation.wire.convert import hypernode_to_proto, node_to_proto, snapshot_to_proto, timestamp_to_proto

log = logging.getLogger(__name__)

Message = tuple[types_pb2.ClusterSnapshot | None, HyperNodeTree | None]


def snapshot_from_view(view: ClusterView, cluster: str, *, now: float, labels: Mapping[str, str] | None) -> Message:
    """The message (None when the HyperNode objects cannot even be read) and the tree,
    when valid. Pure; runs in a worker thread."""
    if view.hypernodes is None:
        return None, None
    if view.snapshot is not None:
        msg = snapshot_to_proto(view.snapshot)  # the view's snapshot has no labels and taken_at 0
        msg.labels.update(labels or {})
        msg.taken_at.CopyFrom(timestamp_to_proto(now))
        return msg, view.snapshot.tree
    return types_pb2.ClusterSnapshot(
        cluster=cluster, labels=dict(labels or {}),
        nodes=[node_to_proto(n) for n in view.nodes],
        hyper_nodes=[hypernode_to_proto(h) for h in view.hypernodes],
        taken_at=timestamp_to_proto(now)), None


async def encode_snapshot(view: ClusterView, cluster: str, *, now: float,
                          labels: Mapping[str, str] | None = None) -> Message:
    """``snapshot_from_view`` off the event loop, with the reason logged when the
    HyperNodes are unreadable or form an invalid tree."""
    if view.hypernodes is None:
        log.warning("agent %s: HyperNode objects unreadable, snapshot not sent: %s", cluster, view.unreadable)
        return None, None
    if view.snapshot is None:
        log.warning("agent %s: %s", cluster, view.error)
    return await asyncio.to_thread(snapshot_from_view, view, cluster, now=now, labels=labels)


async def snapshot_message(
    backend: ClusterBackend,
    *,
    now: float,
    label_keys: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    views: ClusterViews | None = None,
) -> Message:
    """The message to send (None when the HyperNode objects cannot even be read) and the
    tree, when valid. ``views`` reuses the view the last pass read when nothing changed."""
    view = await views.get(backend, label_keys) if views is not None else await read_view(backend, label_keys)
    return await encode_snapshot(view, backend.cluster, now=now, labels=labels)
