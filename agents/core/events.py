"""Turn observed pods and nodes into the ``PodEvent`` conditions recovery decides on.

Level-triggered on purpose: conditions are recomputed from the cluster on every pass
(watch events only trigger passes), so an agent that restarts, or misses a watch event,
sees the same conditions again. Each condition carries ``since`` from the pod's status,
which keeps its identity stable across passes so ``recovery.record`` can mark it handled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from agents.core.records import PodRecord
from agents.core.recovery import (
    NODE_LOST,
    POD_EVICTED,
    POD_FAILED,
    POD_PENDING,
    TASK_COMPLETED,
    UNKNOWN,
    JobRuntimeState,
    PodEvent,
    PodRef,
)
from federation.domain.jobs import Job
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


def pod_events(job: Job, pods: Sequence[PodRecord], nodes: Sequence[Node], now: float) -> list[PodEvent]:
    """Conditions of the job's live pods: node lost (one event per node), failed, evicted,
    unknown, pending; then one TaskCompleted per task whose pods all succeeded.
    Pods already being deleted are skipped: an action is already under way for them."""
    usable = {n.name for n in nodes if n.ready}
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
    for task in completed_tasks(job, pods):
        since = max(p.phase_since for p in pods if p.task == task)
        events.append(PodEvent(TASK_COMPLETED, task, (), None, since))
    return node_events + events


def completed_tasks(job: Job, pods: Sequence[PodRecord]) -> frozenset[str]:
    """Tasks whose every replica has a Succeeded pod."""
    done = set()
    for task in job.tasks:
        succeeded = {p.index for p in pods if p.task == task.name and p.phase == PodPhase.SUCCEEDED and not p.deleting}
        if len(succeeded) >= task.replicas:
            done.add(task.name)
    return frozenset(done)


def observe(state: JobRuntimeState, job: Job, pods: Sequence[PodRecord]) -> JobRuntimeState:
    """Refresh the observed parts of the state (failed pods, completed tasks)."""
    failed = frozenset(p.name for p in pods if p.phase == PodPhase.FAILED and not p.deleting)
    return replace(state, failed_pods=failed, completed_tasks=completed_tasks(job, pods))
