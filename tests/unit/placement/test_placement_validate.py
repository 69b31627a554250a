"""validate(): each hard rule has a plan that breaks it and the sentence that says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from placement_builders import flat, hard, job, running, snap, tiered

from federation.domain import (
    ClusterAffinity,
    FederationSnapshot,
    Placement,
    Plan,
    PodAssignment,
    Preemption,
    PropagationPolicy,
    Queue,
    Resources,
    Unplaced,
)
from federation.placement import validate


def _pl(name: str, cluster: str, dom: str, tier: int, nodes: list[str]) -> Placement:
    return Placement(name, cluster, dom, tier, tuple(PodAssignment("worker", i, n) for i, n in enumerate(nodes)))


def base() -> FederationSnapshot:
    return snap([flat("a", [8, 8]), tiered("t", [8, 8, 8, 8])], [job("g", 2), job("h", 1)])


def ok_plan() -> Plan:
    return Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0", "a-n1"]),), (Unplaced("h", "full", "capacity"),))


BROKEN: list[tuple[str, Callable[[], tuple[FederationSnapshot, Plan]], str]] = [
    ("overcommitted-node", lambda: (base(), Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0", "a-n0"]),),
                                                 (Unplaced("h", "x", "capacity"),))), "overcommitted"),
    ("gang-split-across-nodes-outside-domain", lambda: (base(), Plan((_pl("g", "t", "t-leaf0", 1, ["t-n0", "t-n2"]),),
                                                                     (Unplaced("h", "x", "capacity"),))),
     "outside HyperNode"),
    ("missing-pod", lambda: (base(), Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0"]),),
                                          (Unplaced("h", "x", "capacity"),))), "do not match"),
    ("tier-above-hard-limit", lambda: (snap([tiered("t", [8] * 4)], [job("g", 2, topology=hard(1))]),
                                       Plan((_pl("g", "t", "t-spine0", 2, ["t-n0", "t-n2"]),))),
     "above the hard limit"),
    ("wrong-tier-label", lambda: (base(), replace(ok_plan(), placements=(
        _pl("g", "a", "<cluster-root>", 2, ["a-n0", "a-n1"]),))), "does not match"),
    ("pending-job-forgotten", lambda: (base(), Plan(ok_plan().placements)), "neither placed nor unplaced"),
    ("placed-and-unplaced", lambda: (base(), replace(ok_plan(), unplaced=(
        Unplaced("h", "x", "capacity"), Unplaced("g", "x", "capacity")))), "both placed and unplaced"),
    ("unknown-constraint", lambda: (base(), replace(ok_plan(), unplaced=(Unplaced("h", "x", "bogus"),))),
     "unknown blocking constraint"),
    ("affinity-ignored", lambda: (snap([flat("a", [8]), flat("b", [8])], [job(
        "g", propagation=PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=("b",))))]),
        Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0"]),))), "not allowed"),
    ("unhealthy-cluster", lambda: (snap([flat("a", [8], healthy=False)], [job("g")]),
                                   Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0"]),))), "unhealthy"),
    ("capability-exceeded", lambda: (snap([flat("a", [8, 8])], [job("g", 2)], [Queue("q", capability=Resources.of(
        gpu=8))]), Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0", "a-n1"]),))), "exceeds its capability"),
    ("preempting-a-pending-job", lambda: (base(), replace(ok_plan(), preemptions=(Preemption("h", "x"),))),
     "not a running job"),
    ("moving-a-running-job", lambda: _moved(), "never re-placed"),
    ("preempting-an-equal-priority-gang", lambda: _evicted(victim_priority=9), "may not evict"),
    ("reclaiming-from-a-non-reclaimable-queue", lambda: _evicted(victim_queue=Queue("v", reclaimable=False)),
     "may not evict"),
    ("reclaiming-from-a-higher-priority-queue", lambda: _evicted(victim_queue=Queue("v", priority=5)),
     "may not evict"),
    ("eviction-nobody-placed-may-cause", lambda: _evicted(victim_priority=9, preemptor=None), "no job the plan"),
]


def _evicted(victim_priority: int = 0, victim_queue: Queue | None = None,
             preemptor: str | None = "g") -> tuple[FederationSnapshot, Plan]:
    """Pending ``g`` (queue q, priority 9) placed on the room of running ``r``, evicted for it."""
    c = flat("a", [8])
    vq = victim_queue or Queue("q")
    r = running(job("r", queue=vq.name, priority=victim_priority), c, ["a-n0"])
    s = snap([c], [job("g", priority=9)], [Queue("q"), *([vq] if vq.name != "q" else [])], runs=[r])
    return s, Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0"]),), (), (Preemption("r", "x", preemptor),))


def test_a_reclaim_by_the_rule_is_valid() -> None:
    s, p = _evicted(victim_queue=Queue("v"))
    assert validate(s, p) == []


def _moved() -> tuple[FederationSnapshot, Plan]:
    c = flat("a", [8, 8])
    r = running(job("r"), c, ["a-n0"])
    s = snap([c], [], runs=[r])
    return s, Plan((_pl("r", "a", "<cluster-root>", 1, ["a-n1"]),))


def test_valid_plan_has_no_violations() -> None:
    assert validate(base(), ok_plan()) == []


@pytest.mark.parametrize(("build", "needle"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_validate_reports(build: Callable[[], tuple[FederationSnapshot, Plan]], needle: str) -> None:
    s, p = build()
    problems = validate(s, p)
    assert any(needle in msg for msg in problems), problems


def test_preempted_room_counts_as_free() -> None:
    c = flat("a", [8])
    r = running(job("r", priority=0), c, ["a-n0"])
    s = snap([c], [job("g", priority=9)], runs=[r])
    p = Plan((_pl("g", "a", "<cluster-root>", 1, ["a-n0"]),), (), (Preemption("r", "preempt", "g"),))
    assert validate(s, p) == []
    assert any("overcommitted" in m for m in validate(s, replace(p, preemptions=())))
