"""Semantics table: every rule with a case that places and a case that must not.

Each case runs through BOTH the greedy planner and ``plan()`` (CP-SAT), and every plan is
checked by ``validate()`` before its expectations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from placement_builders import (
    FAST,
    SHIPPED,
    Queue,
    R,
    checked,
    flat,
    hard,
    job,
    running,
    snap,
    soft,
    tiered,
    why,
)

from federation.domain import (
    ClusterAffinity,
    ClusterAffinityTerm,
    ClusterSnapshot,
    Plan,
    PlanLimits,
    PropagationPolicy,
    Taint,
    Toleration,
)
from federation.domain.plans import FederationSnapshot


@dataclass
class Case:
    id: str
    build: Callable[[], FederationSnapshot]
    expect: Callable[[Plan], object]  # a check fails by raising; what it returns is ignored
    limits: PlanLimits = FAST


def placed_in(name: str, cluster: str | None = None, tier: int | None = None) -> Callable[[Plan], None]:
    def check(p: Plan) -> None:
        pl = p.placement(name)
        assert pl is not None, f"{name} not placed: {p.unplaced}"
        if cluster is not None:
            assert pl.cluster == cluster
        if tier is not None:
            assert pl.tier == tier
    return check


def blocked(name: str, constraint: str, unschedulable: bool | None = None) -> Callable[[Plan], None]:
    def check(p: Plan) -> None:
        assert p.placement(name) is None
        assert why(p, name) == constraint, p.unplaced
        if unschedulable is not None:
            assert next(u for u in p.unplaced if u.job == name).unschedulable is unschedulable
    return check


def both(*checks: Callable[[Plan], None]) -> Callable[[Plan], None]:
    def check(p: Plan) -> None:
        for c in checks:
            c(p)
    return check


def affinity(*names: str) -> PropagationPolicy:
    return PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=names))


def fallback(*groups: tuple[str, ...]) -> PropagationPolicy:
    return PropagationPolicy(cluster_affinities=tuple(
        ClusterAffinityTerm(f"g{i}", ClusterAffinity(cluster_names=g)) for i, g in enumerate(groups)))


def _preempt(victim_prio: int) -> FederationSnapshot:
    c = flat("a", [8, 8])
    low = job("low", 2, queue="q", priority=victim_prio)
    run = running(low, c, ["a-n0", "a-n1"], started_at=0.0)
    return snap([c], [job("high", 2, queue="q", priority=5)], runs=[run], now=3600.0)


def _cheapest() -> FederationSnapshot:
    c = flat("a", [8, 8])
    old = running(job("old", 1, priority=0), c, ["a-n0"], started_at=0.0)
    new = running(job("new", 1, priority=0), c, ["a-n1"], started_at=3000.0)
    return snap([c], [job("high", 1, priority=5)], runs=[old, new], now=3600.0)


def _capability_room() -> FederationSnapshot:
    """Room on nodes, none in the quota: placing ``big`` needs ``small`` stopped."""
    c = flat("a", [8, 8, 8])
    run = running(job("small", 1, 4, queue="a", priority=0), c, ["a-n2"])
    return snap([c], [job("big", 2, queue="a", priority=2)], [Queue("a", capability=R(gpu=16))], runs=[run], now=60.0)


def _reclaim(reclaimable: bool) -> FederationSnapshot:
    c = flat("a", [8, 8])
    hog = [running(job(f"hog{i}", 1, queue="a"), c, [f"a-n{i}"]) for i in range(2)]
    qs = [Queue("a", reclaimable=reclaimable), Queue("b")]
    return snap([c], [job("b1", 1, queue="b")], qs, runs=hog, now=60.0)


CASES = [
    # gang all-or-nothing with pod-level packing
    Case("gang-packs-on-two-empty-nodes", lambda: snap([flat("a", [8, 8])], [job("g", 2)]), placed_in("g", "a")),
    Case("gang-blocked-when-16-free-gpus-are-4-per-node",
         lambda: snap([flat("a", [4, 4, 4, 4])], [job("g", 2)]), blocked("g", "capacity", False)),
    Case("gang-never-spans-clusters", lambda: snap([flat("a", [8, 0]), flat("b", [8, 0])], [job("g", 2)]),
         blocked("g", "capacity")),
    Case("min-available-below-replicas-places-all-replicas",
         lambda: snap([flat("a", [8, 8, 8])], [job("g", 3, min_available=2)]),
         lambda p: (placed_in("g")(p),
                    len(getattr(p.placement("g"), "pods", ())) == 3 or pytest.fail("not all replicas"))),
    # network topology
    Case("hard-tier1-fits-a-leaf", lambda: snap([tiered("a", [8, 8, 8, 8])], [job("g", 2, topology=hard(1))]),
         placed_in("g", "a", 1)),
    Case("hard-tier1-blocked-when-only-split-across-leaves",
         lambda: snap([tiered("a", [8, 0, 8, 0])], [job("g", 2, topology=hard(1))]), blocked("g", "topology", False)),
    Case("hard-tier1-unschedulable-when-no-leaf-is-big-enough",
         lambda: snap([tiered("a", [8, 8, 8, 8])], [job("g", 3, topology=hard(1))]),
         blocked("g", "topology", True)),
    Case("hard-tier-name-resolved-per-cluster",
         lambda: snap([tiered("a", [8, 0, 8, 0])], [job("g", 2, topology=hard(name="spine"))]),
         placed_in("g", "a", 2)),
    Case("hard-tier-name-unknown-applies-no-limit",
         lambda: snap([flat("a", [8, 8])], [job("g", 2, topology=hard(name="spine"))]), placed_in("g", "a", 1)),
    Case("soft-prefers-leaf", lambda: snap([tiered("a", [8, 8, 8, 0])], [job("g", 2, topology=soft(1))]),
         placed_in("g", "a", 1)),
    # shipped defaults (Volcano semantics): nothing is held back for a lower tier
    Case("soft-never-blocks", lambda: snap([tiered("a", [8, 0, 8, 0])], [job("g", 2, topology=soft(1))]),
         placed_in("g", "a", 2), SHIPPED),
    Case("hard-takes-any-tier-within-its-limit",
         lambda: snap([tiered("a", [8, 0, 8, 0])], [job("g", 2, topology=hard(2))]), placed_in("g", "a", 2), SHIPPED),
    Case("no-topology-never-waits",
         lambda: snap([tiered("a", [8, 0, 8, 0])], [job("g", 2)]), placed_in("g", "a", 2), SHIPPED),
    Case("no-topology-still-prefers-lower-tier",
         lambda: snap([tiered("a", [8, 0, 8, 8])], [job("g", 2)]), placed_in("g", "a", 1)),
    Case("flat-cluster-is-one-tier1-domain", lambda: snap([flat("a", [8, 8])], [job("g", 2, topology=hard(1))]),
         placed_in("g", "a", 1)),
    # priority
    Case("queue-priority-before-job-priority",
         lambda: snap([flat("a", [8])], [job("lo", queue="low", priority=100), job("hi", queue="high")],
                      [Queue("high", priority=1), Queue("low")]),
         both(placed_in("hi"), blocked("lo", "priority"))),
    Case("job-priority-within-queue",
         lambda: snap([flat("a", [8])], [job("j0", priority=0), job("j9", priority=9)]),
         both(placed_in("j9"), blocked("j0", "priority"))),
    # fairness
    Case("drf-prefers-the-queue-under-its-share",
         lambda: snap([flat("a", [8, 8])], [job("a2", queue="a"), job("b1", queue="b"), job("b2", queue="b")],
                      runs=[running(job("a1", queue="a"), flat("a", [8, 8]), ["a-n1"])]),
         both(placed_in("b1"), blocked("a2", "priority"))),
    Case("capability-caps-a-queue",
         lambda: snap([flat("a", [8, 8])], [job("j1", queue="q"), job("j2", queue="q")],
                      [Queue("q", capability=R(gpu=8))]),
         both(placed_in("j1"), blocked("j2", "queue-capability"))),
    Case("guarantee-is-never-lent",
         lambda: snap([flat("a", [8])], [job("b1", queue="b")], [Queue("a", guarantee=R(gpu=8)), Queue("b")]),
         blocked("b1", "fairness")),
    Case("guarantee-owner-may-use-it",
         lambda: snap([flat("a", [8])], [job("a1", queue="a")], [Queue("a", guarantee=R(gpu=8)), Queue("b")]),
         placed_in("a1")),
    # preemption and reclaim
    Case("preempts-lower-priority-gang-of-same-queue", lambda: _preempt(0),
         lambda p: (placed_in("high")(p), [v.job for v in p.preemptions] == ["low"] or pytest.fail("victim"))),
    Case("eviction-for-queue-capability-room-is-kept", _capability_room,
         lambda p: p.placement("big") is None or [v.job for v in p.preemptions] == ["small"]
         or pytest.fail(str(p.preemptions))),
    Case("never-preempts-equal-priority", lambda: _preempt(5),
         lambda p: (blocked("high", "capacity")(p), not p.preemptions or pytest.fail("preempted"))),
    Case("preempts-the-victim-that-ran-least", _cheapest,
         lambda p: [v.job for v in p.preemptions] == ["new"] or pytest.fail(str(p.preemptions))),
    Case("reclaims-from-queue-above-fair-share", lambda: _reclaim(True),
         lambda p: (placed_in("b1")(p), len(p.preemptions) == 1 or pytest.fail("no reclaim"))),
    Case("no-reclaim-from-non-reclaimable-queue", lambda: _reclaim(False),
         lambda p: (blocked("b1", "capacity")(p), not p.preemptions or pytest.fail("reclaimed"))),
    # cluster affinity, fallback, taints
    Case("affinity-picks-the-named-cluster",
         lambda: snap([flat("a", [8]), flat("b", [8])], [job("g", propagation=affinity("b"))]), placed_in("g", "b")),
    Case("affinity-blocks-when-named-cluster-is-full",
         lambda: snap([flat("a", [8]), flat("b", [0])], [job("g", propagation=affinity("b"))]),
         blocked("g", "affinity")),
    Case("affinities-fall-back-to-next-group",
         lambda: snap([flat("a", [0]), flat("b", [8])], [job("g", propagation=fallback(("a",), ("b",)))]),
         placed_in("g", "b")),
    Case("affinities-use-first-group-when-it-has-room",
         lambda: snap([flat("b", [8, 8]), flat("a", [8])], [job("g", propagation=fallback(("a",), ("b",)))]),
         placed_in("g", "a")),
    Case("cluster-taint-blocks-untolerating-job",
         lambda: snap([flat("a", [8], taints=(Taint("gpu", "h100"),))], [job("g")]), blocked("g", "taints", True)),
    Case("cluster-taint-tolerated",
         lambda: snap([flat("a", [8], taints=(Taint("gpu", "h100"),))],
                      [job("g", propagation=PropagationPolicy(cluster_tolerations=(Toleration("gpu", "Exists"),)))]),
         placed_in("g", "a")),
    Case("node-taint-blocks-untolerating-pods",
         lambda: snap([_tainted_node()], [job("g")]), blocked("g", "node-constraints", True)),
    Case("node-taint-tolerated-by-pods",
         lambda: snap([_tainted_node()], [job("g", tolerations=(Toleration("dedicated", "Exists"),))]),
         placed_in("g", "a")),
    # health
    Case("unhealthy-cluster-never-used",
         lambda: snap([flat("a", [8], healthy=False), flat("b", [0])], [job("g")]), blocked("g", "capacity")),
    Case("not-ready-and-cordoned-nodes-never-used", lambda: snap([_sick_nodes()], [job("g", 2)]),
         blocked("g", "unschedulable", True)),
    Case("unschedulable-when-bigger-than-any-cluster",
         lambda: snap([flat("a", [8, 8])], [job("g", 3)]), blocked("g", "unschedulable", True)),
]


def _tainted_node() -> ClusterSnapshot:
    from federation.domain import Node
    from tests.fixtures.instances import gpu_node
    n = gpu_node("a-n0")
    return ClusterSnapshot("a", (Node(n.name, n.allocatable, n.free, taints=(Taint("dedicated", "x"),)),))


def _sick_nodes() -> ClusterSnapshot:
    from federation.domain import Node
    from tests.fixtures.instances import gpu_node
    a, b, c = gpu_node("a-n0"), gpu_node("a-n1"), gpu_node("a-n2")
    return ClusterSnapshot("a", (Node(a.name, a.allocatable, a.free, ready=False),
                                 Node(b.name, b.allocatable, b.free, unschedulable=True), c))


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_semantics(case: Case, planner: str) -> None:
    result = checked(planner, case.build(), case.limits)
    case.expect(result)
