"""Building one window's model and solving it — weighted, or lexicographic in stages.

* ``weighted``: one solve of the band-weighted objective (bands lexicographic through
  their weights; used when the weights fit comfortably in 64 bits, and for one-band
  windows);
* ``lexicographic``: one solve per band, highest first; each stage maximises its band's
  terms alone and then pins that band to the value found (``expr >= value``) before the
  next — exact lexicographic optimisation without giant coefficients. The previous stage's
  solution is the next stage's complete hint, so every stage starts from a feasible plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ortools.sat.python import cp_model

from federation.domain.plans import Placement, PlanLimits
from federation.placement.cpsat import (
    anticipation,
    assignment,
    capacity,
    fairness,
    fit,
    hint,
    objective,
    preemption,
    preference,
    priority,
    quota,
    topology,
    variables,
)
from federation.placement.cpsat.variables import Vars, Window

QUICK_SECONDS = 5.0
MODULES = (assignment, capacity, quota, fairness, priority, topology, fit, anticipation, preference, preemption)


@dataclass
class Outcome:
    solved: bool = False
    optimal: bool = True
    gap: float = 0.0

    def record(self, status: object, solver: cp_model.CpSolver) -> bool:
        """Fold one solve into the outcome; True when it produced a solution."""
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            self.optimal = False
            return False
        self.solved = True
        if status != cp_model.OPTIMAL:
            self.optimal = False
            obj, bound = solver.objective_value, solver.best_objective_bound
            self.gap = max(self.gap, (bound - obj) / max(1.0, abs(bound)))
        return True


def model(w: Window, keep: Mapping[str, Placement], evicted: set[str]) -> Vars:
    v = variables.create(w)
    for module in MODULES:
        module.add(w, v)
    hint.add(w, v, keep, evicted)
    return v


def _solver(seconds: float, limits: PlanLimits, reproducible: bool = False) -> cp_model.CpSolver:
    """A solver for ``seconds``; a ``reproducible`` one searches with a single worker.

    Why: CP-SAT's parallel portfolio returns whichever optimum one of its workers finds
    first, so the same small round could give different plans from one run to the next
    (``volcano-1cluster``: lowestTier 0.882 in most runs, 0.794 in others). One worker's
    search is deterministic, so a round the model finishes inside its time limit gives the
    same plan on any machine, and small rounds are proven optimal as fast with one worker
    as with two. ``interleave_search`` (deterministic with several workers) was 15-50x
    slower to prove them optimal. Large rounds keep the portfolio: their windows rarely
    finish inside the budget, so the time limit decides them whatever the search
    (docs/design/placement.md, "Reproducible small rounds").
    """
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = 1 if reproducible else max(1, limits.workers)
    solver.parameters.random_seed = limits.seed
    if seconds < QUICK_SECONDS:
        # Probing dominated presolve on round-sized models (0.5 s of a 1 s budget) and
        # starved the search; without it the shipped configuration stays within 1.1 %
        # of the proven optimum on the 3x8-node/14-job benchmark (2 of 27 over 1.5 % with it).
        solver.parameters.cp_model_probing_level = 0
    return solver


def weighted(w: Window, v: Vars, seconds: float, limits: PlanLimits, out: Outcome,
             reproducible: bool = False) -> cp_model.CpSolver | None:
    objective.add(v, w.weights)
    solver = _solver(seconds, limits, reproducible)
    return solver if out.record(solver.solve(v.model), solver) else None


def lexicographic(v: Vars, seconds: float, limits: PlanLimits, out: Outcome,
                  clock: Callable[[], float] = time.monotonic) -> cp_model.CpSolver | None:
    """Bands one after another (the reference optimum): maximise a band, fix it, go on."""
    deadline = clock() + seconds
    bands = sorted({b for _, _, b in v.objective})
    solver: cp_model.CpSolver | None = None
    for index, band in enumerate(bands):
        expr = objective.band_expression(v, band)
        v.model.maximize(expr)
        stage = _solver((deadline - clock()) / (len(bands) - index), limits)
        if not out.record(stage.solve(v.model), stage):
            break
        solver = stage
        v.model.add(expr >= int(stage.value(expr)))
        v.model.clear_hints()  # type: ignore[no-untyped-call]  # untyped in ortools
        for var in [*v.x.values(), *v.p.values(), *v.e.values(), *v.r.values()]:
            v.model.add_hint(var, int(stage.value(var)))
    return solver
