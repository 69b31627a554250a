"""Synthetic federation snapshots for tests and benchmarks (deterministic by seed).

Shapes follow the issue-3 targets: clusters of eight-GPU nodes under three-tier HyperNode
trees (leaf switches of ``leaf`` nodes, spines of ``spine`` leaves, one top HyperNode),
gangs of 1..32 pods, a mix of hard/soft/no network topology, several queues and priorities.
"""

from __future__ import annotations

import random

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job, NetworkTopology, Task
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob
from federation.domain.queues import Queue
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector

GIB = 1 << 30


def gpu_node(name: str, gpus: int = 8, used: int = 0, labels: dict[str, str] | None = None) -> Node:
    alloc = Resources({GPU: gpus, CPU: 96_000, MEMORY: 768 * GIB})
    share = used / gpus if gpus else 0.0
    free = Resources({GPU: gpus - used, CPU: int(96_000 * (1 - share)), MEMORY: int(768 * GIB * (1 - share))})
    return Node(name, alloc, free, labels or {})


def tiered_cluster(
    name: str, nodes: int = 100, gpus: int = 8, leaf: int = 10, spine: int = 5,
    used: dict[int, int] | None = None, healthy: bool = True, labels: dict[str, str] | None = None,
) -> ClusterSnapshot:
    """A cluster with tier-1 leaves, tier-2 spines and a tier-3 top HyperNode."""
    used = used or {}
    members = []
    specs: list[HyperNodeSpec] = []
    leaves = (nodes + leaf - 1) // leaf
    for i in range(nodes):
        members.append(gpu_node(f"{name}-n{i}", gpus, used.get(i, 0), {"leaf": str(i // leaf)}))
    for j in range(leaves):
        sel = MemberSelector(labels={"leaf": str(j)})
        specs.append(HyperNodeSpec(f"{name}-leaf{j}", 1, (HyperNodeMember("Node", sel),), "leaf"))
    spines = (leaves + spine - 1) // spine
    for k in range(spines):
        kids = tuple(
            HyperNodeMember("HyperNode", MemberSelector(exact_name=f"{name}-leaf{j}"))
            for j in range(k * spine, min(leaves, (k + 1) * spine))
        )
        specs.append(HyperNodeSpec(f"{name}-spine{k}", 2, kids, "spine"))
    top = tuple(HyperNodeMember("HyperNode", MemberSelector(exact_name=f"{name}-spine{k}")) for k in range(spines))
    specs.append(HyperNodeSpec(f"{name}-top", 3, top, "top"))
    return ClusterSnapshot(name, tuple(members), tuple(specs), labels or {}, healthy=healthy)


def gang(
    name: str, queue: str, pods: int, gpus: int = 8, priority: int = 0,
    topology: NetworkTopology | None = None, **kwargs: object,
) -> Job:
    res = Resources({GPU: gpus, CPU: 8_000 * gpus or 4_000, MEMORY: 64 * GIB * max(gpus, 1)})
    return Job(name, queue, (Task("worker", pods, res),), priority=priority, network_topology=topology,
               **kwargs)  # type: ignore[arg-type]


SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (8, 8), (16, 8), (32, 8), (4, 4))
TOPOLOGIES = (
    None,
    NetworkTopology("hard", highest_tier_allowed=1),
    NetworkTopology("hard", highest_tier_allowed=2),
    NetworkTopology("soft", highest_tier_allowed=1),
    NetworkTopology("hard", highest_tier_name="spine"),
)


def synthetic(
    seed: int = 0, clusters: int = 100, nodes: int = 100, pending: int = 2000, queues: int = 4,
    busy: float = 0.3, priorities: int = 2,
) -> FederationSnapshot:
    """A federation of ``clusters`` three-tier clusters with ``pending`` gangs waiting."""
    rng = random.Random(seed)
    cs = []
    for c in range(clusters):
        used = {i: rng.choice((2, 4, 6, 8)) for i in range(nodes) if rng.random() < busy}
        cs.append(tiered_cluster(f"c{c}", nodes, used=used, labels={"zone": f"z{c % 3}"}))
    qs = tuple(Queue(f"q{i}", weight=1 + i % 3, priority=0) for i in range(queues))
    jobs = []
    for j in range(pending):
        pods, gpus = rng.choice(SHAPES)
        topo = rng.choice(TOPOLOGIES) if pods > 1 else None
        jobs.append(PendingJob(gang(f"j{j}", f"q{rng.randrange(queues)}", pods, gpus, rng.randrange(priorities), topo),
                               submitted_at=float(j)))
    return FederationSnapshot(tuple(cs), qs, tuple(jobs), now=float(pending))


def small(seed: int, clusters: int = 2, nodes: int = 6, pending: int = 8, running: int = 2) -> FederationSnapshot:
    """A round small enough for CP-SAT to prove optimality (optimality-gap benchmark)."""
    from federation.domain.plans import Placement, PodAssignment, RunningJob

    rng = random.Random(seed)
    cs = []
    runs: list[RunningJob] = []
    for c in range(clusters):
        used: dict[int, int] = {}
        for r in range(running if c == 0 else 0):
            i = rng.randrange(nodes)
            if i in used:
                continue
            used[i] = 8
            victim = gang(f"r{c}{r}", rng.choice(("a", "b")), 1, 8, rng.randrange(2))
            name = f"c{c}"
            leaf = i // 2
            runs.append(RunningJob(victim, Placement(victim.name, name, f"{name}-leaf{leaf}", 1,
                                                (PodAssignment("worker", 0, f"{name}-n{i}"),)), rng.uniform(0, 100)))
        for i in range(nodes):
            if i not in used and rng.random() < 0.3:
                used[i] = rng.choice((2, 4))
        cs.append(tiered_cluster(f"c{c}", nodes, leaf=2, spine=2, used=used))
    qs = (Queue("a", weight=1 + rng.randrange(2)), Queue("b", weight=1, priority=rng.randrange(2)))
    jobs = []
    for j in range(pending):
        pods, gpus = rng.choice(((1, 4), (1, 8), (2, 8), (2, 4), (3, 8), (4, 4), (4, 8)))
        topo = rng.choice(TOPOLOGIES) if pods > 1 else None
        jobs.append(PendingJob(gang(f"j{j}", rng.choice(("a", "b")), pods, gpus, rng.randrange(2), topo),
                               submitted_at=float(j)))
    return FederationSnapshot(tuple(cs), qs, tuple(jobs), tuple(runs), now=200.0)
