"""Hierarchical queues (Volcano ``spec.parent``): weights split per level, a parent's
capability caps its subtree, guarantees nest, ``root`` is implicit; planners and
``validate()`` agree, with a feasible and an infeasible case."""

from __future__ import annotations

import pytest
from placement_builders import FAST, Queue, flat, job, running, snap

from federation.domain import Plan, Resources
from federation.domain.errors import InvalidInput
from federation.domain.plans import FederationSnapshot, Placement, PodAssignment
from federation.placement import greedy_plan, plan, validate
from federation.placement.fairshare import fair_shares
from federation.placement.ledger import QueueLedger

R = Resources.of
CAP = R(gpu=100)


def shares(queues: list[Queue], demand: dict[str, int]) -> dict[str, float]:
    out = fair_shares(queues, {k: R(gpu=v) for k, v in demand.items()}, CAP)
    return {k: round(v, 3) for k, v in out.items() if v}


def test_weights_split_level_by_level() -> None:
    # root: eng (weight 3) and ops (weight 1); eng: a (1) and b (1). Flat weights would give
    # a, b, ops 1/3 each; the tree gives eng 3/4 split in half, ops 1/4.
    tree = [Queue("eng", weight=3), Queue("ops"), Queue("a", parent="eng"), Queue("b", parent="eng")]
    assert shares(tree, {"a": 100, "b": 100, "ops": 100}) == {"a": 0.375, "b": 0.375, "ops": 0.25}
    flat_queues = [Queue("a"), Queue("b"), Queue("ops")]
    assert shares(flat_queues, {"a": 100, "b": 100, "ops": 100}) == {"a": 0.333, "b": 0.333, "ops": 0.333}


def test_a_parent_capability_caps_its_subtree_and_the_rest_flows_to_siblings() -> None:
    tree = [Queue("eng", weight=3, capability=R(gpu=40)), Queue("ops"), Queue("a", parent="eng"),
            Queue("b", parent="eng")]
    assert shares(tree, {"a": 100, "b": 100, "ops": 100}) == {"a": 0.2, "b": 0.2, "ops": 0.6}


def test_guarantees_nest_inside_the_parent() -> None:
    tree = [Queue("eng", guarantee=R(gpu=60)), Queue("ops", weight=9), Queue("a", parent="eng", guarantee=R(gpu=50)),
            Queue("b", parent="eng")]
    got = shares(tree, {"a": 100, "b": 100, "ops": 100})
    assert got["a"] + got["b"] == pytest.approx(0.6, abs=1e-3) and got["a"] >= 0.5 - 1e-3


def test_root_is_implicit() -> None:
    assert Queue("a", parent="root").parent is None
    with pytest.raises(InvalidInput) as err:
        Queue("root")
    assert err.value.path == "name"


def two_children(parent_cap: int | None) -> FederationSnapshot:
    c = flat("a", [8, 8, 8])
    queues = [Queue("eng", capability=R(gpu=parent_cap) if parent_cap else None),
              Queue("x", parent="eng"), Queue("y", parent="eng")]
    return snap([c], [job("y1", queue="y")], queues, runs=[running(job("x1", queue="x"), c, ["a-n0"])])


@pytest.mark.parametrize("planner", ["greedy", "cpsat"])
def test_a_parent_capability_blocks_a_child_job(planner: str) -> None:
    blocked = two_children(8)  # x already uses the parent's 8 GPUs
    result = greedy_plan(blocked, FAST) if planner == "greedy" else plan(blocked, FAST)
    assert validate(blocked, result) == []
    assert result.placements == () and result.unplaced[0].constraint == "queue-capability"
    fine = two_children(16)
    result = greedy_plan(fine, FAST) if planner == "greedy" else plan(fine, FAST)
    assert validate(fine, result) == [] and [p.job for p in result.placements] == ["y1"]


def test_validate_refuses_a_plan_over_a_parent_capability() -> None:
    s = two_children(8)
    bad = Plan((Placement("y1", "a", "<cluster-root>", 1, (PodAssignment("worker", 0, "a-n1"),)),))
    assert any("queue eng exceeds its capability" in p for p in validate(s, bad))


def test_another_subtree_guarantee_is_held_back_but_an_ancestor_guarantee_is_not() -> None:
    c = flat("a", [8, 8])
    queues = [Queue("eng", guarantee=R(gpu=8)), Queue("x", parent="eng"), Queue("ops")]
    s = snap([c], [job("x1", queue="x"), job("o1", queue="ops")], queues)
    led = QueueLedger(s)
    assert led.held_back("ops") == R(gpu=8)   # eng's unused guarantee is never lent to ops
    assert led.held_back("x") == Resources()   # x may use its parent's guarantee
