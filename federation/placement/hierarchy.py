"""Hierarchical queues (Volcano ``spec.parent``): fair share split level by level.

Volcano's hierarchical queues (``docs/design/hierarchical-queue-on-capacity-plugin.md``,
the capacity plugin) form a tree under an implicit ``root``: a parent's ``capability``
caps what its whole subtree may use, its ``guarantee`` covers its children's, and its
``weight`` competes only with its siblings. So the fair share is water-filled per level:
root's children share the federation by weight (each capped by its subtree's demand and
its own capability, floored by its guarantee), then each parent's share is water-filled
among its children the same way, down to the leaves. A parent that also holds jobs of its
own takes part in that split as one more child, with its own weight.

``fair_shares`` (placement/fairshare.py) calls ``hierarchical_shares`` only when some queue
has a parent other than root, so flat federations keep their exact, previous behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from federation.domain.queues import Queue
from federation.domain.resources import Resources, total

ROOT = "root"
Bounds = dict[str, tuple[float, float, int]]
WaterFill = Callable[[Bounds, float], dict[str, float]]
SharesOf = Callable[[Queue, Resources], tuple[float, float]]


def parent_of(queue: Queue) -> str:
    """The parent's name; ``root`` when none is set (Volcano's implicit root)."""
    return queue.parent if queue.parent and queue.parent != ROOT else ROOT


def is_hierarchical(queues: Sequence[Queue]) -> bool:
    return any(parent_of(q) != ROOT for q in queues)


def children(queues: Sequence[Queue]) -> dict[str, list[Queue]]:
    """Queue name (``root`` included) -> its child queues, in the given order."""
    out: dict[str, list[Queue]] = {}
    known = {q.name for q in queues}
    for q in queues:
        parent = parent_of(q)
        out.setdefault(parent if parent in known else ROOT, []).append(q)
    return out


def ancestors(queues: Mapping[str, Queue], name: str) -> list[str]:
    """The names above ``name`` up to (not including) root, nearest first (cycle-safe)."""
    out: list[str] = []
    cursor = queues.get(name)
    while cursor is not None and parent_of(cursor) != ROOT and parent_of(cursor) not in out:
        out.append(parent_of(cursor))
        cursor = queues.get(parent_of(cursor))
    return out


def subtree_demand(kids: Mapping[str, list[Queue]], demand: Mapping[str, Resources], name: str) -> Resources:
    return total([demand.get(name, Resources()),
                  *(subtree_demand(kids, demand, c.name) for c in kids.get(name, ()))])


def hierarchical_shares(queues: Sequence[Queue], demand: Mapping[str, Resources],
                        bounds_of: SharesOf, fill: WaterFill) -> dict[str, float]:
    """Each queue's fair share of its OWN jobs, split level by level from root."""
    kids = children(queues)
    out = {q.name: 0.0 for q in queues}
    self_key = "\0self"  # a parent's own jobs, as one more child of it

    def split(name: str, queue: Queue | None, share: float) -> None:
        bounds: Bounds = {}
        for child in kids.get(name, ()):
            want = subtree_demand(kids, demand, child.name)
            if want:
                floor, cap = bounds_of(child, want)
                bounds[child.name] = (floor, cap, child.weight)
        own = demand.get(name, Resources()) if queue is not None else Resources()
        if own and queue is not None:
            floor, cap = bounds_of(Queue(queue.name, weight=queue.weight), own)
            bounds[self_key] = (0.0, cap, queue.weight)
        if not bounds:
            return
        for child_name, value in fill(bounds, share).items():
            if child_name == self_key:
                out[name] = value
            else:
                split(child_name, by_name[child_name], value)

    by_name = {q.name: q for q in queues}
    split(ROOT, None, 1.0)
    return out
