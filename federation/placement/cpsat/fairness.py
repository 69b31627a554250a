"""Fairness: credit for units placed for queues still below their DRF fair share.

``r[q, b] <= units placed for q in band b`` and ``sum_b r[q, b] <= deficit(q)`` — the
deficit (fair share minus share at round start, in units) left over by higher bands that
were already decided. Each credited unit earns ``FAIR_BONUS`` (four times a placed unit's
base value) weighted by its band: placing for a starved queue beats placing slightly more
for a queue already at its share, but never beats a higher priority band.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from federation.placement.cpsat.variables import Vars, Window
from federation.placement.score import FAIR_BONUS


def add(w: Window, v: Vars) -> None:
    m = v.model
    by_uid = {jc.uid: jc for jc in w.classes}
    placed: dict[tuple[str, int], list[tuple[int, Any]]] = defaultdict(list)
    for (k, _uid), x in v.x.items():
        jc = by_uid[k]
        placed[(jc.queue, jc.band)].append((jc.units, x))
    per_queue: dict[str, list[Any]] = defaultdict(list)
    for (queue, band), r in v.r.items():
        terms = placed.get((queue, band), [])
        m.add(r <= sum(u * x for u, x in terms))
        per_queue[queue].append(r)
        v.objective.append((FAIR_BONUS, r, band))
    for queue, rs in per_queue.items():
        m.add(sum(rs) <= w.fair_left.get(queue, 0))
