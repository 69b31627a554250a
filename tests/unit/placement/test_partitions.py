"""Volcano task partitionPolicy: each partition placed whole, with a hard limit inside one
HyperNode of its tier, inside the HyperNode the gang was given. The packer (table), the
check ``validate()`` applies, and every planner on Volcano's own guide example."""

from __future__ import annotations

import pytest
from placement_builders import snap
from test_elastic_gangs import PLANNERS, guide_tree, run

from federation.domain import Job, NetworkTopology, Plan, Resources, Task
from federation.domain.jobs import PartitionPolicy
from federation.domain.plans import Placement, PodAssignment
from federation.placement import validate
from federation.placement.packing import pack_vectors, resource_keys, vector
from federation.placement.partitions import pack_partitioned, partition_problems

HARD1 = NetworkTopology("hard", 1)
HARD2 = NetworkTopology("hard", 2)


def partitioned_job(replicas: int = 8, size: int = 4, topology: NetworkTopology | None = HARD1,
                    job_topology: NetworkTopology | None = HARD2, **kwargs: object) -> Job:
    """volcano docs/user-guide/how_to_use_network_topology_aware_scheduling.md (partitions):
    8 pods of 4 CPUs in partitions of 4, each within tier 1, the job within tier 2."""
    policy = PartitionPolicy(replicas // size, size, network_topology=topology)
    task = Task("t0", replicas, Resources.of(cpu=4), partition_policy=policy)
    return Job("network-topology-job", "q", (task,), network_topology=job_topology, **kwargs)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


def pack(job: Job, used: dict[int, int], domain: str) -> list[str] | None:
    """``pack_partitioned`` of the job's gang into ``domain`` of the guide tree (8-CPU nodes)."""
    cluster = guide_tree(8, used)
    keys = resource_keys([job.tasks[0].resources])
    gang = job.gang_pods()
    free = {n.name: vector(n.free, keys) for n in cluster.nodes}
    return pack_partitioned(job, [(t, i) for t, i, _ in gang], [vector(r, keys) for _, _, r in gang],
                            [0] * len(gang), cluster.tree, cluster.tree.domains[domain], free,
                            {n.name: 1 for n in cluster.nodes}, 0)


def leaves_of(nodes: list[str]) -> set[str]:
    return {f"s{int(n[4:]) // 2}" for n in nodes}


# (case, replicas, size, partition topology, used CPUs per node, domain, expected leaves per partition or None)
PACKING = [
    ("each partition in a leaf of the spine", 8, 4, HARD1, {}, "s4", [{"s0"}, {"s1"}]),
    # Each leaf has room for 3 pods (node0 and node2 half used): a 3-pod partition in each,
    # where plain best fit fills the two half-used nodes first and splits both.
    ("half-used nodes in both leaves", 6, 3, HARD1, {0: 4, 2: 4}, "s4", [{"s0"}, {"s1"}]),
    ("no leaf holds a partition: none", 6, 3, HARD1, {0: 4, 1: 4}, "s4", None),
    ("soft: prefers a leaf, never blocks", 6, 3, NetworkTopology("soft", 1), {0: 4, 1: 4}, "s4", [None, None]),
    ("a limit at the domain's own tier holds anywhere in it", 6, 3, NetworkTopology("hard", 2), {0: 4, 1: 4},
     "s4", [None, None]),
    ("partitions of one pod go anywhere", 4, 1, HARD1, {}, "s0", [{"s0"}] * 4),
]


@pytest.mark.parametrize(("replicas", "size", "topology", "used", "domain", "expected"),
                         [c[1:] for c in PACKING], ids=[c[0] for c in PACKING])
def test_pack_partitioned(replicas: int, size: int, topology: NetworkTopology, used: dict[int, int], domain: str,
                          expected: list[set[str] | None] | None) -> None:
    job = partitioned_job(replicas, size, topology)
    found = pack(job, used, domain)
    if expected is None:
        assert found is None
        return
    assert found is not None and len(found) == replicas
    for part, want in enumerate(expected):
        where = leaves_of(found[part * size:(part + 1) * size])
        if want is not None:
            assert where == want
    cluster = guide_tree(8, used)
    pods = [PodAssignment("t0", i, n) for i, n in enumerate(found)]
    assert list(partition_problems("j", job, cluster.tree, pods)) == []


def test_the_plain_packer_would_split_a_partition() -> None:
    """Guards the second case: without partitions, best fit breaks them."""
    free = {"node0": 4, "node1": 8, "node2": 4, "node3": 8}
    buckets: dict[tuple[int, ...], list[str]] = {}
    for name, cpu in free.items():
        buckets.setdefault((cpu * 1000,), []).append(name)
    plain = pack_vectors([(4000,)] * 6, buckets)
    assert plain is not None
    assert not all(len(leaves_of(plain[k:k + 3])) == 1 for k in (0, 3))


PROBLEMS = [
    ("whole and in one leaf", [0, 0, 1, 1, 2, 2, 3, 3], []),
    ("a partition across two leaves", [0, 0, 1, 2, 2, 3, 3, 3], ["partition 0 of task t0 spans HyperNode s4 (tier 2)"]),
    ("a partition in part", [0, 0, 1, 1, 2, 2], ["partition 1 of task t0 has 2 of its 4 pods"]),
]


@pytest.mark.parametrize(("nodes", "expected"), [c[1:] for c in PROBLEMS], ids=[c[0] for c in PROBLEMS])
def test_validate_checks_partitions(nodes: list[int], expected: list[str]) -> None:
    job = partitioned_job(min_available=4)
    s = snap([guide_tree(16)], [job])
    pods = tuple(PodAssignment("t0", i, f"node{n}") for i, n in enumerate(nodes))
    problems = validate(s, Plan((Placement(job.name, "guide", "s4", 2, pods),)))
    assert [p for p in problems if "partition" in p] == [p for p in problems]
    assert len(problems) == len(expected) and all(want in got for want, got in zip(expected, problems, strict=True))


def test_validate_checks_a_growth_adds_whole_partitions() -> None:
    from federation.domain.plans import RunningJob
    job = partitioned_job(min_available=4)
    started = Placement(job.name, "guide", "s4", 2, tuple(PodAssignment("t0", i, f"node{i // 2}") for i in range(4)))
    s = snap([guide_tree(16)], [], runs=[RunningJob(job, started, 0.0)])
    half = Placement(job.name, "guide", "s4", 2, tuple(PodAssignment("t0", i, "node2") for i in (4, 5)))
    assert any("partition 1 of task t0 has 2 of its 4 pods" in p for p in validate(s, Plan(growths=(half,))))


@pytest.mark.parametrize("planner", PLANNERS)
def test_volcano_guide_partitions(planner: str) -> None:
    """8-CPU nodes: a leaf holds 4 pods. The rigid job runs in one spine, a partition in
    each of its leaves (every plan validated, partitions included). The baselines do not
    model partitions: they place the job only where their own packing happens to keep them."""
    result = run(planner, snap([guide_tree(8)], [partitioned_job()]))
    if planner not in ("greedy", "cpsat") and not result.placements:
        assert "does not model partitionPolicy" in result.unplaced[0].reason
        return
    (placed,) = result.placements
    assert placed.tier == 2 and len(placed.pods) == 8
    by_part = {p: leaves_of([a.node for a in placed.pods if a.index // 4 == p]) for p in (0, 1)}
    assert all(len(v) == 1 for v in by_part.values()) and by_part[0] != by_part[1]


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_an_elastic_partitioned_job_starts_whole_partitions_only(planner: str) -> None:
    # The guide's job with minAvailable 4: the gang is one partition, and the second starts
    # with it only whole inside the gang's domain. 16-CPU nodes: a leaf holds both.
    (placed,) = run(planner, snap([guide_tree(16)], [partitioned_job(min_available=4)])).placements
    assert len(placed.pods) == 8 and placed.tier == 1
    # node1 half used: the leaf has room for 6 pods, the gang and 2 of the second
    # partition, which an unpartitioned job would start (test_elastic_gangs); this one does not.
    (placed,) = run(planner, snap([guide_tree(16, {1: 8, 3: 8, 5: 8, 7: 8})],
                                  [partitioned_job(min_available=4)])).placements
    assert sorted(a.index for a in placed.pods) == [0, 1, 2, 3]


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_hard_partitions_that_fit_no_leaf_keep_the_job_pending(planner: str) -> None:
    # 16-CPU nodes; each spine has room for 8 pods, 6 in one leaf and 2 in the other: one
    # partition of 4 fits a leaf, the second does not.
    used = {0: 4, 1: 4, 2: 12, 3: 12, 4: 4, 5: 4, 6: 12, 7: 12}
    result = run(planner, snap([guide_tree(16, used)], [partitioned_job()]))
    assert result.placements == () and len(result.unplaced) == 1
    soft = run(planner, snap([guide_tree(16, used)], [partitioned_job(topology=NetworkTopology("soft", 1))]))
    assert len(soft.placements) == 1 and len(soft.placements[0].pods) == 8
    plain = run(planner, snap([guide_tree(16, used)], [partitioned_job(topology=None)]))
    assert len(plain.placements) == 1
