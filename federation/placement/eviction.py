"""Who may evict whom: the one preemption rule, shared by the greedy search
(``preempt``), the CP-SAT model (``cpsat.preemption``), its decoder (``cpsat.decode``)
and ``validate``.

Modelled on Volcano's ``preempt`` and ``reclaim`` actions (pkg/scheduler/actions/preempt,
actions/reclaim: preemption inside a queue by job priority; reclaim across queues from a
reclaimable queue that is over its deserved share), made gang-aware: a whole running gang
is the unit evicted.

* **preempt** — the victim is in the taker's own queue, in a strictly lower priority band;
* **reclaim** — the victim's queue is another, ``reclaimable`` one, above its fair share,
  with a queue priority not above the taker's, in a band not above the taker's; and the
  taker's queue is below its own fair share.

The share conditions (``under``, ``victim_over``) are passed in, because when they are
read is part of each planner's design (live for the greedy search, at the window's start
for the model and its decoder); ``validate`` checks the rule with both taken as true.
"""

from __future__ import annotations

from typing import Literal

from federation.domain.queues import Queue

Eviction = Literal["preempt", "reclaim"]


def may_evict(queue: Queue, band: int, under: bool,
              victim_queue: Queue, victim_band: int, victim_over: bool) -> Eviction | None:
    """How a pending gang of ``queue`` in ``band`` may evict a running gang of
    ``victim_queue`` in ``victim_band`` (lower band = higher priority), or None."""
    if victim_queue.name == queue.name:
        return "preempt" if band < victim_band else None
    if (under and band <= victim_band and victim_queue.reclaimable and victim_over
            and queue.priority >= victim_queue.priority):
        return "reclaim"
    return None
