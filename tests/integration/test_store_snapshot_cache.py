"""The store decodes a cluster's stored snapshot once per change, on both dialects.

Every planning round reads every cluster's snapshot; decoding one re-validates and
resolves its HyperNode tree. An unchanged snapshot must come back as the object decoded
before; a changed one must be decoded again, even when the store's clock did not move
(the tests' clock is frozen: the cache is keyed by the payload's digest, not its time).
"""

from __future__ import annotations

from federation.domain import ClusterSnapshot, HyperNodeMember, HyperNodeSpec, MemberSelector, Node, Resources
from federation.store import Store


def snapshot(free_gpus: int) -> ClusterSnapshot:
    nodes = tuple(Node(f"n{i}", Resources.of(gpu=8), Resources.of(gpu=free_gpus)) for i in range(4))
    leaf = HyperNodeSpec("leaf", 1, (HyperNodeMember("Node", MemberSelector(regex="^n")),))
    return ClusterSnapshot("east", nodes, (leaf,), taken_at=1.0)


def test_unchanged_snapshots_are_not_decoded_again(store: Store) -> None:
    store.clusters.register("east", 1)
    store.clusters.record_snapshot(1, snapshot(8))
    first = store.clusters.snapshots(include_lost=True)
    again = store.clusters.snapshots(include_lost=True)
    assert again[0] is first[0] and first[0] == snapshot(8)
    assert store.clusters._decoded.decoded == 1

    store.clusters.record_snapshot(1, snapshot(2))  # same clock instant, new content
    changed = store.clusters.snapshots(include_lost=True)
    assert changed[0] == snapshot(2) and changed[0].nodes[0].free == Resources.of(gpu=2)
    assert store.clusters._decoded.decoded == 2
    assert store.clusters.list()[0].summary is not None  # listings no longer load the JSON, still summarise
