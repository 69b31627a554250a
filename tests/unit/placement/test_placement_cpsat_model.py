"""Per-constraint tables for the CP-SAT model itself (no hint, solved to optimality).

Each row builds a tiny round, builds the model window (exact or aggregate capacity),
solves it, and checks what the constraint allows: how many gangs the model places, which
tiers it may use, whom it evicts. Decoded plans are validated too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from placement_builders import Queue, R, flat, hard, job, running, snap, tiered

from federation.domain import FederationSnapshot, Plan, PlanLimits
from federation.placement import validate
from federation.placement.cpsat import decode, solve, windows
from federation.placement.greedy import finish, run_bands
from federation.placement.rounds import PlanningRound


def solved(s: FederationSnapshot, exact: bool) -> tuple[int, set[int], set[str], Plan]:
    """(gangs placed by the model, tiers used, victims, decoded plan)."""
    rnd = PlanningRound(s)
    w = windows.build(rnd, [p.job for p in s.pending], {}, {}, small=True, before_band=0,
                      exact_max_vars=10**6 if exact else -1)
    assert w.exact is exact
    v = solve.model(w, {}, set())
    placed, tiers, victims = 0, set(), set()
    if v.x:  # no candidate at all: nothing for the model to decide
        out = solve.Outcome()
        solver = solve.lexicographic(v, 5.0, PlanLimits(time_limit_seconds=5.0, workers=1), out)
        assert solver is not None and out.optimal
        placed = sum(int(solver.value(x)) for x in v.x.values())
        tiers = {rnd.state.domains[uid].tier for (_, uid), x in v.x.items() if solver.value(x)}
        victims = {name for name, e in v.e.items() if solver.value(e)}
        decode.apply(w, v, solver)
    left = run_bands(rnd, tuple(p for p in s.pending if p.job.name not in rnd.placements), preempt=False)
    result = finish(rnd, left, "TEST", 0.0)
    assert validate(s, result) == []
    return placed, tiers, victims, result


def _victims(reclaimable: bool) -> FederationSnapshot:
    c = flat("a", [8, 8])
    runs = [running(job(f"hog{i}", queue="a"), c, [f"a-n{i}"]) for i in range(2)]
    return snap([c], [job("b1", queue="b")], [Queue("a", reclaimable=reclaimable), Queue("b")], runs, now=10.0)


def _preempt(low: int) -> FederationSnapshot:
    c = flat("a", [8])
    return snap([c], [job("hi", priority=5)], runs=[running(job("lo", priority=low), c, ["a-n0"])], now=10.0)


Check = Callable[[int, set[int], set[str], Plan], Any]
ROWS: list[tuple[str, Callable[[], FederationSnapshot], bool, Check]] = [
    ("capacity-exact-two-gangs-fit", lambda: snap([flat("a", [8, 8])], [job("x"), job("y")]), True,
     lambda n, t, v, p: n == 2),
    ("capacity-exact-one-node-holds-one-gang", lambda: snap([flat("a", [8])], [job("x"), job("y")]), True,
     lambda n, t, v, p: n == 1),
    ("capacity-aggregate-slots-admit-whole-nodes", lambda: snap([flat("a", [8, 8])], [job("g", 2)]), False,
     lambda n, t, v, p: n == 1),
    ("capacity-aggregate-slots-refuse-4x4-for-2x8", lambda: snap([flat("a", [4, 4, 4, 4])], [job("g", 2)]), False,
     lambda n, t, v, p: n == 0),
    ("topology-hard-tier1-uses-a-leaf", lambda: snap([tiered("a", [8, 8, 8, 8])], [job("g", 2, topology=hard(1))]),
     True, lambda n, t, v, p: n == 1 and t == {1}),
    ("topology-hard-tier1-never-uses-a-spine",
     lambda: snap([tiered("a", [8, 0, 8, 0])], [job("g", 2, topology=hard(1))]), True, lambda n, t, v, p: n == 0),
    ("topology-no-limit-prefers-the-leaf", lambda: snap([tiered("a", [8, 8, 8, 0])], [job("g", 2)]), True,
     lambda n, t, v, p: t == {1}),
    ("quota-capability-admits-up-to-the-cap",
     lambda: snap([flat("a", [8, 8])], [job("x"), job("y")], [Queue("q", capability=R(gpu=16))]), True,
     lambda n, t, v, p: n == 2),
    ("quota-capability-refuses-beyond-the-cap",
     lambda: snap([flat("a", [8, 8])], [job("x"), job("y")], [Queue("q", capability=R(gpu=8))]), True,
     lambda n, t, v, p: n == 1),
    ("quota-guarantee-owner-may-use-it",
     lambda: snap([flat("a", [8])], [job("a1", queue="a")], [Queue("a", guarantee=R(gpu=8))]), True,
     lambda n, t, v, p: n == 1),
    ("quota-guarantee-never-lent", lambda: snap([flat("a", [8])], [job("b1", queue="b")],
                                                [Queue("a", guarantee=R(gpu=8)), Queue("b")]), True,
     lambda n, t, v, p: n == 0),
    ("fairness-starved-queue-wins-the-last-node",
     lambda: snap([flat("a", [8, 8])], [job("a2", queue="a"), job("b1", queue="b"), job("b2", queue="b")],
                  runs=[running(job("a1", queue="a"), flat("a", [8, 8]), ["a-n1"])]), True,
     lambda n, t, v, p: p.placement("b1") is not None or p.placement("b2") is not None),
    ("preemption-evicts-lower-priority-same-queue", lambda: _preempt(0), True,
     lambda n, t, v, p: n == 1 and v == {"lo"}),
    ("preemption-never-equal-priority", lambda: _preempt(5), True, lambda n, t, v, p: n == 0 and not v),
    ("reclaim-from-reclaimable-queue-above-share", lambda: _victims(True), True,
     lambda n, t, v, p: n == 1 and len(v) == 1),
    ("reclaim-never-from-non-reclaimable-queue", lambda: _victims(False), True,
     lambda n, t, v, p: n == 0 and not v),
]


@pytest.mark.parametrize(("build", "exact", "check"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_model_constraint(build: Callable[[], FederationSnapshot], exact: bool, check: Check) -> None:
    n, tiers, victims, plan = solved(build(), exact)
    assert check(n, tiers, victims, plan), (n, tiers, victims, plan.placements, plan.preemptions)
