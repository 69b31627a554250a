"""Elastic gangs: placeable when the gang (minAvailable, each task's minAvailable) fits in one
allowed domain; as many further replicas as fit there start with it. Every planner (ours and
the baselines) on each case, every plan checked by ``validate()``."""

from __future__ import annotations

from dataclasses import replace

import pytest
from placement_builders import FAST, snap

from federation.domain import ClusterSnapshot, Job, NetworkTopology, Node, Plan, Resources, Task
from federation.domain.plans import FederationSnapshot, Placement, PodAssignment
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector
from federation.placement import greedy_plan, plan, validate
from federation.placement.baselines import POLICIES

PLANNERS = ("greedy", "cpsat", "volcano-greedy", "karmada-spread", "armada-drf")


def run(planner: str, s: FederationSnapshot) -> Plan:
    result = greedy_plan(s, FAST) if planner == "greedy" else plan(s, FAST) if planner == "cpsat" \
        else POLICIES[planner](s, FAST, None)
    assert validate(s, result) == [], validate(s, result)
    return result


def guide_tree(cpus: int, used: dict[int, int] | None = None) -> ClusterSnapshot:
    """The 8-node, 3-tier tree of Volcano's network-topology guide (s0..s3 leaves of two
    nodes, s4, s5 spines, s6 top), with ``cpus`` CPUs per node (``used[i]`` taken)."""
    used = used or {}
    alloc = Resources.of(cpu=cpus)
    nodes = tuple(Node(f"node{i}", alloc, Resources.of(cpu=cpus - used.get(i, 0))) for i in range(8))

    def spec(name: str, tier: int, members: list[tuple[str, str]]) -> HyperNodeSpec:
        return HyperNodeSpec(name, tier, tuple(HyperNodeMember(kind, MemberSelector(exact_name=m))
                                               for kind, m in members))

    leaves = [spec(f"s{j}", 1, [("Node", f"node{2 * j}"), ("Node", f"node{2 * j + 1}")]) for j in range(4)]
    spines = [spec("s4", 2, [("HyperNode", "s0"), ("HyperNode", "s1")]),
              spec("s5", 2, [("HyperNode", "s2"), ("HyperNode", "s3")])]
    return ClusterSnapshot("guide", nodes, (*leaves, *spines, spec("s6", 3, [("HyperNode", "s4"),
                                                                              ("HyperNode", "s5")])))


def guide_job(**kwargs: object) -> Job:
    """volcano docs/user-guide/how_to_use_network_topology_aware_scheduling.md: 8 replicas of
    4 CPUs, minAvailable 4, hard mode, highestTierAllowed 1."""
    fields: dict[str, object] = {"min_available": 4, "network_topology": NetworkTopology("hard", 1)}
    fields.update(kwargs)
    return Job("network-topology-job", "q", (Task("t0", 8, Resources.of(cpu=4)),), **fields)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


def leaf_of(p: Placement) -> str:
    return p.hypernode


@pytest.mark.parametrize("planner", PLANNERS)
def test_volcano_guide_example_runs_four_pods_in_one_leaf(planner: str) -> None:
    # 8-CPU nodes: a leaf holds 4 pods of 4 CPUs, never 8, so a rigid gang is unschedulable.
    (placed,) = run(planner, snap([guide_tree(8)], [guide_job()])).placements
    assert placed.tier == 1 and leaf_of(placed) in {"s0", "s1", "s2", "s3"}
    assert len(placed.pods) == 4
    rigid = run(planner, snap([guide_tree(8)], [guide_job(min_available=None)]))
    assert rigid.placements == () and rigid.unplaced[0].unschedulable


@pytest.mark.parametrize("planner", PLANNERS)
def test_extras_start_with_the_gang_as_far_as_the_domain_has_room(planner: str) -> None:
    # 16-CPU nodes: a leaf holds all 8 pods.
    (placed,) = run(planner, snap([guide_tree(16)], [guide_job()])).placements
    assert len(placed.pods) == 8 and placed.tier == 1
    # every leaf has one node partly used: 4 + 2 pods fit, the gang of 4 plus 2 extras start
    used = {0: 8, 2: 8, 4: 8, 6: 8}
    (placed,) = run(planner, snap([guide_tree(16, used)], [guide_job()])).placements
    assert len(placed.pods) == 6 and placed.tier == 1


@pytest.mark.parametrize("planner", PLANNERS)
def test_an_elastic_gang_that_fits_no_leaf_stays_pending(planner: str) -> None:
    # 4-CPU nodes: a leaf holds 2 pods, fewer than minAvailable 4.
    result = run(planner, snap([guide_tree(4)], [guide_job()]))
    assert result.placements == ()
    (why,) = result.unplaced
    assert why.unschedulable and why.constraint in {"topology", "unschedulable"}


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_task_minimum_is_part_of_the_gang(planner: str) -> None:
    # ps needs its one pod, workers two of four: the gang is 3 pods (12 CPUs); a leaf of two
    # 8-CPU nodes holds 4 pods, so the gang and one extra worker start.
    job = Job("tf", "q", (Task("ps", 1, Resources.of(cpu=4), min_available=1),
                          Task("worker", 4, Resources.of(cpu=4), min_available=2)),
              min_available=3, network_topology=NetworkTopology("hard", 1))
    (placed,) = run(planner, snap([guide_tree(8)], [job])).placements
    tasks = [a.task for a in placed.pods]
    assert tasks.count("ps") == 1 and tasks.count("worker") == 3


def test_validate_refuses_an_elastic_placement_below_its_minimum() -> None:
    s = snap([guide_tree(8)], [guide_job()])
    pods = tuple(PodAssignment("t0", i, f"node{i // 2}") for i in range(3))
    bad = Plan((Placement("network-topology-job", "guide", "s0", 1, pods),))
    assert any("fewer than minAvailable 4" in p for p in validate(s, bad))


def test_fair_share_counts_what_an_elastic_job_runs() -> None:
    from federation.placement.ledger import QueueLedger
    job = guide_job()
    pods = tuple(PodAssignment("t0", i, f"node{i // 2}") for i in range(4))
    from federation.domain.plans import RunningJob
    s = snap([guide_tree(8)], [], runs=[RunningJob(job, Placement(job.name, "guide", "s0", 1, pods))])
    assert QueueLedger(s).usage["q"] == Resources.of(cpu=16)  # 4 pods running, not 8 replicas
    assert replace(job, min_available=None).gang_counts == (8,)


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_an_elastic_job_is_searched_after_a_rigid_one_of_the_same_tasks_failed(planner: str) -> None:
    # Same task (8 pods of 4 CPUs, hard tier 1) twice: the rigid copy (all 8 pods) fits no
    # leaf; the elastic copy needs 4 and fits one. The round's "identical gang already
    # failed" shortcut must not refuse the second without a search.
    rigid = replace(guide_job(), name="rigid", min_available=None)
    elastic = replace(guide_job(), name="elastic")
    s = snap([guide_tree(8)], [rigid, elastic])
    result = run(planner, s)
    assert result.placement("rigid") is None
    placed = result.placement("elastic")
    assert placed is not None and len(placed.pods) == 4
