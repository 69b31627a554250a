"""Anticipation: keep whole room above the chosen domain for the gangs still queued.

Why: a placement also decides what later placements can have. A small job put in a leaf of
an empty spine, when a leaf of a busy spine would hold it as well, cuts the one domain an
eight-node gang could use at its lowest tier. Fragments elsewhere would have done. The
gang then waits longer, or runs wider and slower. This is the lever Volcano's HyperNode
bin-packing aims at, but Volcano scores one job at a time. Here the term prices every
candidate of every class in the same model, so the choice is made jointly over all
pending gangs and all clusters.

The term (``Scoring.guard``, computed for any plan by ``placement.score``): a placed unit
pays ``GUARD_MAX`` when a domain strictly *above* its chosen domain was (nearly) whole at
round start and its tier is the lowest feasible tier of some pending gang. "Needs" is the
queued demand: with no pending gang that needs a spine, breaking a spine costs nothing.
Small jobs then go wherever best fit puts them. A graded version (every ancestor's
emptiness) moved small jobs out of the tightest leaves. It cost wait and JCT on
``volcano-1cluster``, so only whole domains are guarded.

Layering (``docs/design/placement.md``): fairness > amount placed > tier > anticipation
+ packing. ``GUARD_MAX + PACK_PENALTY_MAX`` (13) stays below one tier step (16), and far below
a placement's value (64), so the term never leaves work pending and never buys a wider
tier. The greedy seed applies the same preference: among equally full domains,
``PlanningRound.find_home`` takes the one with the lowest ``guard``.

The same layer prices node classes on fleets of mixed node sizes (``Scoring.oversize``):
a pod that takes a node class the largest queued pods need, when a smaller class would hold
it, pays ``OVERSIZE`` per unit. It depends on the job as well as the domain, so the cost is
per job class and domain (``Scoring.anticipation``: the larger of guard and class).

What it cannot do: room frees where jobs happen to finish, and the planner knows no
runtimes. A gang that arrives when the free nodes are scattered still gets them scattered
(or, with ``--hold-gangs-after``, gets nodes held at its lowest tier: ``placement/admission.py``).
"""

from __future__ import annotations

from federation.placement.cpsat.fit import per_unit_cost
from federation.placement.cpsat.variables import Vars, Window


def add(w: Window, v: Vars) -> None:
    sc = w.rnd.scoring
    per_unit_cost(w, v, lambda job, dom: sc.anticipation(job, dom.cluster.name, dom.domain.name))
