"""Queue quotas: capability is a hard cap; other queues' unused guarantees are never lent.

Capability: for every queue with classes in the window and every resource its capability
lists and its classes request, usage after the round (running, minus its evicted gangs,
plus what the model places) stays within the capability.

Guarantees (Volcano ``capacity`` plugin): for every queue Q that places anything, the
federation's free capacity left at the end must still cover the unused guarantees of every
OTHER queue, ``g[q', r] >= guarantee - usage_after`` — so a queue may eat into its own
guarantee, never into someone else's. Enforced only when Q places (``active[Q]``), because
a cluster already full of unguaranteed work must not make the model infeasible.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from federation.placement.cpsat.variables import Vars, Window


def _queue_terms(w: Window, v: Vars) -> dict[str, list[tuple[Any, Any]]]:
    """queue -> [(requests Resources-like vector, x var)] of the window's classes."""
    out: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    by_uid = {jc.uid: jc for jc in w.classes}
    for (k, _uid), x in v.x.items():
        out[by_uid[k].queue].append((w.rnd.ledger.req(by_uid[k].jobs[0]), x))
    return out


def add(w: Window, v: Vars) -> None:
    led = w.rnd.ledger
    m = v.model
    placed = _queue_terms(w, v)
    freed: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for victim in w.victims:
        freed[victim.job.queue].append((led.req(victim.job), v.e[victim.job.name]))
    for queue, terms in placed.items():
        cap = led.queues[queue].capability
        if cap is None:
            continue
        for key, limit in cap:
            if not any(req.get(key) for req, _ in terms):
                continue
            room = limit - led.usage[queue].get(key)
            lhs = sum(req.get(key) * x for req, x in terms) - sum(req.get(key) * e for req, e in freed[queue])
            m.add(lhs <= room)
    guarded = [q for q in led.queues.values() if q.guarantee]
    if not guarded or not placed:
        return
    keys = sorted({k for q in guarded for k, _ in q.guarantee})
    unused: dict[tuple[str, str], Any] = {}
    for q in guarded:
        for key, amount in q.guarantee:
            var = m.new_int_var(0, max(0, amount), f"g_{q.name}_{key}")
            gone = sum(req.get(key) * x for req, x in placed.get(q.name, []))
            back = sum(req.get(key) * e for req, e in freed.get(q.name, []))
            m.add(var >= amount - led.usage[q.name].get(key) + back - gone)
            unused[(q.name, key)] = var
    for queue, terms in placed.items():
        active = m.new_bool_var(f"active_{queue}")
        m.add(sum(x for _, x in terms) <= sum(len(jc.jobs) for jc in w.classes) * active)
        for key in keys:
            if not any(req.get(key) for req, _ in terms):
                continue
            used = sum(req.get(key) * x for ts in placed.values() for req, x in ts)
            back = sum(req.get(key) * e for fs in freed.values() for req, e in fs)
            held = sum(var for (q, k), var in unused.items() if k == key and q != queue)
            m.add(led.free_total.get(key) - used + back >= held).only_enforce_if(active)
