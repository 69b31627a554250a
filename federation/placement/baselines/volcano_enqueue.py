"""Volcano's ``enqueue`` action for the ``volcano-greedy`` baseline: which jobs may allocate.

Volcano does not let every pending PodGroup compete for nodes. Its default action list is
``enqueue, allocate, backfill`` (``installer/helm/chart/volcano/config/volcano-scheduler.conf``)
and ``allocate`` only looks at jobs whose PodGroup is ``Inqueue``. The ``enqueue`` action
(``pkg/scheduler/actions/enqueue/enqueue.go``) walks queues in queue order and each
queue's pending jobs in job order (priority, then creation time). A job becomes Inqueue
when every ``JobEnqueueable`` plugin permits it. A rejected job stays Pending and the
walk carries on with the queue's next job. Once Inqueue, a job keeps its place until it
runs.

Two plugins of the default configuration vote. We model them from their published source;
no code is copied:

* **overcommit** (``pkg/scheduler/plugins/overcommit/overcommit.go``): the cluster's
  ``idle = total allocatable x overcommit-factor (1.2) - used``. A job is permitted when
  ``inqueue + minResources <= idle``, where ``inqueue`` sums the minResources of the jobs
  already Inqueue and not yet running.
* **proportion** (``pkg/scheduler/plugins/proportion/proportion.go``, ``AddJobEnqueueableFn``):
  the queue's ``allocated + inqueue + minResources`` must fit its ``realCapability``. That
  is the cluster total less every queue's guarantee, plus the queue's own guarantee,
  capped by its ``capability``.

The effect is an admission gate that acts as a soft reservation. A big gang that is
Inqueue keeps its minResources counted, so later jobs are not admitted beyond the
overcommit budget while it waits for room.

Modelling choices:

* Each member cluster runs its own Volcano, so the budgets are per cluster. A job is gated
  in the cluster that volcano-global/Karmada dispatched it to (the first with summed
  room). When no cluster has room now, Karmada does not bind it and no Volcano gates it,
  unless only one cluster is allowed: then it waits in that cluster's enqueue, as on a
  single Volcano cluster. An earlier version pinned such jobs to the first cluster by
  name that could hold them. On ``fleet-4clusters`` that queued most of the backlog on
  one cluster while the others idled (volcano-greedy utilisation 0.37, JCT 1.38x cpsat).
  That was an artefact of the model, not Volcano's behaviour.
* Inqueue persists across sessions. A job that the previous round left pending for a
  reason other than "not enqueued" was Inqueue. It keeps its place first and unconditionally
  in the cluster that round named (``Unplaced.closest_cluster``), as Volcano never
  dequeues a job.
* A rejected job is reported with the existing vocabulary: ``queue-capability`` for
  proportion, ``capacity`` for overcommit. The reason says "not enqueued", and the next
  round reads that to tell admitted jobs from the rest.
"""

from __future__ import annotations

from collections.abc import Iterable

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, Plan
from federation.domain.resources import Resources, total

OVERCOMMIT_FACTOR = 1.2
NOT_ENQUEUED = "not enqueued"


def _fits(need: Resources, room: Resources) -> bool:
    """Every resource ``need`` asks for fits ``room`` (Volcano's LessEqualWithDimension on minResources)."""
    return all(v <= room.get(k) for k, v in need if v > 0)


class EnqueueGate:
    """Per-cluster overcommit and per-(cluster, queue) proportion budgets of one round."""

    def __init__(self, snapshot: FederationSnapshot, previous: Plan | None) -> None:
        self.snapshot = snapshot
        self._alloc: dict[str, Resources] = {}
        self._used: dict[str, Resources] = {}
        self._inqueue: dict[str, Resources] = {}
        self._queue_alloc: dict[tuple[str, str], Resources] = {}
        self._queue_inqueue: dict[tuple[str, str], Resources] = {}
        for c in snapshot.clusters:
            nodes = [n for n in c.nodes if n.usable] if c.healthy else []
            alloc = total(n.allocatable for n in nodes)
            self._alloc[c.name] = alloc
            self._used[c.name] = alloc - total(n.free for n in nodes)
        for run in snapshot.running:
            key = (run.placement.cluster, run.job.queue)
            self._queue_alloc[key] = self._queue_alloc.get(key, Resources()) + run.job.requests
        self._guarantees = total(q.guarantee for q in snapshot.queues if q.guarantee is not None)
        # Jobs that were Inqueue last round: pending for another reason than "not enqueued".
        self.admitted: dict[str, str] = {}
        if previous is not None:
            for u in previous.unplaced:
                if not u.reason.startswith(NOT_ENQUEUED) and u.closest_cluster is not None:
                    self.admitted[u.job] = u.closest_cluster

    def hold(self, jobs: Iterable[tuple[Job, Resources]]) -> None:
        """Count the minResources of jobs Inqueue since earlier rounds (they never leave)."""
        for job, need in jobs:
            cluster = self.admitted.get(job.name)
            if cluster is not None and cluster in self._alloc:
                self._add_inqueue(job, cluster, need, +1)

    def real_capability(self, queue_name: str, cluster: str) -> Resources:
        """Cluster total - all guarantees + own guarantee, capped by capability (per resource)."""
        queue = self.snapshot.queue(queue_name)
        alloc = self._alloc[cluster]
        amounts = dict(alloc.amounts)
        for k, v in self._guarantees:
            amounts[k] = max(0, amounts.get(k, 0) - v)
        if queue is not None and queue.guarantee is not None:
            for k, v in queue.guarantee:
                amounts[k] = amounts.get(k, 0) + v
        if queue is not None and queue.capability is not None:
            for k, v in queue.capability:
                amounts[k] = min(amounts.get(k, v), v)
        return Resources(amounts)

    def verdict(self, job: Job, need: Resources, cluster: ClusterSnapshot) -> str | None:
        """None when Volcano in ``cluster`` enqueues ``job`` now (and counts it), else the rejecting plugin."""
        name = cluster.name
        if self.admitted.get(job.name) == name:
            return None  # counted by ``hold``
        idle = Resources({k: int(v * OVERCOMMIT_FACTOR) for k, v in self._alloc[name]}) - self._used[name]
        if not _fits(self._inqueue.get(name, Resources()) + need, idle):
            return "overcommit"
        key = (name, job.queue)
        mine = self._queue_alloc.get(key, Resources()) + self._queue_inqueue.get(key, Resources()) + need
        if not _fits(mine, self.real_capability(job.queue, name)):
            return "proportion"
        self.admitted[job.name] = name
        self._add_inqueue(job, name, need, +1)
        return None

    def allocated(self, job: Job, cluster: str, need: Resources) -> None:
        """The job started in ``cluster``: its minResources move from inqueue to used/allocated."""
        if self.admitted.get(job.name) == cluster:
            self._add_inqueue(job, cluster, need, -1)
        self._used[cluster] = self._used[cluster] + need
        key = (cluster, job.queue)
        self._queue_alloc[key] = self._queue_alloc.get(key, Resources()) + need

    def _add_inqueue(self, job: Job, cluster: str, need: Resources, sign: int) -> None:
        amount = need if sign > 0 else Resources() - need
        key = (cluster, job.queue)
        self._inqueue[cluster] = self._inqueue.get(cluster, Resources()) + amount
        self._queue_inqueue[key] = self._queue_inqueue.get(key, Resources()) + amount


def rejection(plugin: str, cluster: str) -> tuple[str, str]:
    """(BLOCKED_BY name, reason) for a job Volcano in ``cluster`` did not enqueue."""
    if plugin == "proportion":
        return "queue-capability", f"{NOT_ENQUEUED} in {cluster}: the queue's allocated + inqueue would exceed " \
                                   f"its real capability (Volcano proportion)"
    return "capacity", f"{NOT_ENQUEUED} in {cluster}: inqueue + minResources exceed the idle resources x " \
                       f"{OVERCOMMIT_FACTOR:g} (Volcano overcommit)"
