"""The nodes a hold keeps (``reserve.held_nodes``) and who the fair-share reservation
(``reserve.reserve_for_starved``, ``--reserve-after``) keeps off them: tables over tiny
tiered clusters.

Cluster shape (``tiered``, ``leaf=4``): one leaf of four nodes per spine.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from placement_builders import FAST, hard, job, running, snap, tiered

from federation.domain import ClusterSnapshot, FederationSnapshot, Job, Node, PendingJob, Queue, Task
from federation.domain.resources import GPU, Resources
from federation.domain.scheduling import template_for
from federation.placement import greedy_plan, plan, validate
from federation.placement.admission import hold_room
from federation.placement.reserve import STARVED_MARGIN, held_nodes
from federation.placement.rounds import PlanningRound

MODEL = "nvidia.com/gpu.product"


def _relabel(cluster: ClusterSnapshot, labels: dict[str, dict[str, str]]) -> ClusterSnapshot:
    nodes = tuple(replace(n, labels={**n.labels, **labels.get(n.name, {})}) for n in cluster.nodes)
    return replace(cluster, nodes=nodes)


def _shrunk(cluster: ClusterSnapshot, name: str, gpus: int) -> ClusterSnapshot:
    """Node ``name`` has only ``gpus`` GPUs, all free: a remnant of a node shared with other work."""
    def shrink(n: Node) -> Node:
        if n.name != name:
            return n
        return replace(n, allocatable=Resources({**dict(n.allocatable), GPU: gpus}),
                       free=Resources({**dict(n.free), GPU: gpus}))
    return replace(cluster, nodes=tuple(shrink(n) for n in cluster.nodes))


def _held_in_leaf0(cluster: ClusterSnapshot, gang: Job) -> list[str] | None:
    rnd = PlanningRound(snap([cluster], [gang]), grace=None, topology_wait=0.0)
    leaf = next(d for d in rnd.state.domains if d.domain.name == f"{cluster.name}-leaf0")
    return held_nodes(rnd, leaf, gang)


H100 = {MODEL: "H100"}
PAIR_ON_H100 = Job("pair", "q", (Task("w", 2, Resources({GPU: 8}), template_json=template_for(node_selector=H100)),),
                   network_topology=hard(1))


@pytest.mark.parametrize(
    ("cluster", "gang", "expect"),
    [
        # n0 is the freest node but another GPU model: it is no room for the pair.
        (_relabel(tiered("c", [8, 6, 4, 0], leaf=4), {"c-n0": {MODEL: "A100"}, "c-n1": H100, "c-n2": H100,
                                                         "c-n3": H100}),
         PAIR_ON_H100, ["c-n1", "c-n2"]),
        # n0 is entirely free but has 4 GPUs: no 8-GPU pod fits it even empty.
        (_shrunk(tiered("c", [8, 6, 4, 0], leaf=4), "c-n0", 4), job("one"), ["c-n1"]),
        # The plain case: the freest nodes that hold the gang once emptied.
        (tiered("c", [8, 6, 4, 0], leaf=4), job("pair", pods=2, topology=hard(1)), ["c-n0", "c-n1"]),
    ],
    ids=["another GPU model is not held", "a remnant node too small for a pod is not held", "freest first"],
)
def test_only_nodes_that_are_room_for_the_job_are_held(cluster: ClusterSnapshot, gang: Job,
                                                       expect: list[str]) -> None:
    assert _held_in_leaf0(cluster, gang) == expect


# gold (weight 4) wants one whole node and has none; silver runs over its share, bronze
# under it. Leaf0 (n0, n1) has 4 GPUs free on each node; leaf1 (n2, n3) is silver's.
QUEUES = (Queue("gold", weight=4), Queue("silver", weight=1), Queue("bronze", weight=1))


def _saturated(waited: float) -> FederationSnapshot:
    c = tiered("a", [8, 8, 8, 8])
    runs = [running(job("s-big", 2, queue="silver"), c, ["a-n2", "a-n3"]),
            running(job("s-run", gpus=4, queue="silver"), c, ["a-n0"]),
            running(job("b-run", gpus=4, queue="bronze"), c, ["a-n1"])]
    pending = [job("gold-8", queue="gold"), job("silver-4", gpus=4, queue="silver"),
               job("bronze-4", gpus=4, queue="bronze")]
    s = snap([c], pending, QUEUES, runs=runs, now=waited)
    return replace(s, pending=tuple(PendingJob(p.job, 0.0) for p in s.pending))


def _reserved(s: FederationSnapshot) -> PlanningRound:
    rnd = PlanningRound(s, grace=None, topology_wait=0.0)
    hold_room(rnd, replace(FAST, reserve_after_seconds=1800.0))
    return rnd


def test_the_starved_queue_is_far_below_its_share_and_the_others_are_over_and_under() -> None:
    led = PlanningRound(_saturated(1800.0), grace=None, topology_wait=0.0).ledger
    assert led.share("gold") < led.fair["gold"] - STARVED_MARGIN
    assert led.over("silver") and led.under("bronze")


def test_the_reservation_keeps_one_node_from_the_queue_over_its_share_only() -> None:
    rnd = _reserved(_saturated(1800.0))
    assert [h[:3] for h in rnd.holds] == [("gold-8", "a", "a-leaf0")]
    assert rnd.barred == {"silver-4": frozenset({("a", "a-n0")})}  # bronze is short of its share too


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_the_queue_over_its_share_backfills_elsewhere_and_the_short_one_may_use_the_held_node(planner: str) -> None:
    s = _saturated(1800.0)
    limits = replace(FAST, reserve_after_seconds=1800.0)
    result = greedy_plan(s, limits) if planner == "greedy" else plan(s, limits)
    assert validate(s, result) == []
    placed = {p.job: [a.node for a in p.pods] for p in result.placements}
    assert placed.get("silver-4") in (None, ["a-n1"]) and "a-n0" not in (placed.get("silver-4") or [])
    assert "bronze-4" in placed


def test_a_queue_within_the_margin_of_its_share_is_not_starved() -> None:
    s = _saturated(1800.0)
    # gold already runs 7 whole nodes elsewhere: 56 of 96 GPUs, against a fair share of 64
    # (its demand): short of it by 0.083 of the fleet, less than the margin.
    extra = tiered("b", [8] * 8)
    gold_run = running(job("g-run", pods=7, queue="gold"), extra, [f"b-n{i}" for i in range(7)])
    s2 = snap([*s.clusters, extra], [p.job for p in s.pending], QUEUES, runs=[*s.running, gold_run], now=1800.0)
    s2 = replace(s2, pending=tuple(PendingJob(p.job, 0.0) for p in s2.pending))
    led = PlanningRound(s2, grace=None, topology_wait=0.0).ledger
    assert led.under("gold") and led.share("gold") >= led.fair["gold"] - STARVED_MARGIN
    assert _reserved(s2).holds == []


def test_no_reservation_before_the_wait() -> None:
    assert _reserved(_saturated(1799.0)).holds == []
