"""Turn observed pods and nodes into the ``PodEvent`` conditions recovery decides on.

Level-triggered on purpose: conditions are recomputed from the cluster on every pass
(watch events only trigger passes), so an agent that restarts, or misses a watch event,
sees the same conditions again. Each condition carries ``since`` from the pod's status,
which keeps its identity stable across passes so ``recovery.record`` can mark it handled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from agents.core.records import PodRecord
from agents.core.recovery import (
    MIN_SUCCESS_REACHED,
    NODE_LOST,
    POD_EVICTED,
    POD_FAILED,
    POD_PENDING,
    PODS_FINISHED,
    TASK_COMPLETED,
    TASK_FAILED,
    UNKNOWN,
    JobRuntimeState,
    PodEvent,
    PodRef,
)
from federation.domain.jobs import DEFAULT_MAX_RETRY, Job
from federation.domain.nodes import Node
from federation.domain.states import PodPhase

EVICTED_REASONS = frozenset({"Evicted", "Preempted", "Preempting", "DeletionByTaintManager"})


def _ref(pod: PodRecord) -> PodRef:
    return PodRef(pod.name, pod.task, pod.index, pod.node or "")


def job_pods(job: Job, pods: Iterable[PodRecord], version: int | None = None) -> list[PodRecord]:
    """The job's pods (of ``version`` when given), sorted by name; a workload job's pods
    get their index here (agents/core/workloads.py), its controller having named them, and
    those ranked past twice the replicas (finished pods its controller replaced and left
    behind) are left out: they hold no room, and central refuses a report naming them."""
    mine = [p for p in pods if p.job == job.name and p.namespace == job.namespace]
    if job.workload is not None:
        from agents.core.workloads import index_pods  # workloads imports reconcile, which imports us

        mine = [p for p in index_pods(job, mine) if p.index < 2 * job.tasks[0].replicas]
    return sorted((p for p in mine if version is None or p.version == version), key=lambda p: p.name)


def pod_events(job: Job, pods: Sequence[PodRecord], nodes: Sequence[Node], now: float,
               evicted: Sequence[PodEvent] = (), *, ready: AbstractSet[str] | None = None) -> list[PodEvent]:
    """Conditions of the job's live pods: node lost (one event per node), failed, evicted,
    unknown, pending, and ``evicted`` (pods deleted by someone else, ``track_deletions``);
    then one TaskFailed per task whose containers restarted too often, one TaskCompleted
    per task whose pods all succeeded, and the settling condition (``settling``).
    Pods already being deleted are skipped: an action is already under way for them.
    ``ready`` is the names of the Ready ``nodes`` when the caller has them: worked out per
    job, they cost a pass jobs x nodes."""
    usable = ready if ready is not None else {n.name for n in nodes if n.ready}
    lost: dict[str, list[PodRecord]] = {}
    events: list[PodEvent] = []
    for pod in pods:
        if pod.deleting:
            continue
        if pod.node is not None and not pod.terminal and pod.node not in usable:
            lost.setdefault(pod.node, []).append(pod)
            continue
        if pod.phase == PodPhase.FAILED:
            kind = POD_EVICTED if pod.reason in EVICTED_REASONS else POD_FAILED
            events.append(PodEvent(kind, pod.task, (_ref(pod),), pod.exit_code, pod.phase_since, pod.node or ""))
        elif pod.phase == PodPhase.UNKNOWN:
            events.append(PodEvent(UNKNOWN, pod.task, (_ref(pod),), None, pod.phase_since, pod.node or ""))
        elif pod.phase == PodPhase.PENDING:
            events.append(PodEvent(POD_PENDING, pod.task, (_ref(pod),), None, pod.phase_since, pod.node or ""))
    node_events: list[PodEvent] = []
    for node, on_node in sorted(lost.items()):
        refs = tuple(_ref(p) for p in on_node)
        tasks = sorted({p.task for p in on_node})
        since = max(p.phase_since for p in on_node)  # a replacement pod gets a new identity
        node_events.append(PodEvent(NODE_LOST, tasks[0] if len(tasks) == 1 else "", refs, None, since, node))
    events += evicted
    events += task_failures(job, pods)
    done = completed_tasks(job, pods)
    for task in (t.name for t in job.tasks if t.name in done):  # in task order, not the set's
        # Named by the pod whose success completed it, as Volcano raises TaskCompleted
        # on that pod's update (RestartPod then restarts that pod).
        last = max((p for p in pods if p.task == task and p.phase == PodPhase.SUCCEEDED and not p.deleting),
                   key=lambda p: (p.phase_since, p.name))
        events.append(PodEvent(TASK_COMPLETED, task, (_ref(last),), None, last.phase_since, last.node or ""))
    events += settling(job, pods)
    return node_events + events


def task_failures(job: Job, pods: Sequence[PodRecord]) -> list[PodEvent]:
    """TaskFailed for each task whose Running and Pending pods' containers have restarted
    at least its ``maxRetry`` times in total (0 or unset: 3), as Volcano's job cache
    ``TaskFailed`` counts (pkg/controllers/cache/cache.go). It names the restarted pods;
    it begins when the latest of them entered its phase, so it is acted on once per set of
    pods (a restart replaces them, and the count starts again)."""
    out: list[PodEvent] = []
    for task in job.tasks:
        counted = [p for p in pods if p.task == task.name and not p.deleting
                   and p.phase in (PodPhase.RUNNING, PodPhase.PENDING)]
        if counted and sum(p.restarts for p in counted) >= (task.max_retry or DEFAULT_MAX_RETRY):
            restarted = [p for p in counted if p.restarts]
            out.append(PodEvent(TASK_FAILED, task.name, tuple(_ref(p) for p in restarted), None,
                                max(p.phase_since for p in counted)))
    return out


def settling(job: Job, pods: Sequence[PodRecord]) -> list[PodEvent]:
    """The condition Volcano's running state settles the job on (state/running.go), naming
    the Succeeded pods: MinSuccessReached once ``minSuccess`` pods have Succeeded, else
    PodsFinished when every replica of every task has a pod that has ended (Succeeded or
    Failed)."""
    ended = {(p.task, p.index): p for p in pods if p.terminal and not p.deleting}
    succeeded = [p for p in ended.values() if p.phase == PodPhase.SUCCEEDED]
    if job.min_success is not None and len(succeeded) >= job.min_success:
        since = sorted(p.phase_since for p in succeeded)[job.min_success - 1]  # when it was reached
        return [PodEvent(MIN_SUCCESS_REACHED, "", tuple(_ref(p) for p in succeeded), None, since)]
    if len(ended) < job.total_replicas or any((t.name, i) not in ended for t in job.tasks for i in range(t.replicas)):
        return []
    return [PodEvent(PODS_FINISHED, "", tuple(_ref(p) for p in succeeded), None,
                     max(p.phase_since for p in ended.values()))]


def live_pods(pods: Sequence[PodRecord]) -> tuple[PodRef, ...]:
    """The pods that have neither ended nor begun deleting (``JobRuntimeState.live``)."""
    return tuple(_ref(p) for p in pods if not p.terminal and not p.deleting)


def track_deletions(state: JobRuntimeState, pods: Sequence[PodRecord], now: float) -> JobRuntimeState:
    """PodEvicted for each pod live at the end of the last pass that is now gone or being
    deleted: the agent deletes its pods only within a pass, after which they are no
    longer live, so someone else deleted these (Volcano raises PodEvicted on a pod's
    deletion, pkg/controllers/job/job_controller_handler.go ``deletePod``). Earlier ones
    are kept until acted on, or until the pod runs again (Volcano cancels a delayed action
    then). An agent that restarts starts with no live pods: it does not see deletions
    made while it was away, only their recreated pods."""
    now_by_name = {p.name: p for p in pods}

    def gone(ref: PodRef) -> bool:
        pod = now_by_name.get(ref.name)
        return pod is None or pod.deleting

    def running_again(event: PodEvent) -> bool:
        pod = now_by_name.get(event.pods[0].name)
        return (pod is not None and not pod.deleting and pod.phase == PodPhase.RUNNING
                and pod.phase_since >= event.since)

    kept = [e for e in state.evicted if e.key not in state.handled and not running_again(e)]
    known = {e.pods[0].name for e in kept}
    fresh = [PodEvent(POD_EVICTED, ref.task, (ref,), None, now, ref.node, deleted=True)
             for ref in state.live if gone(ref) and ref.name not in known]
    return replace(state, evicted=(*kept, *fresh), live=())


def completed_tasks(job: Job, pods: Sequence[PodRecord]) -> frozenset[str]:
    """Tasks whose every replica has a Succeeded pod."""
    done = set()
    for task in job.tasks:
        succeeded = {p.index for p in pods if p.task == task.name and p.phase == PodPhase.SUCCEEDED and not p.deleting}
        if len(succeeded) >= task.replicas:
            done.add(task.name)
    return frozenset(done)


def observe(state: JobRuntimeState, job: Job, pods: Sequence[PodRecord]) -> JobRuntimeState:
    """Refresh the observed part of the state (the completed tasks)."""
    return replace(state, completed_tasks=completed_tasks(job, pods))
