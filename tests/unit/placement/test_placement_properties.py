"""Generated rounds: CP-SAT plans are valid and never score below the greedy plan.

Also multi-round consistency: what one round places runs in the next and is never moved
(only a preemption may stop it).
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from placement_builders import FAST, Queue, R, flat, hard, job, occupy, running, snap, soft, tiered

from federation.domain import ClusterSnapshot, FederationSnapshot, Plan, Resources, RunningJob
from federation.domain.plans import PendingJob
from federation.placement import greedy_plan, plan, score, score_vector, validate

TOPOLOGIES = [None, hard(1), hard(2), soft(1), hard(name="spine")]


@st.composite
def rounds(draw: st.DrawFn) -> FederationSnapshot:
    clusters = []
    for i in range(draw(st.integers(1, 3))):
        free = draw(st.lists(st.sampled_from([0, 2, 4, 8, 8]), min_size=2, max_size=6))
        if draw(st.booleans()) and len(free) >= 4:
            clusters.append(tiered(f"c{i}", free))
        else:
            clusters.append(flat(f"c{i}", free))
    queues = [
        Queue("a", weight=draw(st.integers(1, 3)), priority=draw(st.integers(0, 1)),
              capability=draw(st.sampled_from([None, R(gpu=16), R(gpu=32)]))),
        Queue("b", weight=draw(st.integers(1, 3)), guarantee=draw(st.sampled_from([R(), R(gpu=8)])),
              reclaimable=draw(st.booleans())),
    ]
    jobs = []
    for j in range(draw(st.integers(1, 8))):
        pods = draw(st.integers(1, 4))
        jobs.append(job(f"j{j}", pods, draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from(["a", "b"])),
                        draw(st.integers(0, 2)), draw(st.sampled_from(TOPOLOGIES)) if pods > 1 else None))
    runs: list[RunningJob] = []
    for r in range(draw(st.integers(0, 2))):
        c = clusters[draw(st.integers(0, len(clusters) - 1))]
        node = next((n for n in occupy(c, runs).nodes if n.free.gpus >= 4), None)
        if node is not None:
            runs.append(running(job(f"r{r}", 1, 4, draw(st.sampled_from(["a", "b"])), draw(st.integers(0, 2))), c,
                                [node.name], started_at=float(r)))
    return snap(clusters, jobs, queues, runs, now=100.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_cpsat_plans_are_valid_and_never_worse_than_greedy(s: FederationSnapshot) -> None:
    g = greedy_plan(s, FAST)
    p = plan(s, FAST)
    assert validate(s, g) == []
    assert validate(s, p) == []
    assert score_vector(s, p) >= score_vector(s, g)
    assert score(s, p) >= score(s, g)


def advance(s: FederationSnapshot, p: Plan, arrivals: list[PendingJob], now: float) -> FederationSnapshot:
    """The next round: placements start running, preempted gangs stop, arrivals join."""
    jobs = {x.job.name: x.job for x in s.pending}
    gone = {v.job for v in p.preemptions}
    runs = [r for r in s.running if r.job.name not in gone]
    started = [RunningJob(jobs[pl.job], pl, now) for pl in p.placements]
    base = [c for c in _free_clusters(s)]
    left = [x for x in s.pending if p.placement(x.job.name) is None]
    return FederationSnapshot(tuple(occupy(c, runs + started) for c in base), s.queues,
                              tuple(left) + tuple(arrivals), tuple(runs + started), now)


def _free_clusters(s: FederationSnapshot) -> list[ClusterSnapshot]:
    """The clusters as they were before any running job (inverse of ``occupy``)."""
    from federation.domain import Node
    used: dict[tuple[str, str], Resources] = {}
    for r in s.running:
        req = {(t, i): res for t, i, res in r.job.pods()}
        for a in r.placement.pods:
            key = (r.placement.cluster, a.node)
            used[key] = used.get(key, R()) + req[(a.task, a.index)]
    out = []
    for c in s.clusters:
        nodes = tuple(Node(n.name, n.allocatable, n.free + used[(c.name, n.name)] if (c.name, n.name) in used
                           else n.free, n.labels, n.taints, n.ready, n.unschedulable) for n in c.nodes)
        out.append(ClusterSnapshot(c.name, nodes, c.hypernodes, c.labels, c.taints, c.healthy, c.taken_at))
    return out


def test_running_jobs_are_never_moved_across_rounds() -> None:
    s1 = snap([tiered("a", [8, 8, 8, 8]), flat("b", [8, 8])], [job("x", 2), job("y", 2), job("z", 2, priority=0)])
    p1 = plan(s1, FAST)
    assert validate(s1, p1) == []
    s2 = advance(s1, p1, [job_pending("w", 2)], now=10.0)
    p2 = plan(s2, FAST, previous=p1)
    assert validate(s2, p2) == []
    running_names = {r.job.name for r in s2.running}
    assert not running_names & {pl.job for pl in p2.placements}
    assert not p2.preemptions  # equal priority: nothing may be stopped
    s3 = advance(s2, p2, [job_pending("urgent", 2, priority=9)], now=20.0)
    p3 = plan(s3, FAST, previous=p2)
    assert validate(s3, p3) == []
    assert p3.placement("urgent") is not None
    victims = {v.job for v in p3.preemptions}
    assert victims <= running_names | {pl.job for pl in p2.placements}
    s4 = advance(s3, p3, [], now=30.0)
    for r in s4.running:  # survivors keep exactly the placement they started with
        before = next((x for x in s3.running if x.job.name == r.job.name), None)
        if before is not None:
            assert before.placement == r.placement


def job_pending(name: str, pods: int, priority: int = 0) -> PendingJob:
    return PendingJob(job(name, pods, priority=priority), 0.0)
