"""Per-queue accounting for one round: usage, fair share, capability and guarantees.

One ledger answers every queue-level question the planners ask, so the greedy planner,
the CP-SAT model, the score and ``validate()`` all use the same numbers:

* usage = requests of the queue's running jobs (minus preempted, plus placed this round);
* fair share = weighted DRF water-filling over queues with demand (``fairshare``);
* capability = hard cap on usage;
* guarantees are never lent: capacity a queue is guaranteed but not using is held back
  from every other queue (Volcano ``capacity`` plugin semantics), federation-wide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, RunningJob
from federation.domain.queues import Queue
from federation.domain.resources import Resources, total
from federation.placement.eligibility import ShapeIds
from federation.placement.fairshare import dominant_share, fair_shares
from federation.placement.hierarchy import ancestors, is_hierarchical

# Tolerance of every share comparison (below / above a fair share): shares are sums of
# float fractions, and a queue exactly at its share must count as neither.
EPS = 1e-9


def _sums(queues: Iterable[str], items: Iterable[tuple[str, Resources]]) -> dict[str, Resources]:
    """Per-queue sums of resource vectors (plain int accumulation, one Resources per queue)."""
    acc: dict[str, dict[str, int]] = {q: {} for q in queues}
    for queue, res in items:
        bucket = acc[queue]
        for key, value in res.amounts.items():
            bucket[key] = bucket.get(key, 0) + value
    return {q: Resources(v) for q, v in acc.items()}


def _job_requests(job: Job) -> Resources:
    """Requests of the gang's pods (every replica unless the job is elastic)."""
    acc: dict[str, int] = {}
    for task, count in zip(job.tasks, job.gang_counts, strict=True):
        for key, value in task.resources.amounts.items():
            acc[key] = acc.get(key, 0) + value * count
    return Resources(acc)


def _running_requests(run: RunningJob) -> Resources:
    """What a running job holds: the requests of the pods its placement started."""
    res = {t.name: t.resources for t in run.job.tasks}
    acc: dict[str, int] = {}
    for a in run.placement.pods:
        for key, value in res[a.task].amounts.items() if a.task in res else ():
            acc[key] = acc.get(key, 0) + value
    return Resources(acc)


def queue_of(snapshot: FederationSnapshot, name: str) -> Queue:
    """The named queue, or a default weight-1 queue when the snapshot lacks it."""
    return snapshot.queue(name) or Queue(name)


def federation_capacity(snapshot: FederationSnapshot) -> Resources:
    """Allocatable of every usable node of every healthy cluster."""
    return total(n.allocatable for c in snapshot.clusters if c.healthy for n in c.nodes if n.usable)


def federation_free(snapshot: FederationSnapshot) -> Resources:
    return total(n.free for c in snapshot.clusters if c.healthy for n in c.nodes if n.usable)


def _capacity_and_free(snapshot: FederationSnapshot) -> tuple[Resources, Resources]:
    """Both federation totals in one pass over the nodes (10,000 nodes: one loop, not two)."""
    alloc: dict[str, int] = {}
    free: dict[str, int] = {}
    for cluster in snapshot.clusters:
        if not cluster.healthy:
            continue
        for node in cluster.nodes:
            if node.usable:
                for key, value in node.allocatable.amounts.items():
                    alloc[key] = alloc.get(key, 0) + value
                for key, value in node.free.amounts.items():
                    free[key] = free.get(key, 0) + value
    return Resources(alloc), Resources(free)


@dataclass(frozen=True)
class Bands:
    """Priority bands: distinct (queue priority, job priority) pairs, highest first."""

    order: tuple[tuple[int, int], ...]

    def rank(self, key: tuple[int, int]) -> int:
        """0 for the highest band."""
        return self.order.index(key)


def band_key(snapshot: FederationSnapshot, job: Job) -> tuple[int, int]:
    return (queue_of(snapshot, job.queue).priority, job.priority)


def bands_of(snapshot: FederationSnapshot) -> Bands:
    keys = {band_key(snapshot, p.job) for p in snapshot.pending} | {band_key(snapshot, r.job) for r in snapshot.running}
    return Bands(tuple(sorted(keys, reverse=True)))


class QueueLedger:
    """Queue usage and limits; mutated as the round places and preempts."""

    def __init__(self, snapshot: FederationSnapshot) -> None:
        self.snapshot = snapshot
        self.capacity, self.free_total = _capacity_and_free(snapshot)
        names = {q.name for q in snapshot.queues}
        names |= {p.job.queue for p in snapshot.pending} | {r.job.queue for r in snapshot.running}
        self.queues = {n: queue_of(snapshot, n) for n in sorted(names)}
        self._req: dict[str, Resources] = {}
        # Gang shape ids of the round's jobs, shared with its Scoring and reasons.
        self.shapes = ShapeIds()
        self._gang_req: dict[int, Resources] = {}
        self._size: dict[str, float] = {}
        self._share: dict[str, tuple[Resources, float]] = {}
        self._running = frozenset(r.job.name for r in snapshot.running)
        for r in snapshot.running:  # fair share counts what runs (an elastic job may run fewer pods)
            if r.job.elastic:
                self._req[r.job.name] = _running_requests(r)
        usage = _sums(self.queues, ((r.job.queue, self.req(r.job)) for r in snapshot.running))
        pending = _sums(self.queues, ((p.job.queue, self.req(p.job)) for p in snapshot.pending))
        demand = {q: usage[q] + pending[q] for q in self.queues}
        self.start_usage = dict(usage)
        self.usage = usage
        self.fair = fair_shares(tuple(self.queues.values()), demand, self.capacity)
        self._guarded = tuple(q for q in self.queues.values() if q.guarantee)
        self._ancestors: dict[str, list[str]] = {}
        self._nested = is_hierarchical(tuple(self.queues.values()))

    def req(self, job: Job) -> Resources:
        """What the job's gang requests (``_job_requests``), memoised per job and per gang shape.

        Why per shape too: a re-plan of 10,000 pending jobs built 10,000 vectors for a few
        dozen distinct gang shapes (~50 ms); jobs of one shape now share one vector."""
        found = self._req.get(job.name)
        if found is None:
            shape = self.shapes(job)
            found = self._gang_req.get(shape)
            if found is None:
                found = self._gang_req[shape] = _job_requests(job)
            self._req[job.name] = found
        return found

    def share(self, queue: str) -> float:
        # Memoised on the usage object itself: Resources are immutable, and add/restore
        # replace the object, so an identity check is a complete invalidation rule.
        usage = self.usage[queue]
        found = self._share.get(queue)
        if found is not None and found[0] is usage:
            return found[1]
        value = dominant_share(usage, self.capacity)
        self._share[queue] = (usage, value)
        return value

    def start_share(self, queue: str) -> float:
        return dominant_share(self.start_usage[queue], self.capacity)

    def under(self, queue: str, margin: float = EPS) -> bool:
        """The queue's dominant share is more than ``margin`` below its fair share (it may
        reclaim; the fair-share reservation asks for a wider margin)."""
        return self.share(queue) < self.fair[queue] - margin

    def over(self, queue: str) -> bool:
        """The queue's dominant share is above its fair share (it may be reclaimed from)."""
        return self.share(queue) > self.fair[queue] + EPS

    def size(self, job: Job) -> float:
        found = self._size.get(job.name)
        if found is None:
            found = self._size[job.name] = dominant_share(self.req(job), self.capacity)
        return found

    def capability_ok(self, job: Job) -> bool:
        """The job's queue and every parent above it stay within their capability (a
        parent's capability caps its whole subtree, as Volcano's hierarchical queues)."""
        req = self.req(job)
        for name in (job.queue, *self.ancestors(job.queue)):
            cap = self.queues[name].capability if name in self.queues else None
            if cap is None:
                continue
            after = self.subtree_usage(name) + req
            if not all(after.get(k) <= v for k, v in cap if req.get(k) > 0):
                return False
        return True

    def ancestors(self, name: str) -> list[str]:
        found = self._ancestors.get(name)
        if found is None:
            found = self._ancestors[name] = ancestors(self.queues, name)
        return found

    def subtree_usage(self, name: str) -> Resources:
        """Usage of ``name`` and every queue below it."""
        if not self._nested:
            return self.usage[name]
        return total([u for q, u in self.usage.items() if q == name or name in self.ancestors(q)])

    def held_back(self, for_queue: str) -> Resources:
        """Unused guarantees of the other queues (never lent to ``for_queue``).

        Guarantees nest: a guarded queue's guarantee covers its subtree, so an inner
        guarantee counts only when no guarded queue above it is outside ``for_queue``'s
        own line (which may use its ancestors' guarantees).
        """
        acc = Resources()
        mine = {for_queue, *self.ancestors(for_queue)}
        for q in self._guarded:
            if q.name in mine:
                continue
            if any(a not in mine and self.queues[a].guarantee for a in self.ancestors(q.name) if a in self.queues):
                continue  # counted with the outer guarantee
            acc = acc + (q.guarantee - self.subtree_usage(q.name)).clamp_min_zero()
        return acc

    def guarantee_ok(self, job: Job) -> bool:
        if not self._guarded:
            return True
        held = self.held_back(job.queue)
        if not held:
            return True
        req = self.req(job)
        room = self.free_total - req
        return all(room.get(k) >= v for k, v in held if req.get(k) > 0)

    def add(self, job: Job, sign: int = 1, placed: Resources | None = None) -> None:
        """Record a placement (+1) or a preemption / undo (-1) of ``job``.

        ``placed``: what an elastic placement actually started (more than its gang), kept
        as the job's requests while it is placed so an undo gives back the same amount.
        """
        if placed is not None:
            self._req[job.name] = placed
        delta = self.req(job) if sign > 0 else self.req(job).scaled(-1)
        if sign < 0 and job.elastic and job.name not in self._running:
            self._req.pop(job.name, None)  # pending again: its gang requests
        self.usage[job.queue] = self.usage[job.queue] + delta
        self.free_total = self.free_total - delta

