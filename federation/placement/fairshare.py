"""Weighted dominant-resource fair share across the whole federation.

Fairness is defined once here so that the planner's objective, the reclaim rules and the
``fairnessMaxDeviation`` bench metric all measure against the same target.

A queue's fair share is a *dominant share* (fraction of federation capacity in the
resource the queue uses most, as in DRF — Ghodsi et al. 2011; Armada
``scheduling/fairness``) obtained by weighted water-filling (Volcano ``proportion``):

* only queues with demand take part; each is capped by its demand, its ``capability`` and
  an explicit ``deserved`` when set, and floored by its ``guarantee`` (also capped by demand:
  an idle guarantee is reserved, not a share of work);
* the remaining capacity rises like water, each queue receiving ``level x weight`` until it
  hits its cap; capacity a capped queue cannot use flows to the others;
* hierarchical queues (``parent``) are water-filled level by level down the tree
  (placement/hierarchy.py).

Simplification (documented in docs/design/placement.md): shares of different queues are
added as if they were in the same resource, i.e. the sum of dominant shares is at most 1.
This is exact when every queue is dominated by the same resource — GPUs for training jobs —
and conservative otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.placement.hierarchy import hierarchical_shares, is_hierarchical


def dominant_share(usage: Resources, capacity: Resources) -> float:
    """max over resources of usage / capacity (resources the capacity lacks are ignored)."""
    return usage.dominant_share(capacity)


def _scaled_share(limit: Resources | None, demand: Resources, capacity: Resources, absent: float) -> float:
    """Dominant share reached by scaling ``demand`` down until it fits under ``limit``.

    ``absent`` is returned when the limit constrains none of the demanded resources.
    """
    if limit is None:
        return absent
    want = dominant_share(demand, capacity)
    scale: float | None = None
    for key, amount in demand:
        if amount > 0 and key in limit.amounts:
            ratio = limit.get(key) / amount
            scale = ratio if scale is None else min(scale, ratio)
    if scale is None:
        return absent
    return min(1.0, scale) * want


def share_bounds(
    queue: Queue, demand: Resources, capacity: Resources
) -> tuple[float, float]:
    """(floor, cap) of ``queue``'s fair share in dominant-share units."""
    want = dominant_share(demand, capacity)
    cap = min(want, _scaled_share(queue.capability, demand, capacity, want))
    if queue.deserved is not None:
        cap = min(cap, _scaled_share(queue.deserved, demand, capacity, want))
    floor = min(cap, _scaled_share(queue.guarantee if queue.guarantee else None, demand, capacity, 0.0))
    return floor, cap


def fair_shares(
    queues: Sequence[Queue], demand: Mapping[str, Resources], capacity: Resources
) -> dict[str, float]:
    """Weighted water-filled fair share of every queue (0 for queues without demand).

    ``demand`` is keyed by queue name and should hold what the queue wants in total
    (running usage plus pending requests); ``capacity`` is the federation's total.
    """
    if is_hierarchical(queues):  # split level by level down the queue tree (placement/hierarchy.py)
        return hierarchical_shares(queues, demand, lambda q, want: share_bounds(q, want, capacity), water_fill)
    bounds: dict[str, tuple[float, float, int]] = {}
    for queue in queues:
        want = demand.get(queue.name, Resources())
        if not want:
            continue
        floor, cap = share_bounds(queue, want, capacity)
        bounds[queue.name] = (floor, cap, queue.weight)
    out = {q.name: 0.0 for q in queues}
    out.update(water_fill(bounds, 1.0))
    return out


def water_fill(bounds: Mapping[str, tuple[float, float, int]], available: float) -> dict[str, float]:
    """Share ``available`` among (floor, cap, weight) entries: floors first, then by weight."""
    out: dict[str, float] = {}
    if not bounds:
        return out
    total_floor = sum(b[0] for b in bounds.values())
    if total_floor >= available:  # guarantees oversubscribed: scale them down proportionally
        for name, (floor, _, _) in bounds.items():
            out[name] = floor / total_floor * available if total_floor else 0.0
        return out
    if sum(b[1] for b in bounds.values()) <= available:
        for name, (_, cap, _) in bounds.items():
            out[name] = cap
        return out

    def filled(level: float) -> float:
        return sum(min(cap, max(floor, level * weight)) for floor, cap, weight in bounds.values())

    low, high = 0.0, max(cap / weight for _, cap, weight in bounds.values())
    for _ in range(100):
        mid = (low + high) / 2
        if filled(mid) > available:
            high = mid
        else:
            low = mid
    for name, (floor, cap, weight) in bounds.items():
        out[name] = min(cap, max(floor, low * weight))
    return out


def guarantee_share(queue: Queue, capacity: Resources) -> float:
    """The dominant share of the queue's guarantee (0 when it has none)."""
    return dominant_share(queue.guarantee, capacity)
