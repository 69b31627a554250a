"""The objective: maximise the sum of every module's terms (see the package docstring).

Modules append ``(coefficient, variable)`` pairs; this module merges pairs that share a
variable (priority, topology and packing all price ``x[k, d]``) and hands CP-SAT a single
weighted sum, which keeps the proto small on big rounds.
"""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model

from federation.placement.cpsat.variables import Vars


def add(v: Vars) -> None:
    merged: dict[int, list[Any]] = {}
    for coef, var in v.objective:
        slot = merged.get(var.index)
        if slot is None:
            merged[var.index] = [coef, var]
        else:
            slot[0] += coef
    pairs = [(c, var) for c, var in merged.values() if c]
    if pairs:
        v.model.maximize(cp_model.LinearExpr.weighted_sum([var for _, var in pairs], [c for c, _ in pairs]))
