"""Topology: hard tier limits prune candidates; every tier above the lowest costs.

Hard ``networkTopology`` limits never reach the model as constraints: ``classes`` only
offers domains of tier <= the limit resolved per cluster (``highestTierAllowed`` or
``highestTierName``), so an infeasible tier cannot even be expressed. The preference is an
objective term: ``TIER_PENALTY`` per unit per tier above the lowest tier any allowed empty
cluster could offer the gang (capped at ``MAX_TIER_STEPS`` so a placement always beats
leaving the gang pending — soft mode never blocks; jobs without a topology prefer lower
tiers too, since every tier crossed slows their collectives).
"""

from __future__ import annotations

from federation.placement.cpsat.variables import Vars, Window
from federation.placement.score import TIER_PENALTY


def add(w: Window, v: Vars) -> None:
    by_uid = {jc.uid: jc for jc in w.classes}
    sc = w.rnd.scoring
    for (k, uid), x in v.x.items():
        jc = by_uid[k]
        steps = sc.tier_steps(jc.jobs[0], w.rnd.state.domains[uid].tier)
        if steps:
            v.objective.append((-TIER_PENALTY * steps * jc.units, x, jc.band))
