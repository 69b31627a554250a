"""Reference optimum for small rounds: the exact model, solved lexicographically to the end.

Used by the optimality-gap benchmark and tests, never by ``plan()``: one model over every
pending job, every domain a candidate (no pruning), exact per-node capacity, and the bands
optimised one after another — maximise the highest band, constrain it to its optimum,
maximise the next — which is exactly lexicographic without giant weights. On rounds small
enough for CP-SAT to prove every stage optimal, its plan is the yardstick the shipped
configuration is measured against.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement.cpsat import decode, solve, windows
from federation.placement.greedy import finish, run_bands
from federation.placement.opening import open_round


def reference_plan(snapshot: FederationSnapshot, seconds: float = 30.0, workers: int = 2,
                   policy: PlanLimits | None = None, clock: Callable[[], float] = time.monotonic) -> Plan:
    """The proven-optimal plan (status OPTIMAL) or the best found within ``seconds``.

    ``policy`` supplies the preemption grace and topology wait (default: the shipped ones),
    so the yardstick solves the same problem as the ``plan()`` it is compared with.
    """
    started = clock()
    rnd = open_round(snapshot, policy or PlanLimits(), clock=clock)
    fresh = rnd.checkpoint()
    greedy = finish(rnd, run_bands(rnd, snapshot.pending), "GREEDY", started)
    rnd.restore(fresh)
    keep = {p.job: p for p in greedy.placements}
    w = windows.build(rnd, [p.job for p in snapshot.pending], {}, keep, small=True, before_band=0,
                      exact_max_vars=None)
    v = solve.model(w, keep, {p.job for p in greedy.preemptions})
    out = solve.Outcome()
    solver = solve.lexicographic(v, seconds - (clock() - started), PlanLimits(seconds, workers), out, clock=clock)
    if solver is not None:
        decode.apply(w, v, solver)
    left = run_bands(rnd, tuple(p for p in snapshot.pending if p.job.name not in rnd.placements))
    result = finish(rnd, left, "OPTIMAL" if out.solved and out.optimal else "FEASIBLE", started)
    return result if rnd.scoring.vector(result) >= rnd.scoring.vector(greedy) else greedy
