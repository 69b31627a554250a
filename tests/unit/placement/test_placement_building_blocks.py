"""Tables for the building blocks the simulator reuses: packing, eligibility, fair share."""

from __future__ import annotations

import pytest
from placement_builders import R, flat, hard, job, snap, soft, tiered

from federation.domain import (
    ClusterAffinity,
    ClusterAffinityTerm,
    ClusterSnapshot,
    Node,
    PropagationPolicy,
    Queue,
    Taint,
    Toleration,
)
from federation.placement.eligibility import (
    allowed_clusters,
    candidate_domains,
    lowest_feasible_tier,
    tier_limit,
    usable_nodes,
)
from federation.placement.fairshare import dominant_share, fair_shares
from federation.placement.packing import pack_gang
from tests.fixtures.instances import gpu_node

PACKING = [
    # id, per-node free GPUs, pod GPU sizes, packs?
    ("two-8gpu-pods-on-two-empty-nodes", [8, 8], [8, 8], True),
    ("summed-16-free-as-4x4-is-not-enough", [4, 4, 4, 4], [8, 8], False),
    ("mixed-pods-best-fit-decreasing", [8, 4, 2], [4, 2, 8], True),
    ("one-pod-too-many", [8, 8], [8, 8, 1], False),
    ("small-pods-share-a-node", [8], [2, 2, 4], True),
    ("empty-gang-trivially-packs", [8], [], True),
]


@pytest.mark.parametrize(("free", "sizes", "packs"), [c[1:] for c in PACKING], ids=[c[0] for c in PACKING])
def test_pack_gang(free: list[int], sizes: list[int], packs: bool) -> None:
    nodes = [gpu_node(f"n{i}", 8, 8 - f) for i, f in enumerate(free)]
    pods = [("w", i, R(gpu=g)) for i, g in enumerate(sizes)]
    result = pack_gang(pods, nodes, {})
    assert (result is not None) is packs
    if result is not None:
        used: dict[str, int] = {}
        for a, (_, _, res) in zip(result, pods, strict=True):
            used[a.node] = used.get(a.node, 0) + res.gpus
        assert all(used[n.name] <= n.free.gpus for n in nodes if n.name in used)
        assert [(a.task, a.index) for a in result] == [(t, i) for t, i, _ in pods]


def test_pack_gang_uses_free_override() -> None:
    nodes = [gpu_node("n0"), gpu_node("n1")]
    assert pack_gang([("w", 0, R(gpu=8))], nodes, {"n0": R(gpu=0), "n1": R(gpu=0)}) is None


def _affinity(*names: str) -> PropagationPolicy:
    return PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=names))


ELIGIBILITY = [
    ("no-policy-any-healthy-cluster", None, [["a", "b"]]),
    ("cluster-names", _affinity("b"), [["b"]]),
    ("exclude", PropagationPolicy(cluster_affinity=ClusterAffinity(exclude=("a",))), [["b"]]),
    ("ordered-fallback-groups", PropagationPolicy(cluster_affinities=(
        ClusterAffinityTerm("first", ClusterAffinity(cluster_names=("b",))),
        ClusterAffinityTerm("then", ClusterAffinity(cluster_names=("a", "b"))))), [["b"], ["a", "b"]]),
    ("tainted-cluster-needs-toleration", PropagationPolicy(cluster_tolerations=(Toleration("t", "Exists"),)),
     [["a", "b", "t"]]),
]


@pytest.mark.parametrize(("policy", "groups"), [c[1:] for c in ELIGIBILITY], ids=[c[0] for c in ELIGIBILITY])
def test_allowed_clusters(policy: PropagationPolicy | None, groups: list[list[str]]) -> None:
    s = snap([flat("a", [8]), flat("b", [8]), flat("t", [8], taints=(Taint("t"),)), flat("sick", [8], healthy=False)],
             [job("j", propagation=policy)])
    got = [[c.name for c in g] for g in allowed_clusters(s.pending[0].job, s)]
    assert got == groups


def test_usable_nodes_skip_unready_cordoned_and_untolerated() -> None:
    base = gpu_node("n0")
    nodes = (
        base,
        Node("n1", base.allocatable, base.free, ready=False),
        Node("n2", base.allocatable, base.free, unschedulable=True),
        Node("n3", base.allocatable, base.free, taints=(Taint("x"),)),
        Node("n4", base.allocatable, base.free, taints=(Taint("x", effect="PreferNoSchedule"),)),
    )
    c = ClusterSnapshot("a", nodes)
    assert [n.name for n in usable_nodes(c, job("j"))] == ["n0", "n4"]
    tolerant = job("j", tolerations=(Toleration("x", "Exists"),))
    assert [n.name for n in usable_nodes(c, tolerant)] == ["n0", "n3", "n4"]


TIERS = [
    ("no-topology-no-limit", None, None),
    ("soft-has-no-hard-limit", soft(1), None),
    ("hard-tier-allowed", hard(2), 2),
    ("hard-tier-name-resolved", hard(name="spine"), 2),
    ("hard-unknown-tier-name-no-limit", hard(name="nope"), None),
]


@pytest.mark.parametrize(("topology", "limit"), [c[1:] for c in TIERS], ids=[c[0] for c in TIERS])
def test_tier_limit(topology: object, limit: int | None) -> None:
    c = tiered("a", [8] * 8)
    assert tier_limit(job("j", 2, topology=topology), c) == limit  # type: ignore[arg-type]  # parametrised topology values include deliberately untyped ones


def test_candidate_domains_lowest_tier_first_within_limit() -> None:
    c = tiered("a", [8] * 8)
    tiers = [d.tier for d in candidate_domains(job("j", 2, topology=hard(2)), c)]
    assert tiers == sorted(tiers) and max(tiers) == 2 and tiers[0] == 1
    assert max(d.tier for d in candidate_domains(job("j", 2), c)) == 3


LOWEST = [
    ("two-pods-fit-a-leaf", 2, 1),
    ("three-pods-need-a-spine", 3, 2),
    ("five-pods-need-the-top", 5, 3),
    ("nine-pods-never-fit", 9, None),
]


@pytest.mark.parametrize(("pods", "tier"), [c[1:] for c in LOWEST], ids=[c[0] for c in LOWEST])
def test_lowest_feasible_tier_of_an_empty_cluster(pods: int, tier: int | None) -> None:
    busy = tiered("a", [0] * 8)  # full now: the answer is about the EMPTY cluster
    assert lowest_feasible_tier(job("j", pods), busy) == tier


FAIR = [
    # id, queues, demand GPUs, capacity GPUs, expected shares
    ("equal-weights-split-evenly", [Queue("a"), Queue("b")], {"a": 100, "b": 100}, 100, {"a": 0.5, "b": 0.5}),
    ("weights-split-proportionally", [Queue("a", weight=1), Queue("b", weight=3)], {"a": 100, "b": 100}, 100,
     {"a": 0.25, "b": 0.75}),
    ("capped-by-demand-rest-flows-on", [Queue("a"), Queue("b")], {"a": 10, "b": 100}, 100, {"a": 0.1, "b": 0.9}),
    ("capped-by-capability", [Queue("a", capability=R(gpu=20)), Queue("b")], {"a": 100, "b": 100}, 100,
     {"a": 0.2, "b": 0.8}),
    ("floored-by-guarantee", [Queue("a", weight=1, guarantee=R(gpu=60)), Queue("b", weight=9)],
     {"a": 100, "b": 100}, 100, {"a": 0.6, "b": 0.4}),
    ("no-demand-no-share", [Queue("a"), Queue("b")], {"a": 50}, 100, {"a": 0.5, "b": 0.0}),
]


@pytest.mark.parametrize(("queues", "demand", "capacity", "expected"), [c[1:] for c in FAIR],
                         ids=[c[0] for c in FAIR])
def test_fair_shares(queues: list[Queue], demand: dict[str, int], capacity: int, expected: dict[str, float]) -> None:
    got = fair_shares(queues, {k: R(gpu=v) for k, v in demand.items()}, R(gpu=capacity))
    assert got == pytest.approx(expected, abs=1e-6)


def test_dominant_share_takes_the_scarcest_resource() -> None:
    assert dominant_share(R(gpu=4, cpu=1000), R(gpu=8, cpu=100_000)) == 0.5
