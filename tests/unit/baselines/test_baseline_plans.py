"""Baselines on small cases: each behaves like the peer it models, and every plan validates.

``federation.placement.validate`` is imported lazily on purpose: the baselines were written
before it existed, and these tests must fail (not skip) if it is ever missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from federation.domain import (
    ClusterSnapshot,
    FederationSnapshot,
    Job,
    NetworkTopology,
    PendingJob,
    Placement,
    Plan,
    PlanLimits,
    PodAssignment,
    Queue,
    Resources,
    RunningJob,
)
from federation.placement.baselines import BASELINES, POLICIES
from tests.fixtures.instances import gang, synthetic, tiered_cluster

HARD1 = NetworkTopology("hard", highest_tier_allowed=1)
HARD2 = NetworkTopology("hard", highest_tier_allowed=2)


def validate(snapshot: FederationSnapshot, plan: Plan) -> list[str]:
    module = importlib.import_module("federation.placement")
    check: Callable[[FederationSnapshot, Plan], list[str]] = module.validate
    return check(snapshot, plan)


def run(policy: str, snapshot: FederationSnapshot) -> Plan:
    plan = POLICIES[policy](snapshot, PlanLimits(time_limit_seconds=0.5, workers=1), None)
    assert validate(snapshot, plan) == []
    return plan


def cluster(name: str, used: Sequence[int], leaf: int = 2) -> ClusterSnapshot:
    """Tier-1 leaves of ``leaf`` 8-GPU nodes; ``used[i]`` GPUs taken on node i."""
    return tiered_cluster(name, len(used), leaf=leaf, spine=2, used=dict(enumerate(used)))


def snap(clusters: Sequence[ClusterSnapshot], jobs: Sequence[Job], queues: Sequence[Queue] = (Queue("q"),),
         running: Sequence[RunningJob] = ()) -> FederationSnapshot:
    pending = tuple(PendingJob(j, float(i)) for i, j in enumerate(jobs))
    return FederationSnapshot(tuple(clusters), tuple(queues), pending, tuple(running))


def nodes_of(plan: Plan, job: str) -> list[str]:
    placement = plan.placement(job)
    assert placement is not None, plan.unplaced
    return sorted(p.node for p in placement.pods)


def unplaced_of(plan: Plan, job: str) -> tuple[str, str | None, bool]:
    why = next(u for u in plan.unplaced if u.job == job)
    return why.constraint, why.closest_cluster, why.unschedulable


@dataclass
class Case:
    id: str
    policy: str
    build: Callable[[], FederationSnapshot]
    expect: Callable[[Plan], None]


def _eq(actual: object, wanted: object) -> None:
    assert actual == wanted


CASES = [
    Case("volcano: hard tier 1 picks the fuller leaf by HyperNode bin-pack score", "volcano-greedy",
         lambda: snap([cluster("a", [0, 0, 0, 4])], [gang("j", "q", 1, 4, topology=HARD1)]),
         lambda p: _eq(p.placement("j").hypernode, "a-leaf1")),  # type: ignore[union-attr]  # a missing placement fails the test (AttributeError)
    Case("volcano: the next tier only when no leaf holds the gang", "volcano-greedy",
         lambda: snap([cluster("a", [0, 8, 0, 8])], [gang("j", "q", 2, 8, topology=HARD2)]),
         lambda p: _eq((p.placement("j").tier, nodes_of(p, "j")), (2, ["a-n0", "a-n2"]))),  # type: ignore[union-attr]  # a missing placement fails the test (AttributeError)
    Case("volcano: Karmada's pick is the first cluster by name with room", "volcano-greedy",
         lambda: snap([cluster("b", [0, 0, 0, 0]), cluster("a", [0, 0, 0, 0])], [gang("j", "q", 1, 8)]),
         lambda p: _eq(p.placement("j").cluster, "a")),  # type: ignore[union-attr]  # a missing placement fails the test (AttributeError)
    Case("volcano: a hard gang waits in a fragmented first cluster", "volcano-greedy",
         lambda: snap([cluster("a", [0, 8, 0, 8]), cluster("b", [0, 0, 0, 0])], [gang("j", "q", 2, 8, topology=HARD1)]),
         lambda p: _eq(unplaced_of(p, "j"), ("topology", "a", False))),
    Case("karmada: the cluster with the most available replicas wins", "karmada-spread",
         lambda: snap([cluster("a", [8, 8, 0, 0]), cluster("b", [0, 0, 0, 0])], [gang("j", "q", 1, 8)]),
         lambda p: _eq(p.placement("j").cluster, "b")),  # type: ignore[union-attr]  # a missing placement fails the test (AttributeError)
    Case("karmada: pods spread to the least allocated nodes", "karmada-spread",
         lambda: snap([cluster("a", [4, 0, 0, 4])], [gang("j", "q", 2, 4)]),
         lambda p: _eq(nodes_of(p, "j"), ["a-n1", "a-n2"])),
    Case("karmada: summed-free estimates are optimistic under fragmentation", "karmada-spread",
         lambda: snap([cluster("a", [4, 4, 4, 4]), cluster("b", [0, 8, 8, 8])], [gang("j", "q", 1, 8)]),
         lambda p: _eq(unplaced_of(p, "j"), ("capacity", "a", False))),
    Case("armada: best fit takes the node with the least room", "armada-drf",
         lambda: snap([cluster("a", [0, 6, 0, 0])], [gang("j", "q", 1, 2)]),
         lambda p: _eq(nodes_of(p, "j"), ["a-n1"])),
    Case("armada: a hard gang stays inside one HyperNode at its tier limit", "armada-drf",
         lambda: snap([cluster("a", [0, 8, 0, 0])], [gang("j", "q", 2, 8, topology=HARD1)]),
         lambda p: _eq(p.placement("j").hypernode, "a-leaf1")),  # type: ignore[union-attr]  # a missing placement fails the test (AttributeError)
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_baseline_behaviour(case: Case) -> None:
    case.expect(run(case.policy, case.build()))


def _running(job: Job, cluster: ClusterSnapshot, nodes: Sequence[str]) -> RunningJob:
    pods = tuple(PodAssignment(t, i, n) for (t, i, _), n in zip(job.pods(), nodes, strict=True))
    domain = cluster.tree.lowest_domain_holding(nodes)
    assert domain is not None
    return RunningJob(job, Placement(job.name, cluster.name, domain.name, domain.tier, pods))


def test_armada_serves_the_queue_with_the_lowest_dominant_share_first() -> None:
    busy = gang("busy", "rich", 1, 8)
    c = cluster("a", [8, 0])
    s = snap([c], [gang("r", "rich", 1, 8), gang("p", "poor", 1, 8)], (Queue("rich"), Queue("poor")),
             [_running(busy, c, ["a-n0"])])
    plan = run("armada-drf", s)
    assert plan.placement("p") is not None and plan.placement("r") is None


def test_volcano_serves_the_higher_priority_queue_first() -> None:
    s = snap([cluster("a", [0, 8])], [gang("low", "l", 1, 8), gang("high", "h", 1, 8)],
             (Queue("l"), Queue("h", priority=5)))
    plan = run("volcano-greedy", s)
    assert plan.placement("high") is not None and plan.placement("low") is None


@pytest.mark.parametrize("policy", BASELINES)
def test_a_gang_no_cluster_could_ever_hold_is_unschedulable(policy: str) -> None:
    plan = run(policy, snap([cluster("a", [0, 0, 0, 0])], [gang("huge", "q", 5, 8), gang("ok", "q", 1, 8)]))
    assert unplaced_of(plan, "huge") == ("unschedulable", None, True)
    assert plan.placement("ok") is not None


@pytest.mark.parametrize("policy", BASELINES)
def test_queue_capability_is_honoured(policy: str) -> None:
    capped = Queue("q", capability=Resources.of(gpu=8))
    first, second = gang("first", "q", 1, 8), gang("second", "q", 1, 8)
    plan = run(policy, snap([cluster("a", [0, 0, 0, 0])], [first, second], (capped,)))
    assert plan.placement("first") is not None
    assert unplaced_of(plan, "second")[0] == "queue-capability"


@pytest.mark.parametrize("policy", BASELINES)
def test_unhealthy_clusters_are_never_used(policy: str) -> None:
    down = tiered_cluster("a", 4, leaf=2, spine=2, healthy=False)
    plan = run(policy, snap([down, cluster("b", [0, 0, 0, 0])], [gang("j", "q", 2, 8)]))
    assert plan.placement("j").cluster == "b"  # type: ignore[union-attr]  # a missing placement fails the test (AttributeError)


@pytest.mark.parametrize("policy", [*BASELINES, "cpsat"])
def test_every_policy_plans_a_busy_federation_validly(policy: str) -> None:
    s = synthetic(seed=3, clusters=3, nodes=12, pending=40, queues=3)
    plan = run(policy, s)
    assert len(plan.placements) + len(plan.unplaced) == len(s.pending)
    assert all(u.reason for u in plan.unplaced)


def test_the_registry_names_the_four_bench_policies() -> None:
    assert set(POLICIES) == {"cpsat", "volcano-greedy", "karmada-spread", "armada-drf"}


@pytest.mark.parametrize("policy", BASELINES)
def test_a_gang_only_a_lost_cluster_could_hold_waits_rather_than_being_impossible(policy: str) -> None:
    lost = tiered_cluster("big", 8, leaf=4, spine=2, healthy=False)
    plan = run(policy, snap([lost, cluster("small", [0, 0])], [gang("wide", "q", 4, 8)]))
    assert unplaced_of(plan, "wide") == ("capacity", "big", False)
