"""Restart policies: what to do when a pod of a running gang fails, is evicted, stays
pending, finishes, or loses its node. Pure: ``decide`` maps (job, state, event, now) to
actions; ``record`` folds the executed actions into the next state.

Semantics follow Volcano's job controller (volcano-sh/volcano
pkg/controllers/job/job_controller_util.go ``applyPolicies``; event and action names from
staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/{events,actions}.go):

- Task policies are consulted first, then job policies; the first policy whose events
  contain the event (or ``*``), or whose ``exitCode`` equals the pod's exit code, wins.
- ``PodPending`` only fires for a policy with a ``timeout``.
- ``PodEvicted`` is a pod deleted by someone other than the agent (a drain, a preemption,
  ``kubectl delete``): Volcano raises it from its pod-deletion handler
  (pkg/controllers/job/job_controller_handler.go ``deletePod``). With no policy for it the
  pod is simply recreated, as Volcano's SyncJob recreates a missing pod. A pod that ended
  Failed with an eviction reason (the kubelet's) is PodEvicted too, and falls back to the
  PodFailed policies when none names PodEvicted: Volcano sees such a pod as PodFailed.
- ``RestartPod`` restarts the pods the event names. A TaskCompleted names one: the pod
  whose success completed the task, since Volcano raises TaskCompleted on that pod's
  update (pkg/controllers/job/job_controller_handler.go ``updatePod``) and RestartPod
  targets the request's pod (job_controller_util.go ``GetStateAction``), so that one pod
  is restarted, not its task.
- ``TaskFailed``: the containers of a task's Running and Pending pods have restarted, in
  total, at least the task's ``maxRetry`` times (default 3; Volcano's job cache
  ``TaskFailed`` in pkg/controllers/cache/cache.go). Only a policy acts on it.
- ``timeout`` delays the action: it is due at ``event.since + timeout``; an action not yet
  due is returned with ``due > now`` and is re-decided at that time (the condition must
  still hold then — a pod that started running meanwhile produces no event).
- ``maxRetry`` (job, default 3) counts every restart, RestartPod and RestartTask as well
  as RestartJob, and the restart that brings the count to ``maxRetry`` fails the job
  instead (pkg/controllers/job/state/running.go increments ``RetryCount`` on each restart
  action; state/restarting.go fails the job once it reaches ``maxRetry``; Volcano's e2e
  test/e2e/jobp/job_restart.go: ``maxRetry: 2`` ends Failed with ``RetryCount`` 2, so the
  job ran twice). The job fails with a reason naming the budget, the event and the pod.
  A task's ``maxRetry`` is not a restart budget: it is the TaskFailed threshold (below).

Defaults when no policy matches follow Volcano's: ``applyPolicies`` then returns
``SyncJob``, which creates only the pods that are missing (job_controller_actions.go
``syncJob``: a pod that exists, whatever its phase, is counted, not recreated). So a Failed
pod (PodFailed, or PodEvicted of a pod that ended Failed) stays as it is and the other
pods keep running, even when fewer than ``minAvailable`` are left; a deleted pod's
PodEvicted only lets reconcile recreate it; Unknown, PodPending and TaskFailed do
nothing; TaskCompleted completes the job once every task has completed. The job is
settled by the running state's check (pkg/controllers/job/state/running.go, the SyncJob
branch), which we run on two conditions of ours:

- ``MinSuccessReached``: the job has ``minSuccess`` and at least that many pods
  Succeeded: it is Completed at once and its pods still running are deleted (Volcano's
  finished state kills them keeping Succeeded and Failed ones, ``PodRetainPhaseSoft``,
  state/finished.go).
- ``PodsFinished``: every replica's pod has ended. Failed when a task with its own
  ``minAvailable`` has fewer Succeeded pods (checked only when the job's ``minAvailable``
  covers the tasks' minimums, a task's defaulting to its replicas), else Failed when the
  Succeeded pods are fewer than ``minSuccess``, else Completed when they reach the job's
  ``minAvailable``, else Failed.

``NodeLost`` is ours (Volcano has no such event: its pods eventually fail or are
evicted): pods on a NotReady or deleted node are replaced in place inside the same
HyperNode when the domain has room for all of them, otherwise the job is reported for
``Replan`` to the central planner. Node loss is the cluster's fault, not the job's, so it
does not consume ``maxRetry``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agents.core.binding import replacement_node
from agents.core.records import pod_name
from federation.domain.jobs import Job, LifecyclePolicy
from federation.domain.nodes import Node
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.topology import Domain

POD_FAILED, POD_EVICTED, POD_PENDING = "PodFailed", "PodEvicted", "PodPending"
TASK_COMPLETED, TASK_FAILED, UNKNOWN = "TaskCompleted", "TaskFailed", "Unknown"
NODE_LOST, PODS_FINISHED, MIN_SUCCESS_REACHED = "NodeLost", "PodsFinished", "MinSuccessReached"  # ours: no policy
EVENTS = (POD_FAILED, POD_EVICTED, POD_PENDING, TASK_COMPLETED, TASK_FAILED, UNKNOWN, NODE_LOST, PODS_FINISHED,
          MIN_SUCCESS_REACHED)
# The conditions Volcano's running state settles a job on (state/running.go); ``pods``
# of their events are the Succeeded ones.
SETTLING = (MIN_SUCCESS_REACHED, PODS_FINISHED)

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
    # PodEvicted of a pod someone else deleted (not a pod that ended Failed): with no
    # policy for it the pod is recreated, not counted against minAvailable.
    deleted: bool = False

    @property
    def pod(self) -> PodRef | None:
        return self.pods[0] if self.pods else None

    @property
    def key(self) -> str:
        names = ",".join(p.name for p in self.pods) or self.task
        return f"{self.event}/{names}/{self.since}"

    def describe(self) -> str:
        if self.event == TASK_COMPLETED:  # its pod is the one whose success completed the task
            last = f" (completed by pod {self.pod.name})" if self.pod else ""
            return f"{self.event} of task {self.task}{last}"
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
    completed_tasks: frozenset[str] = frozenset()  # tasks whose pods all Succeeded
    handled: frozenset[str] = frozenset()  # PodEvent keys already acted on
    # The job's pods that were neither ended nor being deleted when the last pass ended:
    # one missing (or being deleted) at the next pass was deleted by someone else.
    live: tuple[PodRef, ...] = ()
    # PodEvicted of those deletions, kept until acted on or the pod runs again (a delayed
    # action is cancelled then, as Volcano cancels it on the pod's PodRunning).
    evicted: tuple[PodEvent, ...] = ()
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
    """The policy that applies and the cause string; task policies before job policies.
    A pod that ended Failed with an eviction reason is PodEvicted to us but PodFailed to
    Volcano, so with no PodEvicted policy it gets the PodFailed ones."""
    matched = _first_match(job, event)
    if matched is None and event.event == POD_EVICTED and not event.deleted:
        return _first_match(job, replace(event, event=POD_FAILED))
    return matched


def _first_match(job: Job, event: PodEvent) -> tuple[LifecyclePolicy, str] | None:
    for policy in job.policies_for(event.task):
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
    if event.event in SETTLING:
        return _settle(job, event, now)
    matched = matching_policy(job, event)
    if matched is None:
        return _default(job, state, event, now)
    policy, cause = matched
    due = event.since + policy.timeout_seconds if policy.timeout_seconds is not None else now
    kind = policy.action
    task = event.task
    if kind in RESTARTS:
        used, limit = state.retries + 1, job.max_retry
        if used >= limit:  # Volcano fails the job on the restart that reaches maxRetry
            return [_action(job, FAIL_JOB, event, now,
                            f"maxRetry {limit} exhausted after {event.describe()}", cause=cause, task=task,
                            pods=_all_pods(job), due=due)]
        retry = f" (retry {used}/{limit})"
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
    """No policy matched: Volcano's SyncJob. It acts only when the last task completes;
    a Failed pod is left for the settling check (``_settle``), a deleted one for
    reconcile to recreate."""
    if event.event == TASK_COMPLETED:
        done = state.completed_tasks | {event.task}
        if all(t.name in done for t in job.tasks):
            return [_action(job, COMPLETE_JOB, event, now, "all tasks completed", cause=event.event,
                            task=event.task, pods=_all_pods(job))]
    return []


def _settle(job: Job, event: PodEvent, now: float) -> list[Action]:
    """Volcano's running-state verdict (pkg/controllers/job/state/running.go, the SyncJob
    branch): ``minSuccess`` reached completes the job whatever else runs; once every pod
    has ended, a task short of its own minimum, then ``minSuccess``, then the job's
    ``minAvailable`` decide. ``event.pods`` are the Succeeded pods."""
    succeeded: dict[str, int] = {}
    for ref in event.pods:
        succeeded[ref.task] = succeeded.get(ref.task, 0) + 1
    total = sum(succeeded.values())
    if job.min_success is not None and total >= job.min_success:
        return [_action(job, COMPLETE_JOB, event, now, f"minSuccess {job.min_success} reached: {total} of "
                        f"{job.total_replicas} pods Succeeded", cause=event.event, pods=_all_pods(job))]
    if event.event != PODS_FINISHED:
        return []
    task_minimum = {t.name: t.minimum for t in job.tasks}  # and the job's, Job.gang_size
    job_minimum = job.gang_size
    short = [t for t in task_minimum if succeeded.get(t, 0) < task_minimum[t]]
    if short and job_minimum >= sum(task_minimum.values()):
        task = short[0]
        return [_action(job, FAIL_JOB, event, now, f"all pods ended: task {task} has {succeeded.get(task, 0)} "
                        f"Succeeded, minAvailable {task_minimum[task]}", cause=PODS_FINISHED, pods=_all_pods(job))]
    if job.min_success is not None:  # not reached (else completed above)
        return [_action(job, FAIL_JOB, event, now, f"all pods ended: {total} of {job.total_replicas} Succeeded, "
                        f"minSuccess {job.min_success}", cause=PODS_FINISHED, pods=_all_pods(job))]
    kind = COMPLETE_JOB if total >= job_minimum else FAIL_JOB
    return [_action(job, kind, event, now, f"all pods ended: {total} of {job.total_replicas} Succeeded, "
                    f"minAvailable {job_minimum}", cause=PODS_FINISHED, pods=_all_pods(job))]


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
    retries = state.retries
    phase, handled, reason = state.phase, set(state.handled), state.reason
    for action in actions:
        if not action.ready(now):
            continue
        handled.add(action.event_key)
        if action.kind in RESTARTS and action.cause != NODE_LOST:
            retries += 1
        if action.kind in _PHASE_AFTER:
            phase, reason = _PHASE_AFTER[action.kind], action.record.message
    return replace(state, phase=phase, retries=retries, handled=frozenset(handled),
                   reason=reason)
