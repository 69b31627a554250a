"""Translation between the wire contract (``federation.v1``) and the domain.

The servicers, the agent's transport and the CLI call only these functions, so the
proto shapes never leak into the planner and every input is validated once, at the
edge, with full field paths (``spec.tasks[1].replicas``). This module holds queues,
placements, Work and job states and re-exports the job and snapshot converters, which
live in ``wire.jobs`` and ``wire.clusters`` to keep modules small.
"""

from __future__ import annotations

from federation.domain.errors import InvalidInput
from federation.domain.plans import Placement, PodAssignment
from federation.domain.queues import Queue
from federation.domain.states import JobState, WorkPhase
from federation.domain.works import Work
from federation.v1 import agent_pb2, jobs_pb2, queues_pb2, types_pb2
from federation.wire.base import (
    build,
    resources_from_proto,
    resources_to_proto,
    taint_from_proto,
    taint_to_proto,
    timestamp_from_proto,
    timestamp_to_proto,
    toleration_from_proto,
    toleration_to_proto,
)
from federation.wire.clusters import (
    hypernode_from_proto,
    hypernode_to_proto,
    node_from_proto,
    node_to_proto,
    snapshot_from_proto,
    snapshot_summary_to_proto,
    snapshot_to_proto,
)
from federation.wire.jobs import (
    job_from_proto,
    job_to_proto,
    policy_from_proto,
    policy_to_proto,
    propagation_from_proto,
    propagation_to_proto,
    task_from_proto,
    task_to_proto,
)

__all__ = [
    "build",
    "hypernode_from_proto",
    "hypernode_to_proto",
    "job_from_proto",
    "job_state_from_name",
    "job_state_name",
    "job_to_proto",
    "node_from_proto",
    "node_to_proto",
    "placement_from_proto",
    "placement_to_proto",
    "policy_from_proto",
    "policy_to_proto",
    "propagation_from_proto",
    "propagation_to_proto",
    "queue_from_proto",
    "queue_to_proto",
    "resources_from_proto",
    "resources_to_proto",
    "snapshot_from_proto",
    "snapshot_summary_to_proto",
    "snapshot_to_proto",
    "taint_from_proto",
    "taint_to_proto",
    "task_from_proto",
    "task_to_proto",
    "timestamp_from_proto",
    "timestamp_to_proto",
    "toleration_from_proto",
    "toleration_to_proto",
    "work_from_proto",
    "work_phase_from_proto",
    "work_phase_to_proto",
    "work_to_proto",
]

# ---------------------------------------------------------------- queues


def queue_to_proto(queue: Queue) -> queues_pb2.Queue:
    """Spec fields only; the servicer fills ``status`` from the store."""
    msg = queues_pb2.Queue(
        name=queue.name, weight=queue.weight, priority=queue.priority,
        guarantee=resources_to_proto(queue.guarantee), reclaimable=queue.reclaimable,
        parent=queue.parent or "", owners=list(queue.owners),
        namespaces=list(queue.namespaces), default_namespace=queue.default_namespace,
        pod_security=queue.pod_security, allow_system_namespaces=queue.allow_system_namespaces,
    )
    if queue.capability is not None:
        msg.capability.SetInParent()
        msg.capability.quantities.update(resources_to_proto(queue.capability))
    if queue.deserved is not None:
        msg.deserved.SetInParent()
        msg.deserved.quantities.update(resources_to_proto(queue.deserved))
    if queue.topology_wait_seconds is not None:
        msg.topology_wait_seconds = queue.topology_wait_seconds
    return msg


def queue_from_proto(msg: queues_pb2.Queue, path: str = "queue") -> Queue:
    """Validate a wire queue (weight 0 = 1, reclaimable unset = true, capability unset = no cap)."""
    capability = (
        resources_from_proto(msg.capability.quantities, f"{path}.capability.quantities")
        if msg.HasField("capability") else None
    )
    deserved = (
        resources_from_proto(msg.deserved.quantities, f"{path}.deserved.quantities")
        if msg.HasField("deserved") else None
    )
    return build(
        path, Queue,
        name=msg.name,
        weight=msg.weight or 1,
        priority=msg.priority,
        capability=capability,
        guarantee=resources_from_proto(msg.guarantee, f"{path}.guarantee"),
        deserved=deserved,
        reclaimable=msg.reclaimable if msg.HasField("reclaimable") else True,
        parent=msg.parent or None,
        owners=tuple(msg.owners),
        namespaces=tuple(msg.namespaces),
        default_namespace=msg.default_namespace or (msg.namespaces[0] if msg.namespaces else "default"),
        pod_security=msg.pod_security or "baseline",
        allow_system_namespaces=msg.allow_system_namespaces,
        topology_wait_seconds=msg.topology_wait_seconds if msg.HasField("topology_wait_seconds") else None,
    )


# ---------------------------------------------------------------- placements


def placement_to_proto(placement: Placement) -> types_pb2.Placement:
    return types_pb2.Placement(
        job=placement.job, cluster=placement.cluster, hypernode=placement.hypernode, tier=placement.tier,
        pods=[types_pb2.PodAssignment(task=p.task, index=p.index, node=p.node) for p in placement.pods],
    )


def placement_from_proto(msg: types_pb2.Placement, path: str = "placement") -> Placement:
    for i, pod in enumerate(msg.pods):
        if not pod.task:
            raise InvalidInput(f"{path}.pods[{i}].task", "must not be empty")
        if pod.index < 0:
            raise InvalidInput(f"{path}.pods[{i}].index", "must be >= 0")
    return Placement(
        job=msg.job, cluster=msg.cluster, hypernode=msg.hypernode, tier=msg.tier,
        pods=tuple(PodAssignment(task=p.task, index=p.index, node=p.node) for p in msg.pods),
    )


# ---------------------------------------------------------------- work


def work_to_proto(work: Work) -> agent_pb2.Work:
    return agent_pb2.Work(
        work_id=work.work_id, job=work.name, version=work.version, cluster=work.cluster,
        spec=job_to_proto(work.job), placement=placement_to_proto(work.placement), generation=work.generation,
    )


def work_from_proto(msg: agent_pb2.Work, path: str = "work") -> Work:
    job = job_from_proto(msg.spec, f"{path}.spec")
    placement = placement_from_proto(msg.placement, f"{path}.placement")
    if msg.job != job.name:
        raise InvalidInput(f"{path}.job", f"names {msg.job!r} but the spec is job {job.name!r}")
    if msg.cluster and msg.cluster != placement.cluster:
        raise InvalidInput(f"{path}.cluster", f"is {msg.cluster!r} but the placement is in {placement.cluster!r}")
    if msg.generation < 0:
        raise InvalidInput(f"{path}.generation", f"must be >= 0, got {msg.generation}")
    return Work(work_id=msg.work_id, job=job, version=msg.version, placement=placement, generation=msg.generation)


# ---------------------------------------------------------------- work phases

_PHASES: dict[WorkPhase, agent_pb2.WorkPhase.ValueType] = {
    WorkPhase.PENDING: agent_pb2.WORK_PHASE_PENDING,
    WorkPhase.BOUND: agent_pb2.WORK_PHASE_BOUND,
    WorkPhase.RUNNING: agent_pb2.WORK_PHASE_RUNNING,
    WorkPhase.SUCCEEDED: agent_pb2.WORK_PHASE_SUCCEEDED,
    WorkPhase.FAILED: agent_pb2.WORK_PHASE_FAILED,
    WorkPhase.CANCELLED: agent_pb2.WORK_PHASE_CANCELLED,
    WorkPhase.REPLAN: agent_pb2.WORK_PHASE_REPLAN,
}
_PHASE_OF = {value: phase for phase, value in _PHASES.items()}


def work_phase_to_proto(phase: WorkPhase) -> agent_pb2.WorkPhase.ValueType:
    return _PHASES[phase]


def work_phase_from_proto(value: agent_pb2.WorkPhase.ValueType) -> WorkPhase | None:
    """The domain phase, or None for UNSPECIFIED and numbers this version does not know."""
    return _PHASE_OF.get(value)


# ---------------------------------------------------------------- job states

_STATES: dict[str, jobs_pb2.JobState.ValueType] = {
    JobState.PENDING: jobs_pb2.JOB_STATE_PENDING,
    JobState.PLACED: jobs_pb2.JOB_STATE_PLACED,
    JobState.DISPATCHED: jobs_pb2.JOB_STATE_DISPATCHED,
    JobState.RUNNING: jobs_pb2.JOB_STATE_RUNNING,
    JobState.SUCCEEDED: jobs_pb2.JOB_STATE_SUCCEEDED,
    JobState.FAILED: jobs_pb2.JOB_STATE_FAILED,
    JobState.CANCELLED: jobs_pb2.JOB_STATE_CANCELLED,
}
_STATE_NAMES = {value: name for name, value in _STATES.items()}


def job_state_from_name(name: str, path: str = "state") -> jobs_pb2.JobState.ValueType:
    """``"Running"``/``"running"``/``"JOB_STATE_RUNNING"`` -> ``JOB_STATE_RUNNING``."""
    key = name.strip().lower().removeprefix("job_state_")
    if key not in _STATES:
        raise InvalidInput(path, f"unknown job state {name!r} (one of {', '.join(_STATES)})")
    return _STATES[key]


def job_state_name(state: jobs_pb2.JobState.ValueType) -> str:
    """``JOB_STATE_RUNNING`` -> ``"running"`` ("" for UNSPECIFIED)."""
    return _STATE_NAMES.get(state, "")
