"""Deriving recovery conditions from observed pods and nodes (level-triggered)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from agentkit import job

from agents.core.events import job_pods, observe, pod_events
from agents.core.records import LABEL_JOB, LABEL_TASK, LABEL_TASK_INDEX, LABEL_WORK_VERSION, PodRecord
from agents.core.recovery import JobRuntimeState, PodEvent
from federation.domain.nodes import Node
from federation.domain.resources import Resources

J = job(tasks=(("master", 1, 0), ("worker", 2, 8)))
NODES = (Node("n1", Resources.of(gpu=8), Resources.of(gpu=8)),
         Node("n2", Resources.of(gpu=8), Resources.of(gpu=8), ready=False))


def pod(task: str, index: int, phase: str = "Running", node: str | None = "n1", *, reason: str = "",
        code: int | None = None, since: float = 3.0, deleting: bool = False, version: int = 1) -> PodRecord:
    labels = {LABEL_JOB: "train", LABEL_TASK: task, LABEL_TASK_INDEX: str(index), LABEL_WORK_VERSION: str(version)}
    return PodRecord(f"train-{task}-{index}", "default", labels, node=node, phase=phase, reason=reason,
                     exit_code=code, phase_since=since, deleting=deleting)


def summary(events: list[PodEvent]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(e.event, e.task, tuple(p.name for p in e.pods)) for e in events]


CASES = [
    pytest.param([pod("worker", 0)], [], id="running-pod-is-quiet"),
    pytest.param([pod("worker", 0, "Failed", code=137)], [("PodFailed", "worker", ("train-worker-0",))],
                 id="failed-pod"),
    pytest.param([pod("worker", 0, "Failed", reason="Evicted")], [("PodEvicted", "worker", ("train-worker-0",))],
                 id="evicted-pod"),
    pytest.param([pod("worker", 0, "Unknown")], [("Unknown", "worker", ("train-worker-0",))], id="unknown-pod"),
    pytest.param([pod("worker", 0, "Pending", None)], [("PodPending", "worker", ("train-worker-0",))],
                 id="pending-pod"),
    pytest.param([pod("worker", 0, node="n2"), pod("worker", 1, node="n2")],
                 [("NodeLost", "worker", ("train-worker-0", "train-worker-1"))], id="not-ready-node-one-event"),
    pytest.param([pod("worker", 0, node="gone")], [("NodeLost", "worker", ("train-worker-0",))],
                 id="deleted-node"),
    pytest.param([pod("worker", 0, "Succeeded", node="n2")], [], id="finished-pod-on-lost-node-is-fine"),
    pytest.param([pod("worker", 0, "Failed", deleting=True)], [], id="pod-being-deleted-is-already-handled"),
    pytest.param([pod("master", 0, "Succeeded"), pod("worker", 0, "Succeeded")],
                 [("TaskCompleted", "master", ("train-master-0",))], id="task-completed-when-all-replicas-succeeded"),
    pytest.param([pod("master", 0, "Succeeded"), pod("worker", 0, "Succeeded", since=9.0),
                  pod("worker", 1, "Succeeded", since=7.0)],
                 [("TaskCompleted", "master", ("train-master-0",)),
                  ("TaskCompleted", "worker", ("train-worker-0",)),
                  ("PodsFinished", "", ("train-master-0", "train-worker-0", "train-worker-1"))],
                 id="task-completed-names-the-pod-whose-success-completed-it"),
]


@pytest.mark.parametrize(("pods", "expected"), CASES)
def test_pod_events(pods: list[PodRecord], expected: list[tuple[str, str, tuple[str, ...]]]) -> None:
    assert summary(pod_events(J, pods, NODES, 10.0)) == expected


def test_failed_event_carries_exit_code_and_since() -> None:
    [event] = pod_events(J, [pod("worker", 1, "Failed", code=137, since=42.0)], NODES, 50.0)
    assert (event.exit_code, event.since, event.node) == (137, 42.0, "n1")


def test_observe_refreshes_completed_tasks() -> None:
    pods = [pod("master", 0, "Succeeded"), pod("worker", 0, "Failed"), pod("worker", 1)]
    state = observe(JobRuntimeState(retries=2), J, pods)
    assert state.completed_tasks == {"master"} and state.retries == 2


def test_min_success_reached_is_raised_while_other_pods_run() -> None:
    # Volcano's running state completes a job once minSuccess pods Succeeded, whatever else runs.
    j = replace(J, min_success=2)
    pods = [pod("master", 0, "Succeeded", since=5.0), pod("worker", 0, "Succeeded", since=8.0), pod("worker", 1)]
    events = pod_events(j, pods, NODES, 10.0)
    assert summary(events)[-1] == ("MinSuccessReached", "", ("train-master-0", "train-worker-0"))
    assert events[-1].since == 8.0
    assert "MinSuccessReached" not in [e.event for e in pod_events(j, pods[:1] + pods[2:], NODES, 10.0)]


def test_min_success_reached_takes_the_place_of_pods_finished() -> None:
    j = replace(J, min_success=1)
    pods = [pod("master", 0, "Succeeded"), pod("worker", 0, "Failed"), pod("worker", 1, "Failed")]
    assert [e.event for e in pod_events(j, pods, NODES, 10.0)][-1:] == ["MinSuccessReached"]


def test_job_pods_filters_by_job_namespace_and_version() -> None:
    pods = [pod("worker", 0), pod("worker", 1, version=2)]
    assert [p.name for p in job_pods(J, pods, version=2)] == ["train-worker-1"]
