"""Growing a running elastic job toward ``replicas`` (placement/growth.py): it gains pods
inside the HyperNode it runs in when room appears, never moves its running pods, and never
takes room that a waiting gang of the same or a higher priority needs. Our planner and
every baseline share the step; every plan is checked by ``validate()``."""

from __future__ import annotations

from dataclasses import replace

import pytest
from placement_builders import FAST, snap
from test_elastic_gangs import guide_job, guide_tree

from federation.domain import Job, Plan, Queue, Resources, Task
from federation.domain.plans import FederationSnapshot, Placement, PodAssignment, RunningJob
from federation.placement import plan, validate
from federation.placement.baselines import POLICIES
from federation.placement.growth import grow

PLANNERS = ("cpsat", "volcano-greedy", "karmada-spread", "armada-drf")
NO_EVICTION = replace(FAST, preemption_grace_seconds=None)


def run(planner: str, s: FederationSnapshot) -> Plan:
    result = plan(s, NO_EVICTION) if planner == "cpsat" else POLICIES[planner](s, NO_EVICTION, None)
    assert validate(s, result) == [], validate(s, result)
    return result


def running_guide_job(pods: int = 4, **kwargs: object) -> RunningJob:
    """The guide's job (8 replicas, minAvailable 4) running ``pods`` pods in leaf s0, node0 first."""
    job = guide_job(**kwargs)
    assigned = tuple(PodAssignment("t0", i, "node0" if i < 4 else "node1") for i in range(pods))
    return RunningJob(job, Placement(job.name, "guide", "s0", 1, assigned))


def wide(name: str, pods: int, priority: int = 0, cpu: int = 4) -> Job:
    """A rigid gang of ``pods`` pods of ``cpu`` CPUs with no topology constraint."""
    return Job(name, "q", (Task("w", pods, Resources.of(cpu=cpu)),), priority=priority)


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_running_elastic_job_grows_into_room_in_its_own_hypernode(planner: str) -> None:
    # 16-CPU nodes: node0 holds the 4 running pods, node1 (same leaf s0) is empty.
    running = running_guide_job()
    result = run(planner, snap([guide_tree(16)], [], runs=[running]))
    (grown,) = result.growths
    assert (grown.cluster, grown.hypernode, grown.tier) == ("guide", "s0", 1)
    assert sorted(a.index for a in grown.pods) == [4, 5, 6, 7]  # only the missing pods
    assert {a.node for a in grown.pods} == {"node1"}  # inside s0; node0 is full
    assert result.placements == () and result.preemptions == ()


@pytest.mark.parametrize("planner", PLANNERS)
def test_growth_stays_inside_the_hypernode_even_when_other_leaves_are_empty(planner: str) -> None:
    # node1 holds 8 CPUs of someone else: only 2 more pods fit in s0, though s1..s3 are empty.
    running = running_guide_job()
    s = snap([guide_tree(16, {1: 8})], [], runs=[running])
    (grown,) = run(planner, s).growths
    assert len(grown.pods) == 2 and {a.node for a in grown.pods} == {"node1"}


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_full_job_or_a_full_domain_does_not_grow(planner: str) -> None:
    assert run(planner, snap([guide_tree(16)], [], runs=[running_guide_job(pods=8)])).growths == ()
    assert run(planner, snap([guide_tree(16, {1: 16})], [], runs=[running_guide_job()])).growths == ()


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("priority", [0, 5])
def test_no_growth_into_room_a_waiting_gang_of_equal_or_higher_priority_needs(planner: str, priority: int) -> None:
    # 8 pods of 12 CPUs, one per 16-CPU node: the empty cluster holds it, but node0 is taken
    # now. It waits for room in this cluster, so the elastic job (priority 0) must not take
    # node1. (Small enough for Volcano's enqueue check to admit it: 16 + 96 <= 128 CPUs.)
    running = running_guide_job()
    result = run(planner, snap([guide_tree(16)], [wide("big", 8, priority, cpu=12)], runs=[running]))
    assert result.placements == () and [u.job for u in result.unplaced] == ["big"]
    assert result.growths == ()


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_waiting_gang_of_lower_priority_does_not_stop_growth(planner: str) -> None:
    running = running_guide_job(priority=5)
    result = run(planner, snap([guide_tree(16)], [wide("big", 8, priority=0, cpu=12)], runs=[running]))
    (grown,) = result.growths
    assert len(grown.pods) == 4


@pytest.mark.parametrize("planner", PLANNERS)
def test_pending_gangs_are_served_before_growth(planner: str) -> None:
    # Only node1 has room (16 CPUs): a pending gang of 4 pods of 4 CPUs, even of a lower
    # priority, takes it; the elastic job gets nothing this round.
    running = running_guide_job(priority=5)
    full = {i: 16 for i in range(2, 8)}
    result = run(planner, snap([guide_tree(16, full)], [wide("next", 4)], runs=[running]))
    assert [p.job for p in result.placements] == ["next"] and result.growths == ()


def test_growth_stops_at_the_queue_capability() -> None:
    running = running_guide_job()
    s = snap([guide_tree(16)], [], [Queue("q", capability=Resources.of(cpu=24))], runs=[running])
    (grown,) = run("cpsat", s).growths
    assert len(grown.pods) == 2  # 16 CPUs run, 8 more allowed


def test_fair_share_counts_the_grown_pods() -> None:
    from federation.placement.ledger import QueueLedger
    running = running_guide_job()
    s = snap([guide_tree(16)], [], runs=[running])
    (grown,) = grow(s, Plan()).growths
    after = replace(running, placement=replace(running.placement, pods=running.placement.pods + grown.pods))
    assert QueueLedger(snap([guide_tree(16)], [], runs=[after])).usage["q"] == Resources.of(cpu=32)


def test_validate_refuses_a_growth_that_moves_or_repeats_running_pods() -> None:
    running = running_guide_job()
    s = snap([guide_tree(16)], [], runs=[running])
    moved = Plan(growths=(Placement(running.job.name, "guide", "s1", 1, (PodAssignment("t0", 4, "node2"),)),))
    assert any("never moved" in p for p in validate(s, moved))
    again = Plan(growths=(Placement(running.job.name, "guide", "s0", 1, (PodAssignment("t0", 0, "node1"),)),))
    assert any("not new, distinct pods" in p for p in validate(s, again))
    outside = Plan(growths=(Placement(running.job.name, "guide", "s0", 1, (PodAssignment("t0", 4, "node2"),)),))
    assert any("outside HyperNode s0" in p for p in validate(s, outside))
    crowded = Plan(growths=(Placement(running.job.name, "guide", "s0", 1,
                                      tuple(PodAssignment("t0", i, "node0") for i in range(4, 6))),))
    assert any("overcommitted" in p for p in validate(s, crowded))
    stranger = Plan(growths=(Placement("nobody", "guide", "s0", 1, (PodAssignment("t0", 4, "node1"),)),))
    assert any("not a running job" in p for p in validate(s, stranger))
    ok = Plan(growths=(Placement(running.job.name, "guide", "s0", 1, (PodAssignment("t0", 4, "node1"),)),))
    assert validate(s, ok) == []


def test_a_preempted_job_does_not_grow() -> None:
    running = running_guide_job()
    s = snap([guide_tree(16)], [], runs=[running])
    from federation.domain.plans import Preemption
    assert grow(s, Plan(preemptions=(Preemption(running.job.name, "test"),))).growths == ()
