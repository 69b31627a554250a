"""Volcano's proportion plugin inside ``allocate``, for the ``volcano-greedy`` baseline.

Modelled from volcano-sh/volcano at ed72c7c (``pkg/scheduler/plugins/proportion/
proportion.go``, ``pkg/scheduler/actions/allocate/allocate.go``); no code is copied.
Besides admission (``volcano_enqueue``), proportion shapes ``allocate`` three ways:

* **deserved.** At session open every queue gets a ``deserved`` share by water-filling:
  the cluster's total is dealt out by queue weight, each queue capped per resource by its
  ``request`` (what it has allocated plus the pending pods of its Inqueue jobs: Volcano
  creates a job's pods only once its PodGroup is Inqueue) and its realCapability, floored
  at its guarantee; what a capped queue does not take is dealt again to the others.
* **queue order** (``QueueOrderFn``): priority first, then ``share`` = the largest, over
  resources, of allocated / deserved, lowest first.
* **allocatable and overused.** A task is allocated only while the queue's allocated plus
  the task stays within ``deserved`` (``AllocatableFn``), so a gang fits only when the whole
  gang does; a queue whose allocated has reached ``deserved`` in every resource is skipped
  for the rest of the action (``OverusedFn``). Room one queue's deserved covers but its
  jobs cannot use is therefore not given to another queue in this action: with Volcano's
  default actions (no ``reclaim``) this is not work-conserving.

Each member cluster runs its own Volcano, so this is computed per member cluster over the
jobs running or Inqueue there. A queue's guarantee is a federation quantity that
volcano-global enforces at dispatch (``volcano_enqueue``); flooring a member's deserved at
the whole federation guarantee would starve the other queues of any member smaller than it
(the artefact ``volcano_enqueue`` describes), so the floor applies only when the federation
is one cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from federation.domain.queues import Queue
from federation.domain.resources import Resources

EPSILON = 1e-6


def _fits(amount: dict[str, float], limit: dict[str, float], keys: Iterable[str]) -> bool:
    return all(amount.get(k, 0.0) <= limit.get(k, 0.0) + EPSILON for k in keys)


@dataclass
class QueueState:
    """One queue's proportion attributes in one member cluster."""

    queue: Queue
    allocated: dict[str, float]
    request: dict[str, float]
    deserved: dict[str, float]

    @property
    def share(self) -> float:
        """max over deserved's resources of allocated / deserved (1 when deserved is 0 and used)."""
        worst = 0.0
        for key, d in self.deserved.items():
            a = self.allocated.get(key, 0.0)
            share = (a / d) if d > 0 else (1.0 if a > 0 else 0.0)
            worst = max(worst, share)
        return worst

    @property
    def overused(self) -> bool:
        """deserved <= allocated in every resource (``OverusedFn``)."""
        keys = set(self.deserved) | set(self.allocated)
        return all(self.deserved.get(k, 0.0) <= self.allocated.get(k, 0.0) + EPSILON for k in keys)

    def allocatable(self, request: Resources) -> bool:
        """allocated + request <= deserved in the resources ``request`` asks for (``AllocatableFn``)."""
        after = dict(self.allocated)
        for k, v in request:
            after[k] = after.get(k, 0.0) + v
        return _fits(after, self.deserved, [k for k, v in request if v > 0])

    def allocate(self, request: Resources) -> None:
        for k, v in request:
            self.allocated[k] = self.allocated.get(k, 0.0) + v


def _as_dict(r: Resources) -> dict[str, float]:
    return {k: float(v) for k, v in r if v}


def water_fill(total: Resources, queues: Iterable[QueueState], capability: dict[str, Resources | None],
               guarantees: bool = True) -> None:
    """Set each queue's ``deserved`` as proportion's session open does (see module docstring);
    ``guarantees`` False leaves out the floor at each queue's guarantee."""
    states = list(queues)
    remaining = _as_dict(total)
    met: set[str] = set()
    for _ in range(1000):  # terminates well before: each pass meets a queue or empties the room
        weight = sum(max(s.queue.weight, 1) for s in states if s.queue.name not in met)
        if weight == 0:
            break
        before = dict(remaining)
        increased: dict[str, float] = {}
        decreased: dict[str, float] = {}
        for state in states:
            if state.queue.name in met:
                continue
            old = dict(state.deserved)
            new = dict(old)
            for k, v in remaining.items():
                new[k] = new.get(k, 0.0) + v * max(state.queue.weight, 1) / weight
            cap = capability.get(state.queue.name)
            if cap is not None:
                new = {k: min(v, float(cap.get(k))) if cap.get(k) > 0 else v for k, v in new.items()}
            new = {k: min(v, state.request.get(k, 0.0)) for k, v in new.items()}
            if guarantees and state.queue.guarantee is not None:
                for k, g in state.queue.guarantee:
                    new[k] = max(new.get(k, 0.0), float(g))
            state.deserved = new
            unchanged = all(abs(new.get(k, 0.0) - old.get(k, 0.0)) <= EPSILON for k in set(new) | set(old))
            if unchanged or _fits(state.request, new, state.request):
                met.add(state.queue.name)
            for k in set(new) | set(old):
                delta = new.get(k, 0.0) - old.get(k, 0.0)
                if delta > 0:
                    increased[k] = increased.get(k, 0.0) + delta
                elif delta < 0:
                    decreased[k] = decreased.get(k, 0.0) - delta
        remaining = {
            k: max(0.0, remaining.get(k, 0.0) + decreased.get(k, 0.0) - increased.get(k, 0.0))
            for k in set(remaining) | set(decreased)
        }
        if all(v <= EPSILON for v in remaining.values()) or all(
            abs(remaining.get(k, 0.0) - before.get(k, 0.0)) <= EPSILON for k in set(remaining) | set(before)
        ):
            break


class Proportion:
    """Proportion's per-queue state in one member cluster for one ``allocate`` action."""

    def __init__(self, total: Resources, queues: Iterable[Queue], allocated: dict[str, Resources],
                 requested: dict[str, Resources], guarantees: bool = True) -> None:
        by_name = {q.name: q for q in queues}
        names = sorted(set(allocated) | set(requested))
        self.queues: dict[str, QueueState] = {}
        for name in names:
            queue = by_name.get(name, Queue(name))
            used = _as_dict(allocated.get(name, Resources()))
            want = dict(used)
            for k, v in requested.get(name, Resources()):
                want[k] = want.get(k, 0.0) + v
            self.queues[name] = QueueState(queue, used, want, {})
        water_fill(total, self.queues.values(), {q.name: q.capability for q in by_name.values()}, guarantees)

    def state(self, queue: str) -> QueueState | None:
        return self.queues.get(queue)
