"""Restart policies: what to do when a pod of a running gang fails, is evicted, stays
pending, finishes, or loses its node. Pure: ``decide`` maps (job, state, event, now) to
actions; ``record`` folds the executed actions into the next state.

Semantics follow Volcano's job controller (volcano-sh/volcano
pkg/controllers/job/job_controller_util.go ``applyPolicies``; event and action names from
staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/{events,actions}.go):

- Task policies are consulted first, then job policies; the first policy whose events
  contain the event (or ``*``), or whose ``exitCode`` equals the pod's exit code, wins.
- ``PodPending`` only fires for a policy with a ``timeout``.
- ``timeout`` delays the action: it is due at ``event.since + timeout``; an action not yet
  due is returned with ``due > now`` and is re-decided at that time (the condition must
  still hold then — a pod that started running meanwhile produces no event).
- ``maxRetry`` (job, default 3) bounds restarts; a task's own ``maxRetry``, when set,
  bounds RestartPod/RestartTask for that task instead. An exhausted budget fails the job
  with a reason naming the budget, the event and the pod.

Defaults when no policy matches (kept simple and documented, close to Volcano, where a
job fails once failed pods make ``minAvailable`` unreachable):
PodFailed/PodEvicted fail the job when the pods left are fewer than ``minAvailable``
(else the elastic job continues); Unknown and PodPending do nothing; TaskCompleted
completes the job once every task has completed.

``NodeLost`` is ours (Volcano has no such event: its pods eventually fail or are
evicted): pods on a NotReady or deleted node are replaced in place inside the same
HyperNode when the domain has room for all of them, otherwise the job is reported for
``Replan`` to the central planner. Node loss is the cluster's fault, not the job's, so it
does not consume ``maxRetry``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from agents.core.binding import replacement_node
from agents.core.records import pod_name
from federation.domain.jobs import Job, LifecyclePolicy
from federation.domain.nodes import Node
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.topology import Domain

POD_FAILED, POD_EVICTED, POD_PENDING = "PodFailed", "PodEvicted", "PodPending"
TASK_COMPLETED, UNKNOWN, NODE_LOST = "TaskCompleted", "Unknown", "NodeLost"
EVENTS = (POD_FAILED, POD_EVICTED, POD_PENDING, TASK_COMPLETED, UNKNOWN, NODE_LOST)

RESTART_POD, RESTART_TASK, RESTART_JOB = "RestartPod", "RestartTask", "RestartJob"
ABORT_JOB, TERMINATE_JOB, COMPLETE_JOB = "AbortJob", "TerminateJob", "CompleteJob"
FAIL_JOB, REPLAN = "FailJob", "Replan"
RESTARTS = (RESTART_POD, RESTART_TASK, RESTART_JOB)

RUNNING, COMPLETED, FAILED, ABORTED, TERMINATED = "Running", "Completed", "Failed", "Aborted", "Terminated"
TERMINAL_JOB_PHASES = frozenset({COMPLETED, FAILED, ABORTED, TERMINATED})
_PHASE_AFTER = {ABORT_JOB: ABORTED, TERMINATE_JOB: TERMINATED, COMPLETE_JOB: COMPLETED, FAIL_JOB: FAILED}


@dataclass(frozen=True)
class PodRef:
    name: str
    task: str
    index: int
    node: str = ""


@dataclass(frozen=True)
class PodEvent:
    """An observed condition. ``since`` is when it began (the pod failed / became pending
    / the node was seen lost); it anchors timeouts and makes the event's identity stable
    across reconcile passes, so one failure is acted on once."""

    event: str
    task: str = ""
    pods: tuple[PodRef, ...] = ()
    exit_code: int | None = None
    since: float = 0.0
    node: str = ""

    @property
    def pod(self) -> PodRef | None:
        return self.pods[0] if self.pods else None

    @property
    def key(self) -> str:
        names = ",".join(p.name for p in self.pods) or self.task
        return f"{self.event}/{names}/{self.since}"

    def describe(self) -> str:
        subject = f"pod {self.pod.name}" if len(self.pods) == 1 and self.pod else (
            f"pods {', '.join(p.name for p in self.pods)}" if self.pods else f"task {self.task}")
        code = f" (exitCode={self.exit_code})" if self.exit_code is not None else ""
        where = f" on node {self.node}" if self.node else ""
        return f"{self.event} of {subject}{code}{where}"


@dataclass(frozen=True)
class JobEvent:
    """The record every action leaves (reported to central and shown by ``fedctl``)."""

    type: str  # Normal | Warning
    reason: str  # the action
    message: str
    at: float


@dataclass(frozen=True)
class Action:
    kind: str
    job: str
    record: JobEvent
    task: str = ""
    pods: tuple[str, ...] = ()
    targets: tuple[PodAssignment, ...] = ()  # replacement nodes for lost pods
    cause: str = ""  # the event name, or "exitCode=N"
    due: float = 0.0
    event_key: str = ""

    def ready(self, now: float) -> bool:
        return self.due <= now


@dataclass(frozen=True)
class JobRuntimeState:
    """What the agent remembers about a running job between passes."""

    phase: str = RUNNING
    retries: int = 0
    task_retries: Mapping[str, int] = field(default_factory=dict)
    failed_pods: frozenset[str] = frozenset()  # pods observed Failed right now
    completed_tasks: frozenset[str] = frozenset()  # tasks whose pods all Succeeded
    handled: frozenset[str] = frozenset()  # PodEvent keys already acted on
    # Why the job ended (the job-ending action's message, e.g. "maxRetry 3 exhausted after
    # PodFailed of pod X"). Kept here, not only in the one-off JobEvent, because every later
    # status report of the terminal job must carry it: central records a job's reason from
    # the report that moves it to its final state, which may come passes later.
    reason: str = ""


@dataclass(frozen=True)
class Room:
    """Where replacement pods may go: the gang's HyperNode and the cluster's nodes (with
    current free resources)."""

    domain: Domain
    nodes: tuple[Node, ...]


def matching_policy(job: Job, event: PodEvent) -> tuple[LifecyclePolicy, str] | None:
    """The policy that applies and the cause string; task policies before job policies."""
    task_policies = job.task(event.task).policies if event.task and _has_task(job, event.task) else ()
    for policy in (*task_policies, *job.policies):
        if policy.events and (event.event in policy.events or "*" in policy.events):
            if event.event == POD_PENDING and policy.timeout_seconds is None:
                continue  # PodPending only fires with a timeout
            return policy, event.event
        if policy.exit_code is not None and event.event == POD_FAILED and event.exit_code == policy.exit_code:
            return policy, f"exitCode={event.exit_code}"
    return None


def _has_task(job: Job, name: str) -> bool:
    return any(t.name == name for t in job.tasks)


def _task_pods(job: Job, task: str) -> tuple[str, ...]:
    return tuple(pod_name(job.name, task, i) for i in range(job.task(task).replicas))


def _all_pods(job: Job) -> tuple[str, ...]:
    return tuple(pod_name(job.name, t, i) for t, i, _ in job.pods())


def _budget(job: Job, state: JobRuntimeState, kind: str, task: str) -> tuple[int, int, str]:
    """(used, limit, label) of the retry budget an action of ``kind`` consumes."""
    if kind in (RESTART_POD, RESTART_TASK) and task and _has_task(job, task):
        limit = job.task(task).max_retry
        if limit is not None:
            return state.task_retries.get(task, 0), limit, f"task {task} maxRetry {limit}"
    return state.retries, job.max_retry, f"maxRetry {job.max_retry}"


def _action(
    job: Job,
    kind: str,
    event: PodEvent,
    now: float,
    message: str,
    *,
    cause: str,
    task: str = "",
    pods: tuple[str, ...] = (),
    targets: tuple[PodAssignment, ...] = (),
    due: float | None = None,
) -> Action:
    when = now if due is None else due
    severity = "Normal" if kind == COMPLETE_JOB else "Warning"
    return Action(kind=kind, job=job.name, record=JobEvent(severity, kind, message, max(when, now)), task=task,
                  pods=pods, targets=targets, cause=cause, due=when, event_key=event.key)


def decide(job: Job, state: JobRuntimeState, event: PodEvent, now: float, *, room: Room | None = None) -> list[Action]:
    """The actions ``event`` calls for. Empty when the job is finished, the event was
    already handled, or nothing applies. Actions with ``due > now`` are delayed."""
    if state.phase in TERMINAL_JOB_PHASES or event.key in state.handled:
        return []
    if event.event == NODE_LOST:
        return _node_lost(job, event, now, room)
    matched = matching_policy(job, event)
    if matched is None:
        return _default(job, state, event, now)
    policy, cause = matched
    due = event.since + policy.timeout_seconds if policy.timeout_seconds is not None else now
    kind = policy.action
    if kind == RESTART_POD and not event.pods:
        kind = RESTART_TASK  # TaskCompleted has no pod to restart: restart its task
    task = event.task
    if kind in RESTARTS:
        used, limit, label = _budget(job, state, kind, task)
        if used >= limit:
            return [_action(job, FAIL_JOB, event, now,
                            f"{label} exhausted after {event.describe()}", cause=cause, task=task,
                            pods=_all_pods(job), due=due)]
        retry = f" (retry {used + 1}/{limit})"
    else:
        retry = ""
    pods = {
        RESTART_POD: tuple(p.name for p in event.pods),
        RESTART_TASK: _task_pods(job, task) if task and _has_task(job, task) else (),
    }.get(kind, _all_pods(job))
    delay = f" after timeout {policy.timeout_seconds:g}s" if policy.timeout_seconds is not None else ""
    message = f"{kind} on {event.describe()}{delay}{retry}"
    return [_action(job, kind, event, now, message, cause=cause, task=task, pods=pods, due=due)]


def _default(job: Job, state: JobRuntimeState, event: PodEvent, now: float) -> list[Action]:
    if event.event in (POD_FAILED, POD_EVICTED):
        failed = state.failed_pods | {p.name for p in event.pods}
        left = job.total_replicas - len(failed)
        if left < job.gang_size:
            return [_action(job, FAIL_JOB, event, now,
                            f"{event.describe()} and no policy matched: {left} of {job.total_replicas} pods left, "
                            f"minAvailable {job.gang_size}",
                            cause=event.event, task=event.task, pods=_all_pods(job))]
        return []
    if event.event == TASK_COMPLETED:
        done = state.completed_tasks | {event.task}
        if all(t.name in done for t in job.tasks):
            return [_action(job, COMPLETE_JOB, event, now, "all tasks completed", cause=event.event,
                            task=event.task, pods=_all_pods(job))]
    return []


def _node_lost(job: Job, event: PodEvent, now: float, room: Room | None) -> list[Action]:
    names = tuple(p.name for p in event.pods)
    if room is None:  # no view of the domain: replace and let binding decide (or escalate)
        return [_action(job, RESTART_POD, event, now, f"replace {event.describe()}", cause=NODE_LOST,
                        task=event.task, pods=names)]
    free = {n.name: n.free for n in room.nodes}
    targets: list[PodAssignment] = []
    for ref in event.pods:
        requests = job.task(ref.task).resources if _has_task(job, ref.task) else Resources()
        constraints = job.node_constraints[[t.name for t in job.tasks].index(ref.task)] \
            if _has_task(job, ref.task) else None
        node = replacement_node(requests, room.domain, room.nodes, free, tolerations=job.tolerations,
                                constraints=constraints, exclude=(event.node,))
        if node is None:
            return [_action(job, REPLAN, event, now,
                            f"{event.describe()}: no node in {room.domain.name} has room for {ref.name}",
                            cause=NODE_LOST, task=event.task, pods=names)]
        free[node] = free[node] - requests
        targets.append(PodAssignment(ref.task, ref.index, node))
    moves = ", ".join(f"{ref.name}->{t.node}" for ref, t in zip(event.pods, targets, strict=True))
    return [_action(job, RESTART_POD, event, now, f"replace {event.describe()} inside {room.domain.name}: {moves}",
                    cause=NODE_LOST, task=event.task, pods=names, targets=tuple(targets))]


def record(job: Job, state: JobRuntimeState, actions: Sequence[Action], now: float) -> JobRuntimeState:
    """The state after executing the actions that were due at ``now`` (delayed ones are
    ignored: they are decided again when due)."""
    retries, task_retries = state.retries, dict(state.task_retries)
    phase, handled, reason = state.phase, set(state.handled), state.reason
    for action in actions:
        if not action.ready(now):
            continue
        handled.add(action.event_key)
        if action.kind in RESTARTS and action.cause != NODE_LOST:
            _, _, label = _budget(job, state, action.kind, action.task)
            if label.startswith("task "):
                task_retries[action.task] = task_retries.get(action.task, 0) + 1
            else:
                retries += 1
        if action.kind in _PHASE_AFTER:
            phase, reason = _PHASE_AFTER[action.kind], action.record.message
    return replace(state, phase=phase, retries=retries, task_retries=task_retries, handled=frozenset(handled),
                   reason=reason)
