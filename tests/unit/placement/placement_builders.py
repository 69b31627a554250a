"""Small, readable snapshot builders for the placement tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from federation.domain import (
    ClusterSnapshot,
    FederationSnapshot,
    Job,
    NetworkTopology,
    Node,
    PendingJob,
    Placement,
    Plan,
    PlanLimits,
    PodAssignment,
    PropagationPolicy,
    Queue,
    Resources,
    RunningJob,
    Taint,
    Toleration,
)
from federation.placement import greedy_plan, plan, validate
from tests.fixtures.instances import gang, gpu_node, tiered_cluster

# The rules alone: evict and widen at once (the shipped defaults hold both back; see
# test_placement_policy.py).
FAST = PlanLimits(time_limit_seconds=0.3, workers=1, preemption_grace_seconds=0.0, topology_wait_seconds=0.0)
R = Resources.of


def flat(name: str, free: Sequence[int], gpus: int = 8, **kwargs: object) -> ClusterSnapshot:
    """A cluster without HyperNodes; ``free[i]`` = free GPUs of node i."""
    nodes = tuple(gpu_node(f"{name}-n{i}", gpus, gpus - f) for i, f in enumerate(free))
    return ClusterSnapshot(name, nodes, **kwargs)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


def tiered(name: str, free: Sequence[int], leaf: int = 2, spine: int = 2, **kwargs: object) -> ClusterSnapshot:
    """Leaves of ``leaf`` nodes (tier 1), spines of ``spine`` leaves (tier 2), a top (tier 3)."""
    used = {i: 8 - f for i, f in enumerate(free)}
    return tiered_cluster(name, len(free), leaf=leaf, spine=spine, used=used, **kwargs)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


def job(name: str, pods: int = 1, gpus: int = 8, queue: str = "q", priority: int = 0,
        topology: NetworkTopology | None = None, **kwargs: object) -> Job:
    return gang(name, queue, pods, gpus, priority, topology, **kwargs)


def hard(tier: int | None = None, name: str | None = None) -> NetworkTopology:
    return NetworkTopology("hard", highest_tier_allowed=tier, highest_tier_name=name)


def soft(tier: int = 1) -> NetworkTopology:
    return NetworkTopology("soft", highest_tier_allowed=tier)


def running(j: Job, cluster: ClusterSnapshot, nodes: Sequence[str], started_at: float = 0.0) -> RunningJob:
    pods = tuple(PodAssignment(t, i, n) for (t, i, _), n in zip(j.pods(), nodes, strict=True))
    dom = cluster.tree.lowest_domain_holding(nodes)
    assert dom is not None
    return RunningJob(j, Placement(j.name, cluster.name, dom.name, dom.tier, pods), started_at)


def occupy(cluster: ClusterSnapshot, runs: Iterable[RunningJob]) -> ClusterSnapshot:
    """The cluster with the running jobs' pods subtracted from node free."""
    use: dict[str, Resources] = {}
    for r in runs:
        if r.placement.cluster != cluster.name:
            continue
        req = {(t, i): res for t, i, res in r.job.pods()}
        for a in r.placement.pods:
            use[a.node] = use.get(a.node, Resources()) + req[(a.task, a.index)]
    nodes = tuple(
        Node(n.name, n.allocatable, (n.free - use[n.name]) if n.name in use else n.free, n.labels, n.taints,
             n.ready, n.unschedulable)
        for n in cluster.nodes
    )
    return ClusterSnapshot(cluster.name, nodes, cluster.hypernodes, cluster.labels, cluster.taints, cluster.healthy,
                           cluster.taken_at)


def snap(clusters: Sequence[ClusterSnapshot], jobs: Sequence[Job], queues: Sequence[Queue] = (),
         runs: Sequence[RunningJob] = (), now: float = 0.0) -> FederationSnapshot:
    names = {q.name for q in queues}
    extra = sorted({j.queue for j in jobs} | {r.job.queue for r in runs} - names)
    qs = tuple(queues) + tuple(Queue(n) for n in extra if n not in names)
    cs = tuple(occupy(c, runs) for c in clusters)
    pend = tuple(PendingJob(j, float(i)) for i, j in enumerate(jobs))
    return FederationSnapshot(cs, qs, pend, tuple(runs), now)


# The shipped defaults, with a short solver budget only (what an operator gets untouched).
SHIPPED = PlanLimits(time_limit_seconds=0.3, workers=1)


def checked(planner: str, s: FederationSnapshot, limits: PlanLimits = FAST) -> Plan:
    """Run a planner and assert its plan is valid."""
    result = greedy_plan(s, limits) if planner == "greedy" else plan(s, limits)
    problems = validate(s, result)
    assert problems == [], problems
    return result


def why(result: Plan, name: str) -> str | None:
    for u in result.unplaced:
        if u.job == name:
            return u.constraint
    return None


__all__ = [
    "FAST", "NetworkTopology", "PropagationPolicy", "Queue", "R", "Taint", "Toleration", "checked", "flat", "hard",
    "job", "occupy", "running", "snap", "soft", "tiered", "why",
]
