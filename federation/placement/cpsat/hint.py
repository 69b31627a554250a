"""Hint: the greedy decisions for the window, as a complete assignment (``AddHint``).

CP-SAT treats a complete, feasible hint specially (it is tried first and becomes the
first incumbent), so the model starts at least as good as the greedy plan and only has to
improve on it. Counts come from the greedy placements of the window's jobs; exact-mode pod
counts from their pod assignments; fairness credits from the same band-ordered deficit
consumption as ``score``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from federation.domain.plans import Placement
from federation.placement.cpsat.variables import Vars, Window


def add(w: Window, v: Vars, placements: Mapping[str, Placement], evicted: set[str]) -> None:
    st = w.rnd.state
    xs: Counter[tuple[int, int]] = Counter()
    ps: Counter[tuple[int, int, str, str]] = Counter()
    units: Counter[tuple[str, int]] = Counter()
    for jc in w.classes:
        for job in jc.jobs:
            p = placements.get(job.name)
            if p is None:
                continue
            uid = st.uid_of.get((p.cluster, p.hypernode))
            if uid is None or (jc.uid, uid) not in v.x:
                continue
            xs[(jc.uid, uid)] += 1
            units[(jc.queue, jc.band)] += jc.units
            for a in p.pods:
                ps[(jc.uid, uid, a.node, a.task)] += 1
    for xkey, var in v.x.items():
        v.model.add_hint(var, xs.get(xkey, 0))
    for pkey, var in v.p.items():
        v.model.add_hint(var, ps.get(pkey, 0))
    for name, var in v.e.items():
        v.model.add_hint(var, 1 if name in evicted else 0)
    left = dict(w.fair_left)
    for (queue, band), var in sorted(v.r.items(), key=lambda kv: kv[0][1]):
        credit = min(units.get((queue, band), 0), left.get(queue, 0))
        left[queue] = left.get(queue, 0) - credit
        v.model.add_hint(var, credit)
