"""Packing: prefer fuller domains (best fit), the lowest layer of the objective.

Each placed unit costs the chosen domain's emptiness at round start (0 = full .. 7 =
empty, ``Scoring.emptiness``), so among equally good placements the model fills partly
used domains and keeps empty ones whole for the next big gang.
"""

from __future__ import annotations

from collections.abc import Callable

from federation.placement.cpsat.variables import Vars, Window
from federation.placement.state import DomainState


def add(w: Window, v: Vars) -> None:
    sc = w.rnd.scoring
    per_domain_cost(w, v, lambda dom: sc.emptiness(dom.cluster.name, dom.domain.name))


def per_domain_cost(w: Window, v: Vars, cost: Callable[[DomainState], int]) -> None:
    """Charge every placed unit ``cost`` of its candidate domain (``fit``, ``anticipation``)."""
    by_uid = {jc.uid: jc for jc in w.classes}
    for (k, uid), x in v.x.items():
        jc = by_uid[k]
        c = cost(w.rnd.state.domains[uid])
        if c:
            v.objective.append((-c * jc.units, x, jc.band))
