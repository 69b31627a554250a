"""Packing: prefer fuller domains (best fit), the lowest layer of the objective.

Each placed unit costs the chosen domain's emptiness at round start (0 = full .. 7 =
empty, ``Scoring.emptiness``), so among equally good placements the model fills partly
used domains and keeps empty ones whole for the next big gang.
"""

from __future__ import annotations

from federation.placement.cpsat.variables import Vars, Window


def add(w: Window, v: Vars) -> None:
    by_uid = {jc.uid: jc for jc in w.classes}
    sc = w.rnd.scoring
    for (k, uid), x in v.x.items():
        jc = by_uid[k]
        dom = w.rnd.state.domains[uid]
        empty = sc.emptiness(dom.cluster.name, dom.domain.name)
        if empty:
            v.objective.append((-empty * jc.units, x, jc.band))
