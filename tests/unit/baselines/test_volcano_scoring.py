"""Volcano's allocate as the ``volcano-greedy`` baseline models it from the source at
volcano-sh/volcano ed72c7c: soft mode through the HyperNode gradient, the default plugins'
node scores (no node bin-packing; HyperNode bin-pack for pods without topology), random
ties, and proportion's deserved share inside allocate. Each row names the Volcano file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from federation.domain import ClusterSnapshot, FederationSnapshot, Job, PendingJob, Plan, PlanLimits, Queue, Resources
from federation.domain.jobs import NetworkTopology, Task
from federation.domain.plans import Placement, PodAssignment, RunningJob
from federation.domain.resources import CPU, GPU, MEMORY
from federation.placement import validate
from federation.placement.baselines import volcano_greedy, volcano_scores
from federation.placement.baselines.volcano_proportion import Proportion
from tests.fixtures.instances import gang, gpu_node, tiered_cluster

HARD1 = NetworkTopology("hard", highest_tier_allowed=1)
SOFT = NetworkTopology("soft")


def cluster(used: Sequence[int], leaf: int = 2) -> ClusterSnapshot:
    """One cluster ``a`` of 8-GPU nodes in leaves of ``leaf``; ``used[i]`` GPUs taken on node i."""
    return tiered_cluster("a", len(used), leaf=leaf, spine=2, used=dict(enumerate(used)))


def snap(c: ClusterSnapshot, jobs: Sequence[Job], queues: Sequence[Queue] = (Queue("q"),),
         running: Sequence[RunningJob] = ()) -> FederationSnapshot:
    pending = tuple(PendingJob(j, float(i)) for i, j in enumerate(jobs))
    return FederationSnapshot((c,), tuple(queues), pending, tuple(running))


def run(s: FederationSnapshot) -> Plan:
    plan = volcano_greedy.plan(s, PlanLimits(), None)
    assert validate(s, plan) == []
    return plan


def nodes_of(plan: Plan, job: str) -> list[str]:
    placement = plan.placement(job)
    assert placement is not None, plan.unplaced
    return sorted(p.node for p in placement.pods)


@pytest.fixture
def seeds() -> Iterator[list[int]]:
    """Seeds for the tie-break draws; the module seed is restored afterwards."""
    saved = volcano_scores.SEED
    yield list(range(24))
    volcano_scores.SEED = saved


def test_soft_mode_takes_the_lowest_tier_that_holds_the_gang_now() -> None:
    # session.go convertSoftToHardTopology (#5206): soft = hard up to the virtual top tier, so
    # the gang goes to the free leaf; pod by pod it would start on a-n1 and end in the spine.
    plan = run(snap(cluster([8, 0, 0, 0]), [gang("s", "q", 2, 8, topology=SOFT)]))
    placement = plan.placement("s")
    assert placement is not None
    assert (placement.hypernode, placement.tier) == ("a-leaf1", 1)


def test_soft_mode_still_never_blocks() -> None:
    plan = run(snap(cluster([8, 0, 8, 0]), [gang("s", "q", 2, 8, topology=SOFT)]))
    assert nodes_of(plan, "s") == ["a-n1", "a-n3"]


def test_a_pod_without_topology_goes_to_the_fullest_hypernode_not_the_fullest_node() -> None:
    # network_topology_aware.go batchNodeOrderFnForNormalPods: leaf1 (8 of 16 GPUs used) beats
    # leaf0 (6 of 16) although a-n0 (6 of 8) is the most allocated node.
    plan = run(snap(cluster([6, 0, 4, 4]), [gang("p", "q", 1, 2)]))
    assert nodes_of(plan, "p")[0] in {"a-n2", "a-n3"}


def test_nodes_are_not_bin_packed_and_ties_are_random(seeds: list[int]) -> None:
    # binpack.go and nodeorder.go (LeastAllocated) cancel out with default weights, so an empty
    # and a half-used node of the chosen leaf score alike; SelectBestNodeAndScore draws one.
    chosen = set()
    for seed in seeds:
        volcano_scores.SEED = seed
        plan = run(snap(cluster([0, 0, 0, 4]), [gang("j", "q", 1, 4, topology=HARD1)]))
        placement = plan.placement("j")
        assert placement is not None and placement.hypernode == "a-leaf1"
        chosen.add(placement.pods[0].node)
    assert chosen == {"a-n2", "a-n3"}


def test_the_same_seed_gives_the_same_plan(seeds: list[int]) -> None:
    s = snap(cluster([0, 0, 0, 4, 0, 2, 0, 0]), [gang("j", "q", 1, 4, topology=HARD1), gang("k", "q", 3, 2)])
    volcano_scores.SEED = 7
    assert run(s) == run(s)


def _running(job: Job, c: ClusterSnapshot, nodes: Sequence[str]) -> RunningJob:
    pods = tuple(PodAssignment(t, i, n) for (t, i, _), n in zip(job.pods(), nodes, strict=True))
    domain = c.tree.lowest_domain_holding(nodes)
    assert domain is not None
    return RunningJob(job, Placement(job.name, c.name, domain.name, domain.tier, pods))


def test_a_queue_at_its_deserved_share_does_not_take_room_another_queue_cannot_use() -> None:
    # proportion.go AllocatableFn/OverusedFn: 64 GPUs, queue a runs 32 and asks 8 more, queue b
    # asks 32 (a hard 4-node leaf gang that fits nowhere now): deserved 32/32, so a's job waits
    # although four nodes are free (Volcano's default actions have no reclaim).
    c = cluster([8, 8, 0, 0, 8, 8, 0, 0], leaf=4)
    held = gang("held", "a", 4, 8)
    running = [_running(held, c, ["a-n0", "a-n1", "a-n4", "a-n5"])]
    jobs = [gang("wide", "b", 4, 8, topology=HARD1), gang("more", "a", 1, 8)]
    plan = run(snap(c, jobs, (Queue("a"), Queue("b")), running))
    assert plan.placement("wide") is None and plan.placement("more") is None
    why = next(u for u in plan.unplaced if u.job == "more")
    assert (why.constraint, why.closest_cluster) == ("fairness", "a")


def test_below_its_deserved_share_the_queue_allocates() -> None:
    c = cluster([8, 8, 0, 0, 8, 0, 0, 0], leaf=4)
    held = gang("held", "a", 3, 8)
    running = [_running(held, c, ["a-n0", "a-n1", "a-n4"])]
    jobs = [gang("wide", "b", 4, 8, topology=HARD1), gang("more", "a", 1, 8)]
    plan = run(snap(c, jobs, (Queue("a"), Queue("b")), running))
    assert plan.placement("more") is not None


G = 8


@pytest.mark.parametrize(
    ("weights", "requests", "deserved"),
    [
        # both ask more than half: half each
        ((1, 1), (300, 300), (128, 128)),
        # b asks less than half: a gets what b leaves (second pass of the water-filling)
        ((1, 1), (180, 120), (136, 120)),
        # weights 3:1
        ((3, 1), (400, 400), (192, 64)),
        # everything fits: deserved = request
        ((1, 1), (100, 50), (100, 50)),
    ],
    ids=["equal", "refill", "weighted", "under"],
)
def test_proportion_water_fills_deserved(weights: tuple[int, int], requests: tuple[int, int],
                                         deserved: tuple[int, int]) -> None:
    queues = (Queue("a", weight=weights[0]), Queue("b", weight=weights[1]))
    prop = Proportion(Resources.of(gpu=256), queues, {},
                      {"a": Resources.of(gpu=requests[0]), "b": Resources.of(gpu=requests[1])})
    got = tuple(round(prop.queues[q].deserved.get(GPU, 0.0)) for q in ("a", "b"))
    assert got == deserved


GIB = 1 << 30


@pytest.mark.parametrize(
    ("used", "gpus", "least", "balanced", "packed"),
    [
        # the scenario's shape: requests in the node's proportion; (1 - f) x 100 is floored
        (0, 8, 0, 100, 100.0),
        (0, 1, 87, 100, 12.5),
        (3, 2, 37, 100, 62.5),
        (4, 4, 0, 100, 100.0),
    ],
)
def test_default_node_scores(used: int, gpus: int, least: int, balanced: int, packed: float) -> None:
    node = gpu_node("n", 8, 0)
    alloc = Resources({GPU: 8, CPU: 96_000, MEMORY: 1024 * GIB})
    node = type(node)("n", alloc, Resources({GPU: 8 - used, CPU: 12_000 * (8 - used), MEMORY: 128 * GIB * (8 - used)}))
    request = Resources({GPU: gpus, CPU: 12_000 * gpus, MEMORY: 128 * GIB * gpus})
    assert volcano_scores.least_allocated(node, node.free, request) == least
    assert volcano_scores.balanced_allocation(node, node.free, request) == balanced
    assert volcano_scores.binpack(node, node.free, request) == pytest.approx(packed)


@pytest.mark.parametrize(("guarantees", "deserved"), [(True, (64, 16)), (False, (8, 24))],
                         ids=["one-cluster-floor", "member-no-floor"])
def test_a_guarantee_floors_deserved_only_on_one_cluster(guarantees: bool, deserved: tuple[int, int]) -> None:
    # proportion.go floors deserved at the guarantee; in a member of 32 GPUs the whole
    # federation guarantee (64) would use up the room prod does not ask for (it asks 8), so
    # research could not get the second pass's 8 GPUs: members skip the floor.
    queues = (Queue("prod", guarantee=Resources.of(gpu=64)), Queue("research"))
    prop = Proportion(Resources.of(gpu=32), queues, {},
                      {"prod": Resources.of(gpu=8), "research": Resources.of(gpu=32)}, guarantees)
    got = tuple(round(prop.queues[q].deserved.get(GPU, 0.0)) for q in ("prod", "research"))
    assert got == deserved


def test_pods_are_ordered_by_index_across_tasks() -> None:
    # controllers/job/helpers CompareTask: index 0 of every task before index 1 of any.
    small = Resources({GPU: 2, CPU: 16_000, MEMORY: 128 * GIB})
    big = Resources({GPU: 8, CPU: 64_000, MEMORY: 512 * GIB})
    job = Job("mixed", "q", (Task("ps", 2, small), Task("worker", 3, big)))
    order = [(t, i) for t, i, _ in volcano_greedy.task_order(job, job.pods())]
    assert order == [("ps", 0), ("worker", 0), ("ps", 1), ("worker", 1), ("worker", 2)]
