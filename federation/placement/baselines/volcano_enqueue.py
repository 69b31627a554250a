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

Modelling choices (a federation is "Volcano per member cluster behind volcano-global and
Karmada"):

* **overcommit is per member cluster.** Each member runs its own Volcano, so the idle
  budget is that cluster's. A job is gated in the cluster that volcano-global/Karmada
  dispatched it to (the first with summed room). When no cluster has room now, Karmada
  does not bind it and no Volcano gates it, unless only one cluster is allowed: then it
  waits in that cluster's enqueue, as on a single Volcano cluster.
* **proportion is per federation queue.** A queue's guarantee and capability are
  federation-wide quantities, and volcano-global's dispatcher is where they are enforced
  (its capacity plugin's Enqueueable, ``docs/design/queue-capacity-management.md`` in
  volcano-sh/volcano-global). The realCapability is therefore proportion's formula over
  the federation's total, and ``allocated + inqueue`` sums the queue's jobs in every
  cluster. The earlier model applied the whole federation guarantee inside every member
  (as a Duplicated Queue would): ``prod``'s 128-GPU guarantee left ``eth-central`` (64
  GPUs) and ``flat-small`` with a realCapability of 0 for every other queue, the
  name-ordered dispatcher sent ``research`` and ``interns`` jobs there first, and they
  were refused forever while the fleet idled (fleet-4clusters: 420 of 800 jobs never
  started, fairness deviation 0.52). On one cluster both readings are identical.
* **Inqueue persists, but Karmada re-dispatches.** A job that the previous round left
  pending for a reason other than "not enqueued" was Inqueue; it keeps its place first
  and unconditionally in the cluster that round named (``Unplaced.closest_cluster``), as
  Volcano never dequeues a job. Its pods exist and stay unschedulable, so
  karmada-descheduler (``--unschedulable-threshold``, default 5 min, checked every
  ``--descheduling-interval``; karmada-io/karmada ``docs/proposals/descheduler``) evicts
  them and karmada-scheduler binds the job afresh when the scheduler-estimator says its
  cluster cannot hold it (no summed room for the gang, or never within its hard tier
  limit) while another allowed cluster can. The model applies that at the next round
  instead of after 5 minutes (a round is at least 10 s apart). On one cluster there is
  no other cluster, so nothing is re-dispatched and the gate acts as Volcano's
  reservation, as before.
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
        self._queue_alloc: dict[str, Resources] = {}
        self._queue_inqueue: dict[str, Resources] = {}
        for c in snapshot.clusters:
            nodes = [n for n in c.nodes if n.usable] if c.healthy else []
            alloc = total(n.allocatable for n in nodes)
            self._alloc[c.name] = alloc
            self._used[c.name] = alloc - total(n.free for n in nodes)
        self._fleet = total(self._alloc.values())
        for run in snapshot.running:
            self._queue_alloc[run.job.queue] = self._queue_alloc.get(run.job.queue, Resources()) + run.job.requests
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

    def real_capability(self, queue_name: str) -> Resources:
        """Federation total - all guarantees + own guarantee, capped by capability (per resource)."""
        queue = self.snapshot.queue(queue_name)
        amounts = dict(self._fleet.amounts)
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
        mine = self._queue_alloc.get(job.queue, Resources()) + self._queue_inqueue.get(job.queue, Resources()) + need
        if not _fits(mine, self.real_capability(job.queue)):
            return "proportion"
        self.admitted[job.name] = name
        self._add_inqueue(job, name, need, +1)
        return None

    def allocated(self, job: Job, cluster: str, need: Resources) -> None:
        """The job started in ``cluster``: its minResources move from inqueue to used/allocated."""
        if self.admitted.get(job.name) == cluster:
            self._add_inqueue(job, cluster, need, -1)
        self._used[cluster] = self._used[cluster] + need
        self._queue_alloc[job.queue] = self._queue_alloc.get(job.queue, Resources()) + need

    def _add_inqueue(self, job: Job, cluster: str, need: Resources, sign: int) -> None:
        amount = need if sign > 0 else Resources() - need
        self._inqueue[cluster] = self._inqueue.get(cluster, Resources()) + amount
        self._queue_inqueue[job.queue] = self._queue_inqueue.get(job.queue, Resources()) + amount


def rejection(plugin: str, cluster: str) -> tuple[str, str]:
    """(BLOCKED_BY name, reason) for a job Volcano in ``cluster`` did not enqueue."""
    if plugin == "proportion":
        return "queue-capability", f"{NOT_ENQUEUED} in {cluster}: the queue's allocated + inqueue would exceed " \
                                   f"its real capability in the federation (Volcano proportion)"
    return "capacity", f"{NOT_ENQUEUED} in {cluster}: inqueue + minResources exceed the idle resources x " \
                       f"{OVERCOMMIT_FACTOR:g} (Volcano overcommit)"
