"""Preferred node affinity: up to ``PREFER_MAX`` per placed unit for a domain whose nodes
match the tasks' preferred terms (``Scoring.preference``, ``placement/preference.py``).

Below topology by construction (``PREFER_MAX + PACK_PENALTY_MAX + GUARD_MAX <
TIER_PENALTY``): a preferred domain never beats a lower tier, and among domains of one
tier it decides unless packing and anticipation differ by more.
"""

from __future__ import annotations

from federation.placement.cpsat.variables import Vars, Window


def add(w: Window, v: Vars) -> None:
    by_uid = {jc.uid: jc for jc in w.classes}
    sc = w.rnd.scoring
    for (k, uid), x in v.x.items():
        jc = by_uid[k]
        dom = w.rnd.state.domains[uid]
        bonus = sc.preference(jc.jobs[0], dom.cluster.name, dom.domain.name)
        if bonus:
            v.objective.append((bonus * jc.units, x, jc.band))
