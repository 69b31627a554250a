"""What the garbage collector walks in the central service, and that it still frees cycles.

``service/heap.py`` spaces full collections out and the store decodes shared resource
vectors; neither may keep cyclic garbage alive for good (docs/benchmarks.md, "Central
event loop under a large fleet", twenty-seventh stop).
"""

from __future__ import annotations

import collections
import gc
import json
from collections.abc import Iterator

import pytest

from federation.domain.plans import Placement, Plan, PodAssignment
from federation.domain.resources import CPU, GPU, Resources
from federation.service.heap import FULL_COLLECTION_EVERY, space_full_collections
from federation.store.clusters import SnapshotCache
from federation.store.codec import job_from_json, job_to_json, snapshot_from_json, snapshot_to_json
from tests.fixtures.instances import gang, tiered_cluster


@pytest.fixture
def collector() -> Iterator[None]:
    """CPython's default thresholds, then the service's; the test's process gets its own back."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    space_full_collections()
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def test_full_collections_are_considered_a_tenth_as_often_and_young_ones_as_before(collector: None) -> None:
    assert gc.get_threshold() == (700, 10, FULL_COLLECTION_EVERY) == (700, 10, 100)


def test_a_snapshot_read_back_from_the_store_shares_one_vector_per_distinct_value() -> None:
    stored = json.loads(json.dumps(snapshot_to_json(tiered_cluster("east", 40, used={3: 4}))))
    decoded = snapshot_from_json(stored)
    vectors = {id(v) for n in decoded.nodes for v in (n.allocatable, n.free)}
    assert len(vectors) == 2  # every node's allocatable (= free when empty), and node 3's free room
    assert decoded == snapshot_from_json(stored)  # by value, as before
    assert decoded.nodes[3].free == Resources({GPU: 4, CPU: 48_000, "memory": 384 << 30})


def test_jobs_read_back_from_the_store_share_their_pod_sizes() -> None:
    a, b = (job_from_json(json.loads(json.dumps(job_to_json(gang(name, "q", 2))))) for name in ("a", "b"))
    assert a.tasks[0].resources is b.tasks[0].resources
    assert a.tasks[0].resources == gang("a", "q", 2).tasks[0].resources


def test_shared_vectors_are_equal_to_built_ones_whatever_the_key_order() -> None:
    assert Resources.shared({GPU: 8, CPU: 0}) == Resources({GPU: 8}) == Resources.shared({CPU: 0, GPU: 8})
    assert Resources.shared({}) == Resources() and not Resources.shared({GPU: 0})


def _plan(round_: int, cluster: str, nodes: int) -> Plan:
    return Plan(placements=tuple(
        Placement(f"j{round_}-{i}", cluster, f"{cluster}-leaf0", 1,
                  (PodAssignment("worker", 0, f"{cluster}-n{i % nodes}"),
                   PodAssignment("worker", 1, f"{cluster}-n{(i + 1) % nodes}")))
        for i in range(200)))


def test_snapshots_and_plans_replaced_in_cycles_are_freed_under_the_service_thresholds(collector: None) -> None:
    """Replace every cluster's stored snapshot and the round's plan thousands of times, each
    pair kept a while (so it reaches the old generation) in a reference cycle, as a failed
    round's traceback holds the frame that holds its input and plan: only the collector
    can free them. Without full collections (``gc.disable()``, or thresholds that never
    reach one) what is tracked grows by every pair; with the service's thresholds it stays
    bounded and nothing is left uncollectable."""
    clusters = [tiered_cluster(f"c{c}", 4, leaf=2, spine=2) for c in range(4)]
    texts = {c.name: json.dumps(snapshot_to_json(c)) for c in clusters}
    cache = SnapshotCache()
    recent: collections.deque[dict[str, object]] = collections.deque(maxlen=50)
    gc.collect()
    baseline = len(gc.get_objects())
    full_before = gc.get_stats()[2]["collections"]
    peak = 0
    rounds = 2_500
    for i in range(rounds):
        cluster = clusters[i % len(clusters)]
        raw = texts[cluster.name].replace('"name":', f'"taken_at": {i}.0, "name":', 1)
        snapshot = cache.get(cluster.name, raw)
        failed_round: dict[str, object] = {"snapshot": snapshot, "plan": _plan(i, cluster.name, 4)}
        failed_round["frame"] = failed_round  # the cycle
        recent.append(failed_round)
        if i % 1000 == 0:
            peak = max(peak, len(gc.get_objects()) - baseline)
    del failed_round, snapshot
    grown = len(gc.get_objects()) - baseline
    assert gc.get_stats()[2]["collections"] > full_before, "no full collection ran"
    assert not gc.garbage
    # Between two chances of a full collection CPython allows 700 x 10 x FULL_COLLECTION_EVERY
    # tracked allocations (700,000); each pair is ~850 objects, so 2,500 pairs never freed
    # would be ~2,100,000.
    young, middle, full = gc.get_threshold()
    assert max(peak, grown) < 2 * young * middle * full, (peak, grown)
