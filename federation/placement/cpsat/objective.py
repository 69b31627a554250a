"""The objective: maximise the band-weighted sum of every module's terms.

Modules append ``(coefficient, variable, band)``; a window's band weights make the sum
lexicographic over bands (``priority``). This module merges terms that share a variable
(priority, topology and packing all price ``x[k, d]``) so CP-SAT gets one compact weighted
sum. ``band_expression`` gives one band's terms alone, for lexicographic solving in
sequence (``reference``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ortools.sat.python import cp_model

from federation.placement.cpsat.variables import Vars


def _merged(v: Vars, weights: Mapping[int, int], only: int | None = None) -> Any:
    merged: dict[int, list[Any]] = {}
    for coef, var, band in v.objective:
        if only is not None and band != only:
            continue
        c = coef * weights.get(band, 1)
        slot = merged.get(var.index)
        if slot is None:
            merged[var.index] = [c, var]
        else:
            slot[0] += c
    pairs = [(c, var) for c, var in merged.values() if c]
    if not pairs:
        return 0
    return cp_model.LinearExpr.weighted_sum([var for _, var in pairs], [c for c, _ in pairs])


def add(v: Vars, weights: Mapping[int, int]) -> None:
    v.model.maximize(_merged(v, weights))


def band_expression(v: Vars, band: int) -> Any:
    return _merged(v, {}, only=band)
