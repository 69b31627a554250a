"""The CP-SAT model prices a plan exactly as ``score()`` does, term by term.

Why: the planner keeps the model's decisions only when ``score_vector`` says they beat the
greedy plan, and the optimality-gap benchmark measures the model against ``score()``. Both
rest on one claim (``docs/design/placement.md``, "Objective layering"): every objective
term a module adds to the model has the coefficient ``placement/score.py`` gives it, so the
greedy plan, given to the model as a complete hint, has exactly the greedy plan's score.
Each row builds a round where one term is in play (fair-share credit, tier steps, packing,
anticipation, node class, preferred node affinity, jobs started, a victim's cost) and checks, band by band, the
model's objective with every hinted variable fixed against ``Scoring.vector``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ortools.sat.python import cp_model
from placement_builders import Queue, flat, hard, job, running, snap, soft, tiered
from test_node_constraints import job as constrained
from test_node_constraints import labelled, task

from federation.domain import FederationSnapshot, PlanLimits
from federation.placement.cpsat import objective, solve, windows
from federation.placement.greedy import finish, run_bands
from federation.placement.opening import open_round
from federation.placement.score import JOB_START, Scoring

FULL_SPINE1 = [8, 8, 8, 4, 0, 0, 0, 0]  # spine0 nearly whole (28 of 32 GPUs free), spine1 full


def _fair() -> FederationSnapshot:
    c = flat("a", [8, 8, 8])
    hog = running(job("hog", queue="a"), c, ["a-n0"])
    return snap([c], [job("a1", queue="a"), job("b1", queue="b"), job("b2", queue="b")], [Queue("a"), Queue("b")],
                [hog])


def _preferred() -> FederationSnapshot:
    zone_b = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 40, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}
    c = labelled(tiered("a", [8, 8, 8, 8]), {2: {"zone": "b"}, 3: {"zone": "b"}})
    return snap([c], [constrained("g", task("w", 2, affinity=zone_b))])


def _victim() -> FederationSnapshot:
    c = flat("a", [8])
    return snap([c], [job("hi", priority=5)], runs=[running(job("lo", priority=0), c, ["a-n0"], started_at=0.0)],
                now=7200.0)


ROWS: list[tuple[str, Callable[[], FederationSnapshot], PlanLimits, str]] = [
    ("fair-share credit for the queue below its share", _fair, PlanLimits(), "fair"),
    ("tier steps of a soft gang that only fits a spine",
     lambda: snap([tiered("t", [8, 0, 8, 0, 8, 0, 8, 0])], [job("g", 2, topology=soft(1))]), PlanLimits(), "tier"),
    ("packing: room the placement leaves in its domain",
     lambda: snap([flat("a", [8, 8]), flat("b", [4, 8])], [job("s", gpus=4), job("t", gpus=2)]), PlanLimits(),
     "packing"),
    ("anticipation: a queued spine gang guards the whole spine",
     lambda: snap([tiered("c", FULL_SPINE1)], [job("small", gpus=1), job("spine-gang", 4, topology=hard(2))]),
     PlanLimits(), "guard"),
    ("node class: a small pod on 8-GPU nodes while 8-GPU pods queue (the 4-GPU nodes are full)",
     lambda: snap([flat("s", [0, 0], gpus=4), flat("b", [1, 1])], [job("one", gpus=1), job("big", 2)]),
     PlanLimits(), "oversize"),
    ("preferred node affinity of the chosen domain", _preferred, PlanLimits(), "preference"),
    ("jobs started: one per placed job, whatever its size",
     lambda: snap([flat("a", [8, 8, 2])], [job("g", 2), job("s1", gpus=1), job("s2", gpus=1)]), PlanLimits(),
     "start"),
    ("a victim's cost when a higher priority evicts", _victim, PlanLimits(preemption_grace_seconds=0.0), "victim"),
]


def _hinted_model_vector(s: FederationSnapshot, limits: PlanLimits, exact: bool) -> tuple[tuple[int, ...],
                                                                                         tuple[int, ...]]:
    rnd = open_round(s, limits)
    fresh = rnd.checkpoint()
    greedy = finish(rnd, run_bands(rnd, s.pending), "GREEDY", 0.0)
    rnd.restore(fresh)
    keep = {p.job: p for p in greedy.placements}
    w = windows.build(rnd, [p.job for p in s.pending], {}, keep, small=True, before_band=0,
                      exact_max_vars=10**6 if exact else -1)
    v = solve.model(w, keep, {p.job for p in greedy.preemptions})
    hint = v.model.proto.solution_hint
    for index, value in zip(hint.vars, hint.values, strict=True):
        v.model.add(v.model.get_int_var_from_proto_index(index) == value)
    bands = len(Scoring(s).bands.order)
    expressions = [objective.band_expression(v, b) for b in range(bands)]
    solver = solve._solver(5.0, PlanLimits(workers=1))
    assert solver.solve(v.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE), "the greedy hint is infeasible"
    model_vector = tuple(int(solver.value(e)) if not isinstance(e, int) else e for e in expressions)
    return model_vector, Scoring(s).vector(greedy)


@pytest.mark.parametrize("exact", [True, False], ids=["exact capacity", "aggregate capacity"])
@pytest.mark.parametrize(("build", "limits", "term"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_the_model_prices_the_greedy_plan_as_score_does(build: Callable[[], FederationSnapshot], limits: PlanLimits,
                                                        term: str, exact: bool) -> None:
    s = build()
    model_vector, scored = _hinted_model_vector(s, limits, exact)
    assert model_vector == scored
    terms = Scoring(s)
    # The row really exercises its term (else it would prove nothing about it).
    if term == "fair":
        assert terms.deficit["b"] > 0
    elif term == "victim":
        assert terms.victim_cost(s.running[0]) > terms.units(s.running[0].job) * 64 + JOB_START
    else:
        greedy = finish(*(lambda r: (r, run_bands(r, s.pending)))(open_round(s, limits)), "GREEDY", 0.0)
        values = [terms.terms(p) for p in greedy.placements]
        key = {"tier": "tierSteps", "packing": "leftover", "guard": "guard", "oversize": "oversize",
               "preference": "preference", "start": "start"}[term]
        assert any(t[key] > 0 for t in values), values
