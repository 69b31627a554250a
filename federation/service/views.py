"""Store records as the read-side protos (Job, JobEvent, Queue status, Cluster, audit).

``convert`` translates what clients *send* (specs, with validation); this module renders
what the store *knows* about them. Kept apart so servicers stay a few lines each and the
mapping of store vocabulary (state names, event types) to wire enums lives in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from google.protobuf.timestamp_pb2 import Timestamp

from federation.domain.plans import PodAssignment
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.domain.states import ACTIVE_STATES, TERMINAL_STATES, JobState
from federation.domain.works import placement_from_payload
from federation.store.records import ClusterRecord, DecisionRecord, JobEvent, JobRecord, RoundRecord, WorkRecord
from federation.v1 import audit_pb2, clusters_pb2, jobs_pb2, queues_pb2, types_pb2
from federation.wire.base import taint_to_proto
from federation.wire.convert import job_state_from_name, job_to_proto, queue_to_proto, resources_to_proto

_EVENT_TYPES = {
    name.removeprefix("JOB_EVENT_TYPE_").lower(): value for name, value in jobs_pb2.JobEventType.items()
}
_HEALTH = {
    "healthy": clusters_pb2.CLUSTER_HEALTH_HEALTHY,
    "unhealthy": clusters_pb2.CLUSTER_HEALTH_UNHEALTHY,
    "lost": clusters_pb2.CLUSTER_HEALTH_LOST,
}


def timestamp(when: datetime | None) -> Timestamp:
    stamp = Timestamp()
    if when is not None:
        stamp.FromDatetime(when)
    return stamp


def job_to_view(r: JobRecord, spec: types_pb2.JobSpec | None = None) -> jobs_pb2.Job:
    """The wire Job; pass ``spec`` when the caller already holds it (saves re-encoding on submit)."""
    return jobs_pb2.Job(
        id=r.name, spec=spec if spec is not None else job_to_proto(r.job), state=job_state_from_name(r.state),
        unschedulable=r.unschedulable, reason=r.reason, tenant=r.tenant, cluster=r.cluster or "",
        hypernode=r.hypernode or "", tier=r.tier or 0, submitted=timestamp(r.created_at),
        updated=timestamp(r.updated_at), restarts=r.restarts, message=r.message, effective_priority=r.job.priority,
        expires=timestamp(r.expires_at) if r.expires_at is not None else None,
    )


def event_type(name: str) -> jobs_pb2.JobEventType.ValueType:
    """Store event names (``Submitted``) as the wire enum (UNSPECIFIED for a name we do not know)."""
    return _EVENT_TYPES.get(name.lower(), jobs_pb2.JOB_EVENT_TYPE_UNSPECIFIED)


def event_to_view(ev: JobEvent, record: JobRecord | None) -> jobs_pb2.JobEvent:
    """An event with the job as it is now, except ``state``: the state right after the event."""
    job = job_to_view(record) if record is not None else jobs_pb2.Job(id=ev.job)
    if record is None:
        job.spec.name, job.spec.queue = ev.job, ev.queue
    job.state = job_state_from_name(ev.state)
    return jobs_pb2.JobEvent(event_id=ev.id, job=job, type=event_type(ev.type), message=ev.message,
                             time=timestamp(ev.time))


# ---------------------------------------------------------------------- queues


def queue_to_view(queue: Queue, counts: Mapping[str, int], allocated: Resources | None = None,
                  capacity: Resources | None = None) -> queues_pb2.Queue:
    msg = queue_to_proto(queue)
    msg.status.pending_jobs = counts.get(JobState.PENDING, 0)
    msg.status.running_jobs = sum(counts.get(s, 0) for s in ACTIVE_STATES)
    if allocated is not None:
        msg.status.allocated.update(resources_to_proto(allocated))
        if capacity is not None:
            msg.status.dominant_share = min(allocated.dominant_share(capacity), 1.0)
    return msg


# ---------------------------------------------------------------------- clusters


def cluster_to_view(c: ClusterRecord) -> clusters_pb2.Cluster:
    msg = clusters_pb2.Cluster(
        name=c.name, labels=dict(c.labels), epoch=c.epoch,
        health=_HEALTH.get(c.health, clusters_pb2.CLUSTER_HEALTH_UNSPECIFIED),
        last_heartbeat=timestamp(c.last_heartbeat), agent_id=c.agent_id, active_jobs=c.active_jobs,
        taints=[taint_to_proto(t) for t in c.taints],
        admin_taints=[taint_to_proto(t) for t in c.admin_taints],
    )
    s = c.summary
    if s is not None:
        msg.last_snapshot.CopyFrom(clusters_pb2.SnapshotSummary(
            taken_at=timestamp(s.taken_at), nodes=s.nodes, ready_nodes=s.ready_nodes,
            allocatable=resources_to_proto(s.allocatable), free=resources_to_proto(s.free),
            hypernodes=s.hypernodes, max_tier=s.max_tier))
    if c.tree_error:
        msg.last_snapshot.tree_error = c.tree_error
    return msg


# ---------------------------------------------------------------------- audit


def round_to_view(r: RoundRecord) -> audit_pb2.Round:
    return audit_pb2.Round(
        round_id=r.id, started=timestamp(r.started_at), ended=timestamp(r.ended_at), solver_status=r.solver_status,
        objective=r.objective, bound=r.bound, policy=r.policy, pending_jobs=r.pending_count, placed=r.placed_count,
        unplaced=r.unplaced_count, preempted=r.preempted_count, solve_seconds=r.solve_seconds,
    )


def decision_to_view(d: DecisionRecord) -> audit_pb2.Decision:
    x = d.decision
    return audit_pb2.Decision(
        round=round_to_view(d.round), job=x.job, outcome=x.outcome, cluster=x.cluster or "",
        hypernode=x.hypernode or "", tier=x.tier or 0, score_terms=dict(x.score_terms), reason=x.reason,
        constraint=x.constraint, closest_cluster=x.closest_cluster or "",
    )


def explain(record: JobRecord, latest: DecisionRecord | None,
            work: WorkRecord | None = None) -> jobs_pb2.ExplainJobResponse:
    """Where the job went (placement of the deciding round) or why it is pending.

    ``work`` is the job's latest Work: when it is the job's Work in its current cluster,
    its recorded pods (where the agent actually bound them, kept up to date from status
    reports) are shown instead of the nodes the round planned — the agent may have
    re-packed the gang inside its HyperNode or replaced a pod since.
    """
    resp = jobs_pb2.ExplainJobResponse(name=record.name, state=job_state_from_name(record.state))
    decision = latest.decision if latest is not None else None
    if record.state == JobState.PENDING:
        pending = resp.pending
        pending.unschedulable = record.unschedulable
        pending.reason = record.reason
        if latest is not None and decision is not None:
            pending.reason = decision.reason or record.reason
            pending.constraint = decision.constraint
            pending.closest_cluster = decision.closest_cluster or ""
            pending.round_id = latest.round.id
            pending.round_time.CopyFrom(timestamp(latest.round.started_at))
        if not pending.reason:
            # e.g. outside a bounded round's intake (rounds.md, "Bounded rounds")
            pending.reason = "queued, not yet considered: waiting for the next planning round"
        return resp
    if record.cluster:
        placement = resp.placement
        placement.job, placement.cluster = record.name, record.cluster
        placement.hypernode, placement.tier = record.hypernode or "", record.tier or 0
        pods: tuple[PodAssignment, ...] = ()
        if latest is not None and decision is not None and decision.outcome == "placed" \
                and decision.cluster == record.cluster:
            resp.round_id = latest.round.id
            pods = decision.pods
        if work is not None and work.cluster == record.cluster and "pods" in work.payload:
            pods = placement_from_payload(work.job, work.payload).pods
        placement.pods.extend(types_pb2.PodAssignment(task=p.task, index=p.index, node=p.node) for p in pods)
    if record.state in TERMINAL_STATES:
        resp.message = f"{record.state}: {record.reason or record.message}".rstrip(": ")
    return resp
