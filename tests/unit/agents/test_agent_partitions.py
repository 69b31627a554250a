"""Binding a partitioned gang on the fake cluster: when the planned nodes no longer hold it,
each partition is re-packed whole inside one leaf (its hard tier 1) of the planned spine,
or the gang is not bound at all."""

from __future__ import annotations

from agentkit import LABEL_KEYS, fabric, fake, gpu, work

from agents.core.apply import apply_ops, observe_job
from agents.core.binding import bind_gang
from agents.core.operations import BindPod
from agents.core.reconcile import reconcile
from agents.fake.cluster import FakeCluster
from federation.domain.jobs import Job, NetworkTopology, PartitionPolicy, Task
from federation.domain.nodes import Node
from federation.domain.plans import PodAssignment
from federation.domain.topology import Domain, HyperNodeMember, HyperNodeSpec, MemberSelector, build_tree
from federation.domain.works import Work


def partitioned(min_available: int | None = None) -> Job:
    """4 one-node pods in 2 partitions of 2, each within tier 1 (a leaf), the job within a spine."""
    policy = PartitionPolicy(2, 2, network_topology=NetworkTopology("hard", 1))
    return Job("train", "default", (Task("worker", 4, gpu(8), partition_policy=policy),), min_available=min_available,
               network_topology=NetworkTopology("hard", 2))


def planned(j: Job) -> Work:
    """Partition 0 on n00, n01 (leaf l0), partition 1 on n04, n05 (leaf l1), spine s0."""
    return work(j, "t2-s0", (("worker", 0, "n00"), ("worker", 1, "n01"), ("worker", 2, "n04"), ("worker", 3, "n05")),
                tier=2)


async def bind(cluster: FakeCluster, w: Work) -> dict[int, str]:
    observed = await observe_job(cluster, w.name, tree=None, label_keys=LABEL_KEYS)
    result = reconcile(w, observed)
    assert (await apply_ops(cluster, result.ops)).ok
    return {int(op.name.rsplit("-", 1)[1]): op.node for op in result.ops if isinstance(op, BindPod)}


def leaf(node: str) -> int:
    return int(node[1:]) // 4  # fabric(4): four nodes per leaf


async def test_the_plan_is_kept_while_it_holds() -> None:
    assert await bind(fake(fabric(4)), planned(partitioned())) == {0: "n00", 1: "n01", 2: "n04", 3: "n05"}


async def test_a_partition_that_lost_its_leaf_moves_whole_to_another() -> None:
    cluster = fake(fabric(4))
    cluster.set_node_ready("n01", False)
    for name in ("n02", "n03"):
        cluster.occupy(f"squatter-{name}", name, gpu(8))
    # l0 keeps only n00: partition 0 cannot stay there. Pod 0 alone would have stayed on
    # n00 and pod 1 gone to l1, splitting it; instead both go to l1, partition 1 stays.
    got = await bind(cluster, planned(partitioned()))
    assert got[2] == "n04" and got[3] == "n05"
    assert {got[0], got[1]} == {"n06", "n07"}


async def test_no_leaf_for_a_partition_binds_nothing() -> None:
    cluster = fake(fabric(4))
    cluster.set_node_ready("n01", False)
    for name in ("n02", "n03", "n06"):
        cluster.occupy(f"squatter-{name}", name, gpu(8))
    w = planned(partitioned())
    observed = await observe_job(cluster, w.name, tree=None, label_keys=LABEL_KEYS)
    result = reconcile(w, observed)
    assert result.phase == "Replan" and not any(isinstance(op, BindPod) for op in result.ops)


async def test_an_elastic_gang_binds_the_partitions_that_fit_whole() -> None:
    cluster = fake(fabric(4))
    cluster.set_node_ready("n01", False)
    for name in ("n02", "n03", "n06"):
        cluster.occupy(f"squatter-{name}", name, gpu(8))
    # minAvailable 2 is one partition: partition 1 keeps its plan, partition 0 has no leaf
    # with two free nodes, and none of its pods is bound alone.
    assert await bind(cluster, planned(partitioned(min_available=2))) == {2: "n04", 3: "n05"}


def test_without_a_tree_a_hard_partition_stays_in_a_domain_of_its_tier() -> None:
    nodes = [Node(f"m{i}", gpu(8), gpu(8)) for i in range(4)]
    spine = Domain("spine", 2, frozenset(n.name for n in nodes))
    assert bind_gang(partitioned(), spine, nodes).assignments is None
    leafy = build_tree([HyperNodeSpec(f"leaf{j}", 1, tuple(HyperNodeMember("Node", MemberSelector(exact_name=f"m{i}"))
                                                            for i in (2 * j, 2 * j + 1))) for j in (0, 1)], nodes)
    got = bind_gang(partitioned(), spine, nodes, tree=leafy).assignments
    assert got is not None
    by_part = {a.index // 2: {b.node for b in got if b.index // 2 == a.index // 2} for a in got}
    assert by_part == {0: {"m0", "m1"}, 1: {"m2", "m3"}} or by_part == {0: {"m2", "m3"}, 1: {"m0", "m1"}}
    assert all(isinstance(a, PodAssignment) for a in got)
