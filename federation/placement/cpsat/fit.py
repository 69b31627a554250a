"""Packing: prefer the domain a job fills best (best fit), the lowest layer of the objective.

Each placed unit costs how empty its chosen domain would be with the job's own requests
added to it at round start (0 = full .. 7 = empty, ``Scoring.leftover``), so among equally
good placements the model fills partly used domains and keeps empty ones whole for the
next big gang. The cost depends on the job as well as the domain: a gang is not charged
for the room it needs, only for the room it leaves, so the term never prefers one job
over another of equal value (see ``Scoring.leftover`` for the measured reason).
"""

from __future__ import annotations

from collections.abc import Callable

from federation.domain.jobs import Job
from federation.placement.cpsat.variables import Vars, Window
from federation.placement.state import DomainState


def add(w: Window, v: Vars) -> None:
    sc = w.rnd.scoring
    per_unit_cost(w, v, lambda job, dom: sc.leftover(job, dom.cluster.name, dom.domain.name))


def per_unit_cost(w: Window, v: Vars, cost: Callable[[Job, DomainState], int]) -> None:
    """Charge every placed unit ``cost`` of its job class and candidate domain (``fit``, ``anticipation``)."""
    by_uid = {jc.uid: jc for jc in w.classes}
    for (k, uid), x in v.x.items():
        jc = by_uid[k]
        c = cost(jc.jobs[0], w.rnd.state.domains[uid])
        if c:
            v.objective.append((-c * jc.units, x, jc.band))
