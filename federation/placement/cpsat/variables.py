"""Every decision variable of the placement model, created in one place.

* ``x[k, d]`` — how many gangs of job class ``k`` go into domain ``d`` (integer);
* ``p[k, d, node, task]`` — exact mode only: how many pods of ``task`` of those gangs sit
  on ``node`` (small rounds, where node-level packing is modelled exactly);
* ``e[v]`` — running gang ``v`` is evicted (boolean; only potential victims get one);
* ``r[q, b]`` — fair-share credit: units placed for queue ``q`` in band ``b`` that fill its
  deficit below its fair share (bounded by the remaining deficit).

Constraint and objective modules only read these; ``Window`` carries the round context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from federation.domain.plans import RunningJob
from federation.placement.cpsat.classes import JobClass
from federation.placement.eligibility import node_masks
from federation.placement.rounds import PlanningRound

Term = tuple[int, Any, int]  # (coefficient, variable, priority band the term belongs to)


@dataclass
class Window:
    """The slice of a round one model decides: some classes, their victims, band weights."""

    rnd: PlanningRound
    classes: list[JobClass]
    victims: list[RunningJob]
    weights: dict[int, int]  # band -> objective weight of that band's terms
    exact: bool
    fair_left: dict[str, int]  # queue -> fair-share deficit (units) still to fill


@dataclass
class Vars:
    model: cp_model.CpModel
    x: dict[tuple[int, int], Any] = field(default_factory=dict)
    p: dict[tuple[int, int, str, str], Any] = field(default_factory=dict)
    e: dict[str, Any] = field(default_factory=dict)
    r: dict[tuple[str, int], Any] = field(default_factory=dict)
    objective: list[Term] = field(default_factory=list)


def exact_nodes(w: Window, jc: JobClass, uid: int) -> list[str]:
    """Nodes of domain ``uid`` the class may use (exact mode)."""
    dom = w.rnd.state.domains[uid]
    allowed = w.rnd.allowed_nodes(dom.cluster, jc.jobs[0])
    return [n for n in dom.nodes if allowed is None or n in allowed]


def create(w: Window) -> Vars:
    v = Vars(cp_model.CpModel())
    m = v.model
    for jc in w.classes:
        for uid in jc.candidates:
            v.x[(jc.uid, uid)] = m.new_int_var(0, jc.cap[uid], f"x_{jc.uid}_{uid}")
            if w.exact:
                masks = node_masks(w.rnd.state.domains[uid].cluster, jc.jobs[0])
                for node in exact_nodes(w, jc, uid):
                    for i, (task, replicas, _) in enumerate(jc.tasks):
                        if not masks.get(node, 0) & (1 << i):
                            continue  # the task's nodeSelector / affinity / tolerations exclude it
                        v.p[(jc.uid, uid, node, task)] = m.new_int_var(
                            0, replicas * jc.cap[uid], f"p_{jc.uid}_{uid}_{node}_{task}"
                        )
    for victim in w.victims:
        v.e[victim.job.name] = m.new_bool_var(f"e_{victim.job.name}")
    for jc in w.classes:
        key = (jc.queue, jc.band)
        left = w.fair_left.get(jc.queue, 0)
        if key not in v.r and left > 0:
            v.r[key] = m.new_int_var(0, left, f"r_{jc.queue}_{jc.band}")
    return v
