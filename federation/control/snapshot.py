"""Store rows → the immutable ``FederationSnapshot`` one planning round reads.

Two things are decided here, both so that consecutive rounds agree with each other:

- **Placed and running jobs are passed as ``RunningJob``** with their placement (the pod →
  node assignment their Work carries), so the planner never moves them (multi-round
  consistency) and can price them as preemption victims.
- **Room promised but not yet visible is subtracted.** A cluster snapshot counts only
  pods bound to nodes. A job placed in round N is not bound until its agent acts, so a
  round N+1 that trusted the snapshot alone would hand the same GPUs to another gang. For
  every active job whose binding the cluster's latest snapshot does not reflect yet
  (``propagation.reflected_in_snapshot``), its pods' requests are taken off their nodes'
  free resources here. So are the pods a growth added to a running elastic job until the
  agent reports them bound (the payload's ``growing`` pods).

- **Unavailable clusters are passed too, as ``healthy=False``.** A lost cluster enters
  with its last valid snapshot, so the planner never places on it but 'could any allowed
  cluster ever hold this job?' still ranges over it: a job whose only allowed cluster is
  lost waits for it, it is not unschedulable. Registered clusters that have not sent a
  valid snapshot yet are listed apart (``unknown``): their size is unknown, never zero.
  Jobs that stay on a lost cluster while their tolerations allow are running jobs like
  any other: their queue's usage counts them, but an unhealthy cluster has no usable
  nodes, so nothing is placed, grown or preempted there.

- **A round reads a bounded intake of the backlog** (``max_pending``): ``intake`` splits
  it between queues round-robin (queue priority first in each pass) so every queue with
  demand is seen by fairness, and each queue's share is its head in planner order (job
  priority, then submission time), fetched with one LIMITed query. The rest of the
  backlog waits for a later round; re-planning 100,000 jobs every round would serve none
  of them sooner (docs/design/rounds.md, "Bounded rounds").

``load`` is synchronous (the store is) and runs in a worker thread; ``build`` is pure.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobflows import READY, flow_gate
from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, RunningJob
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.domain.states import ACTIVE_STATES, ACTIVE_WORK_STATES, JobState, WorkState
from federation.domain.works import DEFAULT_DISPATCH_TIMEOUT_SECONDS, placement_from_payload
from federation.propagation.matching import govern
from federation.propagation.taints import DEFAULT_FAILOVER_GRACE_SECONDS, evicting_taints, eviction
from federation.propagation.works import growing_pods, reflected_in_snapshot
from federation.store import ClusterRecord, Conflict, JobRecord, Store, WorkRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlanningInput:
    """A round's input and what the round must remember about how it was read."""

    snapshot: FederationSnapshot
    versions: Mapping[str, int]  # job -> version the planner saw (stale updates are skipped)
    digest: str
    placed_without_work: tuple[JobRecord, ...] = ()
    running_clusters: Mapping[str, str] = field(default_factory=dict)  # active job -> its cluster
    # Jobs that must leave a cluster now under its NoExecute taints (propagation/taints.py):
    # cluster -> {job: reason}; the round requeues them before planning.
    evictions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The earliest later time a job must leave a tainted cluster (a round is due then), or None.
    next_eviction: float | None = None
    # Registered clusters without a valid snapshot yet (name, labels, taints; no nodes):
    # not planned on, but a job they might hold is waiting, not unschedulable.
    unknown: tuple[ClusterSnapshot, ...] = ()
    # Why each cluster the planner may not use is unavailable: lost | unhealthy | no snapshot yet.
    unavailable: Mapping[str, str] = field(default_factory=dict)
    # Pending jobs held back by their flow: job -> (WAIT|STOP, reason, the job's reason
    # as stored) (federation/domain/jobflows.py).
    held: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    # The evictions above that are dispatch timeouts: job -> the Work left unacknowledged.
    # The eviction re-checks, in its transaction, that it still is (the agent's report may
    # land between this read and that write).
    unacknowledged: Mapping[str, int] = field(default_factory=dict)


def intake(counts: Mapping[str, int], priorities: Mapping[str, int], limit: int) -> dict[str, int]:
    """How many pending jobs of each queue a round considers (at most ``limit`` in all).

    Round-robin, one job per queue per pass, queues in (queue priority desc, name) order:
    every queue with demand gets a share (fairness must see it, and a high-priority queue
    whose head cannot fit must not hide a low-priority job that can), and a queue with
    less demand than its share leaves the rest to the others. Pure; O(limit).
    """
    order = sorted((q for q, n in counts.items() if n > 0), key=lambda q: (-priorities.get(q, 0), q))
    take = dict.fromkeys(order, 0)
    left = max(limit, 0)
    while left and order:
        for q in list(order):
            if not left:
                break
            take[q] += 1
            left -= 1
            if take[q] >= counts[q]:
                order.remove(q)
    return {q: n for q, n in take.items() if n}


def load(store: Store, now: float, max_pending: int | None = None,
         failover_grace: float = DEFAULT_FAILOVER_GRACE_SECONDS,
         dispatch_timeout: float = DEFAULT_DISPATCH_TIMEOUT_SECONDS, leading_since: float = 0.0) -> PlanningInput:
    """Read everything a round needs (several short read transactions; see ``build``);
    ``max_pending`` bounds the pending jobs read (None: all of them); ``failover_grace`` is
    how long a job without its own toleration stays on an unreachable or not-ready cluster;
    ``dispatch_timeout`` how long a reachable cluster may leave a Work unacknowledged, counted
    from ``leading_since`` at the earliest (see ``build``)."""
    queues = store.queues.all()
    records = store.clusters.list()
    snapshots = store.clusters.snapshots(include_lost=True)
    if max_pending is None:
        pending = store.jobs.in_states([JobState.PENDING])
    else:
        shares = intake(store.jobs.pending_counts(), {q.name: q.priority for q in queues}, max_pending)
        pending = sorted((rec for q, n in shares.items() for rec in store.jobs.pending_head(q, n)),
                         key=lambda r: (r.created_at, r.name))  # submission order, as unbounded
    held = _flow_gates(store, pending, queues)
    pending = [rec for rec in pending if rec.name not in held]
    active = store.jobs.in_states(ACTIVE_STATES)
    pending, active = apply_policies(store, pending, active)
    works = store.works.list(states=[*ACTIVE_WORK_STATES])
    never = frozenset(r.priority_class.name for r in store.priority_classes.list()
                      if r.priority_class.preemption_policy == "Never")
    return replace(build(snapshots, records, queues, pending, active, works, now, non_preempting=never,
                         failover_grace=failover_grace, dispatch_timeout=dispatch_timeout,
                         leading_since=leading_since), held=held)


def _flow_gates(store: Store, pending: Sequence[JobRecord],
                queues: Sequence[Queue]) -> dict[str, tuple[str, str, str]]:
    """Pending jobs whose flow dependencies (``Job.after``) do not release them yet.

    The dependencies of every waiting job are read in one query. A job waits only for jobs
    its own tenant could see: one in the same namespace whose queue shares an owner with
    its queue (or is the same queue). Any other name counts as not submitted, so ``after``
    cannot be used to learn another tenant's job states or cancel reasons."""
    waiting = [rec for rec in pending if rec.job.after]
    if not waiting:
        return {}
    owners = {q.name: frozenset(q.owners) for q in queues}
    found = store.jobs.get_many({dep for rec in waiting for dep in rec.job.after})
    held: dict[str, tuple[str, str, str]] = {}
    for rec in waiting:
        mine = owners.get(rec.job.queue, frozenset())
        states = {dep: (other.state, other.reason) for dep in rec.job.after
                  if (other := found.get(dep)) is not None and other.job.namespace == rec.job.namespace
                  and (other.job.queue == rec.job.queue or mine & owners.get(other.job.queue, frozenset()))}
        verdict, reason = flow_gate(rec.job.after, states)
        if verdict != READY:
            held[rec.name] = (verdict, reason, rec.reason)
    return held


def apply_policies(store: Store, pending: Sequence[JobRecord],
                   active: Sequence[JobRecord]) -> tuple[list[JobRecord], list[JobRecord]]:
    """Each job with the placement of the stored policy governing it (``propagation.matching``),
    claims rewritten where they changed. A pending job under a policy with suspended
    dispatching is held out of the round with that reason (Karmada ``suspension.dispatching``)."""
    policies = store.policies.all()
    claims = store.policies.claims([r.name for r in (*pending, *active)])
    if not policies and not claims:
        return list(pending), list(active)
    changes: dict[str, str | None] = {}
    out: tuple[list[JobRecord], list[JobRecord]] = ([], [])
    for records, holds, into in ((pending, False, out[0]), (active, True, out[1])):
        for rec in records:
            ruled = govern(rec.job, policies, claims.get(rec.name), holds)
            if ruled.claim_changed:
                changes[rec.name] = ruled.ref
            if ruled.suspended:
                reason = f"dispatching suspended by {ruled.ref}"
                if rec.reason != reason:
                    with contextlib.suppress(Conflict):  # changed meanwhile: next round says it again
                        store.jobs.annotate(rec.name, reason=reason, event="Waiting", expected_version=rec.version)
                continue
            into.append(rec if ruled.job is rec.job else replace(rec, job=ruled.job))
    store.policies.set_claims(changes)
    return out


def build(
    snapshots: Sequence[ClusterSnapshot],
    records: Sequence[ClusterRecord],
    queues: Sequence[Queue],
    pending: Sequence[JobRecord],
    active: Sequence[JobRecord],
    works: Sequence[WorkRecord],
    now: float,
    non_preempting: frozenset[str] = frozenset(),
    failover_grace: float = DEFAULT_FAILOVER_GRACE_SECONDS,
    dispatch_timeout: float = DEFAULT_DISPATCH_TIMEOUT_SECONDS,
    leading_since: float = 0.0,
) -> PlanningInput:
    """The planning input; pure.

    A placed job's Work its agent has not acknowledged is a dispatch timeout once
    ``dispatch_timeout`` has passed since the Work was last offered to an agent that could
    answer: its creation or change, the cluster's latest hello (whose sync sends it again),
    or ``leading_since``, when this central began to lead (no agent could answer a central
    that was down). Only for a job still ``placed``: a job that stepped on was reported on by
    the agent, which has the Work even if a central stopped before writing its state.

    The reads behind it are not one transaction, and need not be: every job update the
    round writes is conditional on the version read here, so a job that changed in
    between is skipped (and planned again next round) rather than clobbered.
    """
    by_name = {r.name: r for r in records}
    work_of = {w.job: w for w in works}  # at most one active work per job (the store withdraws older ones)
    running: list[RunningJob] = []
    reserve: dict[str, list[tuple[str, Resources]]] = {}
    without_work: list[JobRecord] = []
    evictions: dict[str, dict[str, str]] = {}
    unacknowledged: dict[str, int] = {}
    next_eviction: float | None = None
    evicting = {r.name: taints for r in records
                if (taints := evicting_taints(r.all_taints, r.lost, r.last_heartbeat.timestamp()))}
    for rec in active:
        if rec.cluster is None:
            continue
        if rec.cluster in evicting:
            policy = rec.job.propagation
            verdict = eviction(evicting[rec.cluster], policy.cluster_tolerations if policy else (), failover_grace, now)
            if verdict.at is not None and verdict.at <= now:
                evictions.setdefault(rec.cluster, {})[rec.name] = f"left cluster {rec.cluster}: {verdict.reason}"
                continue
            if verdict.at is not None:
                next_eviction = verdict.at if next_eviction is None else min(next_eviction, verdict.at)
        lost = rec.cluster in by_name and by_name[rec.cluster].lost
        work = work_of.get(rec.job.name)
        if (work is not None and work.cluster == rec.cluster and work.state == WorkState.PENDING
                and rec.state == JobState.PLACED and not lost):
            hello = by_name[rec.cluster].registered_at.timestamp() if rec.cluster in by_name else 0.0
            due = max(work.updated_at.timestamp(), hello, leading_since) + dispatch_timeout
            if due <= now:
                evictions.setdefault(rec.cluster, {})[rec.name] = (
                    f"cluster {rec.cluster} did not acknowledge the job's Work within {dispatch_timeout:g} s")
                unacknowledged[rec.name] = work.id
                continue
            next_eviction = due if next_eviction is None else min(next_eviction, due)
        if work is not None and work.cluster == rec.cluster:
            placement = _known_pods(rec.job, placement_from_payload(rec.name, work.payload))
        else:
            placement = Placement(rec.name, rec.cluster, rec.hypernode or "", rec.tier or 0)
            if work is None and rec.state == JobState.PLACED and not lost:
                without_work.append(rec)
        # A job still tolerated on an unreachable cluster runs there as far as anyone knows:
        # it counts toward its queue (fair share, capability, guarantee), while the cluster,
        # passed unhealthy, gets nothing new and yields no victim or growth.
        running.append(RunningJob(rec.job, placement, started_at=rec.updated_at.timestamp()))
        cluster = by_name.get(rec.cluster)
        received = cluster.summary.taken_at if cluster is not None and cluster.summary is not None else None
        requests = {(task, index): res for task, index, res in rec.job.pods()}
        if not reflected_in_snapshot(work.state if work else None, work.updated_at if work else None, received):
            reserve.setdefault(rec.cluster, []).extend(
                (p.node, requests.get((p.task, p.index), Resources())) for p in placement.pods)
        elif work is not None:  # pods a growth added that the agent has not reported bound yet
            reserve.setdefault(rec.cluster, []).extend(
                (p.node, requests.get((p.task, p.index), Resources())) for p in growing_pods(rec.name, work.payload))
    clusters = []
    unavailable: dict[str, str] = {}
    for snap in snapshots:
        record = by_name.get(snap.name)
        if record is None:
            continue
        if not record.lost:
            snap = _with_reservations(snap, reserve.get(snap.name, ()))
        healthy = record.healthy and not record.lost
        if snap.healthy != healthy:
            snap = snap.keeping_tree(healthy=healthy)
        if record.admin_taints:
            snap = snap.keeping_tree(taints=snap.taints + tuple(t for t in record.admin_taints
                                                                if t not in snap.taints))
        if not healthy:
            unavailable[snap.name] = "lost" if record.lost else "unhealthy"
        clusters.append(snap)
    reported = {c.name for c in clusters}
    unknown = tuple(ClusterSnapshot(r.name, labels=r.labels, taints=r.all_taints, healthy=False)
                    for r in records if r.name not in reported)
    unavailable.update({c.name: "lost" if by_name[c.name].lost else "no snapshot yet" for c in unknown})
    snapshot = FederationSnapshot(
        clusters=tuple(clusters),
        queues=tuple(queues),
        pending=tuple(PendingJob(r.job, r.created_at.timestamp(), r.job.priority_class not in non_preempting)
                      for r in pending),
        running=tuple(running),
        now=now,
    )
    versions = {r.name: r.version for r in (*pending, *active)}
    return PlanningInput(snapshot, versions, _digest(snapshot, versions, unknown), tuple(without_work),
                         {r.job.name: r.placement.cluster for r in running}, evictions, next_eviction, unknown,
                         unavailable, unacknowledged=unacknowledged)


def _with_reservations(snap: ClusterSnapshot, held: Sequence[tuple[str, Resources]]) -> ClusterSnapshot:
    if not held:
        return snap
    used: dict[str, Resources] = {}
    for name, requests in held:
        used[name] = used.get(name, Resources()) + requests
    return snap.keeping_tree(free={n.name: (n.free - used[n.name]).clamp_min_zero()
                                   for n in snap.nodes if n.name in used})


def _digest(snapshot: FederationSnapshot, versions: Mapping[str, int],
            unknown: Sequence[ClusterSnapshot] = ()) -> str:
    """A fingerprint of everything the plan depends on: jobs and their versions, queues,
    and each cluster's health, taints, labels and per-node free resources — but not the
    snapshot times, so a periodic snapshot that changes nothing gives the same digest and
    the round can be skipped (the plan would be the same)."""
    h = hashlib.sha256()
    for name in sorted(versions):
        h.update(f"{name}@{versions[name]};".encode())
    for q in snapshot.queues:
        h.update(repr(q).encode())
    for c in unknown:  # registered, nothing reported yet: a verdict may depend on them
        h.update(f"?{c.name}|{sorted(c.labels.items())}|{c.taints};".encode())
    for c in snapshot.clusters:
        h.update(f"{c.name}|{c.healthy}|{sorted(c.labels.items())}|{c.taints}|{len(c.tree.domains)};".encode())
        for n in c.nodes:
            h.update(f"{n.name}:{sorted(n.free.amounts.items())}:{n.usable}:{n.taints};".encode())
    return h.hexdigest()[:16]


def _known_pods(job: Job, placement: Placement) -> Placement:
    """The placement without pods of tasks the job does not have.

    Central refuses such pods in a status report (``service/agent_status.py``), but a Work
    recorded by an earlier release may hold one, and the planner looks every pod's task
    up: one such pod would fail every round of the whole federation.
    """
    tasks = {t.name for t in job.tasks}
    kept = tuple(p for p in placement.pods if p.task in tasks)
    if len(kept) == len(placement.pods):
        return placement
    log.warning("job %s: ignoring %d recorded pods of tasks it does not have", job.name,
                len(placement.pods) - len(kept))
    return replace(placement, pods=kept)
