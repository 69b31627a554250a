"""validate(): guarantees are never lent, nor reclaimed away (placement/guarantees.py).

Each row is a snapshot and a plan: ``None`` when the plan is feasible (no problem at all),
else the sentence fragment ``validate`` must report."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from placement_builders import flat, job, running, snap

from federation.domain import FederationSnapshot, Placement, Plan, PodAssignment, Preemption, Queue, Resources
from federation.placement import validate

GPU8 = Resources.of(gpu=8)


def _pl(name: str, nodes: list[str]) -> Placement:
    return Placement(name, "a", "<cluster-root>", 1, tuple(PodAssignment("worker", i, n) for i, n in enumerate(nodes)))


def _placing(placer: str, pods: int, queues: list[Queue]) -> tuple[FederationSnapshot, Plan]:
    """Two empty 8-GPU nodes; queue ``placer`` places a gang of ``pods`` pods on them."""
    s = snap([flat("a", [8, 8])], [job("g", pods, queue=placer)], queues)
    return s, Plan((_pl("g", ["a-n0", "a-n1"][:pods]),))


GUARDED = Queue("guarded", guarantee=GPU8)


def _reclaiming(victims: list[str], guarantee: Resources = GPU8,
                taker_queue: str = "q") -> tuple[FederationSnapshot, Plan]:
    """Queue ``v`` (reclaimable, guaranteed ``guarantee``) runs r0 and r1, one 8-GPU node
    each; pending ``g`` (priority 9, queue ``taker_queue``) is placed on the victims' room."""
    c = flat("a", [8, 8])
    runs = [running(job(f"r{i}", queue="v"), c, [f"a-n{i}"]) for i in range(2)]
    queues = [Queue("v", guarantee=guarantee), *([Queue(taker_queue)] if taker_queue != "v" else [])]
    s = snap([c], [job("g", len(victims), queue=taker_queue, priority=9)], queues, runs=runs)
    nodes = [f"a-n{v[1]}" for v in victims]
    return s, Plan((_pl("g", nodes),), (), tuple(Preemption(v, "room for g", "g") for v in victims))


CASES: list[tuple[str, Callable[[], tuple[FederationSnapshot, Plan]], str | None]] = [
    # 1. placing never borrows another queue's unused guarantee
    ("another-queues-unused-guarantee-is-kept-free", lambda: _placing("q", 1, [Queue("q"), GUARDED]), None),
    ("placing-into-another-queues-unused-guarantee", lambda: _placing("q", 2, [Queue("q"), GUARDED]),
     "queue q uses other queues' unused guarantees: short by {'nvidia.com/gpu': 8}"),
    ("a-queue-may-use-its-own-guarantee", lambda: _placing("guarded", 2, [GUARDED]), None),
    ("a-child-may-use-its-parents-guarantee", lambda: _placing("child", 2, [
        Queue("parent", guarantee=GPU8), Queue("child", parent="parent")]), None),
    ("a-sibling-tree-may-not", lambda: _placing("other", 2, [
        Queue("parent", guarantee=GPU8), Queue("child", parent="parent"), Queue("other")]),
     "queue other uses other queues' unused guarantees"),
    ("a-nested-guarantee-counts-once-with-its-outer-one", lambda: _placing("other", 1, [
        Queue("parent", guarantee=GPU8), Queue("child", parent="parent", guarantee=GPU8), Queue("other")]), None),
    # 2. reclaim stops at the victim queue's guarantee; preemption inside a queue may go below
    ("reclaim-down-to-the-guarantee", lambda: _reclaiming(["r0"]), None),
    ("reclaim-below-the-guarantee", lambda: _reclaiming(["r0", "r1"]),
     "reclaim takes queue v below its guarantee by {'nvidia.com/gpu': 8}"),
    ("reclaim-from-an-unguarded-queue", lambda: _reclaiming(["r0", "r1"], guarantee=Resources()), None),
    ("preemption-inside-the-queue-may-go-below", lambda: _reclaiming(["r0", "r1"], taker_queue="v"), None),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_guarantees_are_never_lent_nor_reclaimed_away(
        build: Callable[[], tuple[FederationSnapshot, Plan]], expected: str | None) -> None:
    s, p = build()
    problems = validate(s, p)
    if expected is None:
        assert problems == []
    else:
        assert any(expected in m for m in problems), problems
