"""Assignment: each job of a class is placed at most once, whole (gang, one domain).

A gang is one unit of ``x[k, d]``, so it can never span domains — and domains never span
clusters, so a gang never spans clusters. In exact mode the pods of the gangs counted in
``x[k, d]`` are spread over the nodes of ``d`` by ``p``: every replica of every task is on
some node of that domain. (Several gangs in one domain may share nodes; any split of their
pods is a valid per-gang split because the only per-gang rule is "inside ``d``".)
"""

from __future__ import annotations

from collections import defaultdict

from federation.placement.cpsat.variables import Vars, Window


def add(w: Window, v: Vars) -> None:
    m = v.model
    for jc in w.classes:
        xs = [v.x[(jc.uid, uid)] for uid in jc.candidates]
        if xs:
            m.add(sum(xs) <= len(jc.jobs))
    if not w.exact:
        return
    pods: dict[tuple[int, int, str], list[object]] = defaultdict(list)
    for (k, uid, _node, task), var in v.p.items():
        pods[(k, uid, task)].append(var)
    by_uid = {jc.uid: jc for jc in w.classes}
    for (k, uid), x in v.x.items():
        for task, replicas, _ in by_uid[k].tasks:
            m.add(sum(pods.get((k, uid, task), [])) == replicas * x)  # type: ignore[arg-type]  # ortools: sum of IntVars
