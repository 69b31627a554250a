"""Capacity: what goes into a domain fits in it — exactly per node, or as aggregates.

Exact mode (small rounds): for every node, the pods the model puts there fit in its free
resources plus what evicted victims release on it. This is the real rule, so a solution
decodes without any repair.

Aggregate mode (large rounds): for every domain ``D`` that is a candidate or an ancestor
of one, the gangs placed in ``D`` or below must fit in ``D``'s summed free vector, and —
because summed GPUs are not enough — in its *slots*: for each pod size ``s`` (powers of
two), a node with ``f`` free GPUs holds at most ``f // s`` pods of ``>= s`` GPUs, and
``sum floor(g_i / s) <= floor(sum g_i / s)`` makes ``sum over pods of floor(g / s)`` a valid
per-domain bound. This is a relaxation; the decode pass packs pods with ``pack_gang`` and
re-places (or leaves pending) the few gangs that do not pack.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from federation.placement.cpsat.classes import JobClass
from federation.placement.cpsat.preemption import victim_pods
from federation.placement.cpsat.variables import Vars, Window


def _used(w: Window) -> list[int]:
    """Resource indexes some class in the window requests."""
    width = len(w.rnd.state.keys)
    return [i for i in range(width) if any(jc.need[i] > 0 for jc in w.classes)]


def slot_use(w: Window, jc: JobClass) -> dict[int, int]:
    """Per slot size s > 1: sum over the gang's pods of floor(gpus / s)."""
    gi = w.rnd.state.gpu_index
    out = {}
    for size in w.rnd.state.slot_sizes:
        if size > 1:
            use = sum(p[gi] // size for p in jc.pods)
            if use:
                out[size] = use
    return out


def _exact(w: Window, v: Vars, used: list[int]) -> None:
    st = w.rnd.state
    tasks = {jc.uid: {t: vec for t, _, vec in jc.tasks} for jc in w.classes}
    cluster_of = {uid: st.domains[uid].cluster.name for _, uid in v.x}
    load: dict[tuple[str, str], list[tuple[tuple[int, ...], Any]]] = defaultdict(list)
    for (k, uid, node, task), var in v.p.items():
        load[(cluster_of[uid], node)].append((tasks[k][task], var))
    freed: dict[tuple[str, str], list[tuple[tuple[int, ...], Any]]] = defaultdict(list)
    for victim in w.victims:
        for node, vec in victim_pods(w, victim):
            freed[(victim.placement.cluster, node)].append((vec, v.e[victim.job.name]))
    for (cluster, node), terms in load.items():
        free = st.node_free[cluster][node]
        for i in used:
            lhs = [(vec[i], var) for vec, var in terms if vec[i]]
            lhs += [(-vec[i], e) for vec, e in freed.get((cluster, node), ()) if vec[i]]
            if lhs:
                v.model.add(cp_model.LinearExpr.weighted_sum([t[1] for t in lhs], [t[0] for t in lhs]) <= free[i])


def _aggregate(w: Window, v: Vars, used: list[int]) -> None:
    st = w.rnd.state
    gi = st.gpu_index
    by_uid = {jc.uid: jc for jc in w.classes}
    slots = {jc.uid: slot_use(w, jc) for jc in w.classes}
    load: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for (k, uid), x in v.x.items():
        for anc in st.ancestors(uid):
            load[anc].append((k, x))
    freed: dict[int, list[tuple[tuple[int, ...], dict[int, int], Any]]] = defaultdict(list)
    for victim in w.victims:
        per_dom: dict[int, tuple[list[int], dict[int, int]]] = {}
        for node, vec in victim_pods(w, victim):
            for uid in st.node_domains.get((victim.placement.cluster, node), ()):
                acc, sl = per_dom.setdefault(uid, ([0] * len(vec), {}))
                for i, a in enumerate(vec):
                    acc[i] += a
                for size in st.slot_sizes:
                    if size > 1 and vec[gi] // size:
                        sl[size] = sl.get(size, 0) + vec[gi] // size
        for uid, (acc, sl) in per_dom.items():
            freed[uid].append((tuple(acc), sl, v.e[victim.job.name]))
    for uid, terms in load.items():
        dom = st.domains[uid]
        rel = freed.get(uid, [])
        for i in used:
            coefs = [by_uid[k].need[i] for k, _ in terms] + [-vec[i] for vec, _, _ in rel]
            xs = [x for _, x in terms] + [e for _, _, e in rel]
            v.model.add(cp_model.LinearExpr.weighted_sum(xs, coefs) <= dom.free[i])
        for size in st.slot_sizes:
            coefs = [slots[k].get(size, 0) for k, _ in terms]
            if size <= 1 or not any(coefs):
                continue
            coefs += [-sl.get(size, 0) for _, sl, _ in rel]
            xs = [x for _, x in terms] + [e for _, _, e in rel]
            v.model.add(cp_model.LinearExpr.weighted_sum(xs, coefs) <= dom.index[size])


def add(w: Window, v: Vars) -> None:
    used = _used(w)
    if w.exact:
        _exact(w, v, used)
    else:
        _aggregate(w, v, used)
