"""Restart policies as a decision table: (job, state, event, now) -> actions."""

from __future__ import annotations

from dataclasses import replace

import pytest
from agentkit import job

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
    Action,
    JobRuntimeState,
    PodEvent,
    PodRef,
    Room,
    decide,
    record,
)
from federation.domain.jobs import Job, LifecyclePolicy
from federation.domain.nodes import Node
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.topology import Domain

P = LifecyclePolicy
TWO_TASKS = (("master", 1, 0), ("worker", 2, 8))


def failed(pod: str = "train-worker-1", *, task: str = "worker", index: int = 1, code: int | None = 1,
           event: str = POD_FAILED, since: float = 100.0) -> PodEvent:
    return PodEvent(event, task, (PodRef(pod, task, index, "n1"),), code, since, "n1")


def kinds(actions: list[Action]) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.kind, a.pods) for a in actions]


WORKERS = ("train-worker-0", "train-worker-1")
ALL = ("train-master-0", *WORKERS)
FOUR = tuple(f"train-worker-{i}" for i in range(4))


def deleted(pod: str = "train-worker-1", index: int = 1) -> PodEvent:
    """A pod someone else deleted (controller: ``track_deletions``)."""
    return PodEvent(POD_EVICTED, "worker", (PodRef(pod, "worker", index, "n1"),), None, 100.0, "n1", deleted=True)


def finished(*succeeded: int) -> PodEvent:
    """Every replica ended; the worker pods of these indices Succeeded."""
    return PodEvent(PODS_FINISHED, "", tuple(PodRef(f"train-worker-{i}", "worker", i) for i in succeeded), None, 9.0)

TABLE = [
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(POD_FAILED,)),)), failed(),
                 [("RestartPod", ("train-worker-1",))], id="pod-failed-restarts-just-that-pod"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartTask", events=(POD_EVICTED,)),)),
                 failed(event=POD_EVICTED, code=None), [("RestartTask", WORKERS)],
                 id="pod-evicted-restarts-its-task"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=("*",)),)), failed(),
                 [("RestartJob", ALL)], id="star-matches-any-event"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=("*",)),)),
                 PodEvent(UNKNOWN, "worker", (PodRef("train-worker-0", "worker", 0),), None, 5.0),
                 [("RestartJob", ALL)], id="star-matches-unknown"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("AbortJob", events=(POD_FAILED,)),)), failed(),
                 [("AbortJob", ALL)], id="abort-job"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("TerminateJob", events=(POD_FAILED,)),)), failed(),
                 [("TerminateJob", ALL)], id="terminate-job"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("CompleteJob", events=(TASK_COMPLETED,)),)),
                 PodEvent(TASK_COMPLETED, "master", (), None, 50.0), [("CompleteJob", ALL)],
                 id="task-completed-completes-job"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(TASK_COMPLETED,)),)),
                 PodEvent(TASK_COMPLETED, "worker", (PodRef("train-worker-1", "worker", 1),), None, 50.0),
                 [("RestartPod", ("train-worker-1",))],
                 id="restart-pod-on-task-completed-restarts-the-pod-that-completed-it-as-volcano-targets-its-request"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", exit_code=137),)), failed(code=137),
                 [("RestartJob", ALL)], id="exit-code-policy-matches-its-code"),
    pytest.param(job(tasks=TWO_TASKS, min_available=2, policies=(P("RestartJob", exit_code=137),)), failed(code=1),
                 [], id="exit-code-policy-ignores-other-codes-elastic-job-continues"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", exit_code=137),)),
                 failed(event=POD_EVICTED, code=137), [("RestartJob", ALL)],
                 id="a-pod-that-ended-evicted-is-podfailed-to-volcano-so-its-exit-code-matches"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_FAILED,)),)),
                 failed(event=POD_EVICTED, code=None), [("RestartJob", ALL)],
                 id="a-pod-that-ended-evicted-takes-the-podfailed-policy-when-none-names-podevicted"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_FAILED,)),
                                                P("RestartPod", events=(POD_EVICTED,)))),
                 failed(event=POD_EVICTED, code=None), [("RestartPod", ("train-worker-1",))],
                 id="a-podevicted-policy-wins-for-a-pod-that-ended-evicted"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_FAILED,)),)), deleted(), [],
                 id="a-pod-deleted-by-someone-else-is-not-podfailed-and-is-just-recreated"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_EVICTED,)),)), deleted(),
                 [("RestartJob", ALL)], id="a-pod-deleted-by-someone-else-is-podevicted"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("AbortJob", events=(TASK_FAILED,)),)),
                 PodEvent(TASK_FAILED, "worker", (PodRef("train-worker-0", "worker", 0),), None, 5.0),
                 [("AbortJob", ALL)], id="task-failed-policy"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=("*",)),)),
                 PodEvent(TASK_FAILED, "worker", (PodRef("train-worker-0", "worker", 0),), None, 5.0),
                 [("RestartJob", ALL)], id="star-matches-task-failed"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(POD_PENDING,)),)),
                 PodEvent(POD_PENDING, "worker", (PodRef("train-worker-0", "worker", 0),), None, 0.0), [],
                 id="pod-pending-without-timeout-never-fires"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartJob", events=("*",)),)),
                 PodEvent(POD_PENDING, "worker", (PodRef("train-worker-0", "worker", 0),), None, 0.0), [],
                 id="star-without-timeout-does-not-fire-on-pending"),
    pytest.param(job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(POD_PENDING,), timeout_seconds=60),)),
                 PodEvent(POD_PENDING, "worker", (PodRef("train-worker-0", "worker", 0),), None, 0.0),
                 [("RestartPod", ("train-worker-0",))], id="pod-pending-past-timeout-fires"),
    # defaults when no policy matches
    # (Volcano's SyncJob: the Failed pod is counted, not recreated, and the others run on,
    # even below minAvailable; the job is settled once every pod has ended)
    pytest.param(job(tasks=TWO_TASKS), failed(), [], id="default-failed-pod-leaves-the-gang-running"),
    pytest.param(job(tasks=TWO_TASKS), failed(event=POD_EVICTED, code=None), [],
                 id="default-pod-that-ended-evicted-leaves-the-gang-running"),
    pytest.param(job(tasks=TWO_TASKS, min_available=2), failed(), [],
                 id="default-elastic-job-with-slack-keeps-running"),
    pytest.param(job(tasks=TWO_TASKS), PodEvent(UNKNOWN, "worker", (PodRef("train-worker-0", "worker", 0),)), [],
                 id="default-unknown-waits"),
    pytest.param(job(tasks=TWO_TASKS), PodEvent(TASK_COMPLETED, "worker", (), None, 9.0), [],
                 id="default-one-task-completed-is-not-the-job"),
    pytest.param(job(tasks=TWO_TASKS), deleted(), [], id="default-deleted-pod-is-recreated"),
    pytest.param(job(tasks=TWO_TASKS),
                 PodEvent(TASK_FAILED, "worker", (PodRef("train-worker-0", "worker", 0),), None, 5.0), [],
                 id="default-task-failed-does-nothing"),
    # every replica ended (Volcano's running state, pkg/controllers/job/state/running.go)
    pytest.param(job(tasks=(("worker", 4, 1),), min_available=2), finished(0, 1, 2), [("CompleteJob", FOUR)],
                 id="all-ended-with-minavailable-succeeded-completes"),
    pytest.param(job(tasks=(("worker", 4, 1),), min_available=2), finished(0), [("FailJob", FOUR)],
                 id="all-ended-below-minavailable-fails"),
    pytest.param(job(tasks=(("worker", 4, 1),)), finished(0, 1, 2), [("FailJob", FOUR)],
                 id="all-ended-default-minavailable-is-every-replica"),
    pytest.param(job(tasks=(("master", 1, 0), ("worker", 3, 1)), min_available=2, task_min={"master": 1}),
                 finished(1, 2), [("CompleteJob", ("train-master-0", *FOUR[:3]))],
                 id="task-minimums-above-the-jobs-are-not-checked"),
    pytest.param(job(tasks=(("master", 1, 0), ("worker", 3, 1)), min_available=3,
                     task_min={"master": 1, "worker": 2}),
                 finished(0, 1, 2), [("FailJob", ("train-master-0", *FOUR[:3]))],
                 id="a-task-below-its-minavailable-fails-the-job"),
    # minSuccess (running.go checks it first, then again once every pod has ended)
    pytest.param(replace(job(tasks=(("worker", 4, 1),)), min_success=2),
                 PodEvent(MIN_SUCCESS_REACHED, "", (PodRef("train-worker-0", "worker", 0),
                                                    PodRef("train-worker-2", "worker", 2)), None, 9.0),
                 [("CompleteJob", FOUR)], id="min-success-reached-completes-the-job-while-pods-run"),
    pytest.param(replace(job(tasks=(("worker", 4, 1),), min_available=1), min_success=2), finished(0),
                 [("FailJob", FOUR)], id="all-ended-below-min-success-fails-even-above-minavailable"),
    pytest.param(replace(job(tasks=(("master", 1, 0), ("worker", 3, 1)), min_available=4), min_success=2),
                 finished(0, 1), [("CompleteJob", ("train-master-0", *FOUR[:3]))],
                 id="all-ended-with-min-success-completes-even-with-a-task-short"),
]


@pytest.mark.parametrize(("j", "event", "expected"), TABLE)
def test_decision_table(j: Job, event: PodEvent, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    actions = decide(j, JobRuntimeState(), event, now=200.0)
    assert kinds(actions) == expected
    for action in actions:  # every action leaves a job-event record
        assert action.record.reason == action.kind and action.record.message
        assert action.record.type in ("Normal", "Warning")


def test_default_completes_the_job_when_every_task_has_completed() -> None:
    state = JobRuntimeState(completed_tasks=frozenset({"master"}))
    actions = decide(job(tasks=TWO_TASKS), state, PodEvent(TASK_COMPLETED, "worker", (), None, 9.0), 10.0)
    assert kinds(actions) == [("CompleteJob", ALL)]
    assert actions[0].record.type == "Normal"


def test_task_policy_overrides_job_policy_for_that_task_only() -> None:
    j = job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_FAILED,)),),
            task_policies={"worker": (P("RestartPod", events=(POD_FAILED,)),)})
    assert kinds(decide(j, JobRuntimeState(), failed(), 200.0)) == [("RestartPod", ("train-worker-1",))]
    master = failed("train-master-0", task="master", index=0)
    assert kinds(decide(j, JobRuntimeState(), master, 200.0)) == [("RestartJob", ALL)]


def test_task_policy_for_another_event_falls_through_to_job_policy() -> None:
    """Volcano applyPolicies consults task policies first, then job policies."""
    j = job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_FAILED,)),),
            task_policies={"worker": (P("RestartPod", events=(POD_EVICTED,)),)})
    assert kinds(decide(j, JobRuntimeState(), failed(), 200.0)) == [("RestartJob", ALL)]


def test_timeout_delays_the_action_until_due() -> None:
    j = job(tasks=TWO_TASKS, policies=(P("RestartJob", events=(POD_FAILED,), timeout_seconds=30),))
    early = decide(j, JobRuntimeState(), failed(since=100.0), now=110.0)
    assert kinds(early) == [("RestartJob", ALL)]
    assert early[0].due == 130.0 and not early[0].ready(110.0) and early[0].ready(130.0)
    assert "after timeout 30s" in early[0].record.message
    state = record(j, JobRuntimeState(), early, 110.0)
    assert state.retries == 0 and not state.handled  # a delayed action is not yet executed
    late = decide(j, state, failed(since=100.0), now=131.0)
    assert late[0].ready(131.0)


def test_pod_pending_before_timeout_is_a_delayed_action() -> None:
    j = job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(POD_PENDING,), timeout_seconds=60),))
    event = PodEvent(POD_PENDING, "worker", (PodRef("train-worker-0", "worker", 0),), None, 100.0)
    [action] = decide(j, JobRuntimeState(), event, now=120.0)
    assert action.due == 160.0 and not action.ready(120.0)


def test_the_restart_that_reaches_max_retry_fails_the_job() -> None:
    """Volcano counts the restart, then fails a job whose count reached maxRetry
    (state/running.go, state/restarting.go): maxRetry 3 allows two restarts."""
    j = job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(POD_FAILED,)),))
    state = JobRuntimeState()
    for attempt in range(2):
        actions = decide(j, state, failed(since=float(attempt)), now=10.0 + attempt)
        assert kinds(actions) == [("RestartPod", ("train-worker-1",))]
        assert f"(retry {attempt + 1}/3)" in actions[0].record.message
        state = record(j, state, actions, 10.0 + attempt)
    assert state.retries == 2
    [fail] = decide(j, state, failed(since=99.0), now=100.0)
    assert fail.kind == "FailJob"
    assert fail.record.message == "maxRetry 3 exhausted after PodFailed of pod train-worker-1 (exitCode=1) on node n1"
    assert record(j, state, [fail], 100.0).phase == "Failed"


def test_max_retry_one_allows_no_restart() -> None:
    j = job(tasks=TWO_TASKS, max_retry=1, policies=(P("RestartTask", events=(POD_FAILED,)),))
    assert kinds(decide(j, JobRuntimeState(), failed(), 1.0))[0][0] == "FailJob"


def test_every_restart_counts_against_the_jobs_max_retry_not_the_tasks() -> None:
    """A task's maxRetry is its TaskFailed threshold; its restarts spend the job's budget."""
    j = job(tasks=TWO_TASKS, max_retry=3, task_max_retry={"worker": 10},
            policies=(P("RestartPod", events=(POD_FAILED,)),),
            task_policies={"master": (P("RestartTask", events=(POD_FAILED,)),)})
    state = record(j, JobRuntimeState(), decide(j, JobRuntimeState(), failed(since=1.0), 2.0), 2.0)
    master = failed("train-master-0", task="master", index=0, since=3.0)
    state = record(j, state, decide(j, state, master, 4.0), 4.0)
    assert state.retries == 2
    [fail] = decide(j, state, failed(since=5.0), 6.0)
    assert fail.kind == "FailJob" and fail.record.message.startswith("maxRetry 3 exhausted")


def test_zero_max_retry_fails_on_the_first_restart() -> None:
    j = job(tasks=TWO_TASKS, max_retry=0, policies=(P("RestartJob", events=(POD_FAILED,)),))
    assert kinds(decide(j, JobRuntimeState(), failed(), 1.0))[0][0] == "FailJob"


def test_an_event_is_acted_on_once() -> None:
    j = job(tasks=TWO_TASKS, policies=(P("RestartPod", events=(POD_FAILED,)),))
    actions = decide(j, JobRuntimeState(), failed(), 1.0)
    state = record(j, JobRuntimeState(), actions, 1.0)
    assert decide(j, state, failed(), 2.0) == []
    assert decide(j, state, failed(since=5.0), 6.0) != []  # the recreated pod failing again is a new event


@pytest.mark.parametrize("phase", ["Completed", "Failed", "Aborted", "Terminated"])
def test_finished_jobs_take_no_action(phase: str) -> None:
    j = job(tasks=TWO_TASKS, policies=(P("RestartJob", events=("*",)),))
    assert decide(j, JobRuntimeState(phase=phase), failed(), 1.0) == []


@pytest.mark.parametrize(("action", "phase"), [("AbortJob", "Aborted"), ("TerminateJob", "Terminated"),
                                               ("CompleteJob", "Completed")])
def test_job_ending_actions_move_the_phase(action: str, phase: str) -> None:
    j = job(tasks=TWO_TASKS, policies=(P(action, events=(POD_FAILED,)),))
    actions = decide(j, JobRuntimeState(), failed(), 1.0)
    assert record(j, JobRuntimeState(), actions, 1.0).phase == phase


DOMAIN = Domain("leaf-a", 1, frozenset({"n1", "n2", "n3"}))


def gpu_node(name: str, free: int, ready: bool = True) -> Node:
    return Node(name, Resources.of(gpu=8, cpu=64000), Resources.of(gpu=free, cpu=64000), ready=ready)


def lost(*pods: tuple[str, int]) -> PodEvent:
    refs = tuple(PodRef(f"train-worker-{i}", "worker", i, node) for node, i in pods)
    return PodEvent(NODE_LOST, "worker", refs, None, 7.0, "n1")


def test_node_lost_replaces_pods_inside_the_same_hypernode() -> None:
    room = Room(DOMAIN, (gpu_node("n1", 0, ready=False), gpu_node("n2", 8), gpu_node("n3", 8), gpu_node("x9", 8)))
    [action] = decide(job(tasks=TWO_TASKS), JobRuntimeState(), lost(("n1", 0), ("n1", 1)), 10.0, room=room)
    assert action.kind == "RestartPod" and action.pods == WORKERS
    assert set(action.targets) == {PodAssignment("worker", 0, "n2"), PodAssignment("worker", 1, "n3")}
    assert "inside leaf-a" in action.record.message
    state = record(job(tasks=TWO_TASKS), JobRuntimeState(), [action], 10.0)
    assert state.retries == 0  # the cluster's fault, not the job's


def test_node_lost_without_room_in_the_domain_reports_replan() -> None:
    room = Room(DOMAIN, (gpu_node("n1", 0, ready=False), gpu_node("n2", 8), gpu_node("n3", 0), gpu_node("x9", 8)))
    [action] = decide(job(tasks=TWO_TASKS), JobRuntimeState(), lost(("n1", 0), ("n1", 1)), 10.0, room=room)
    assert action.kind == "Replan"
    assert "no node in leaf-a has room for train-worker-1" in action.record.message


def test_node_lost_without_a_view_of_the_domain_replaces_and_lets_binding_decide() -> None:
    [action] = decide(job(tasks=TWO_TASKS), JobRuntimeState(), lost(("n1", 0)), 10.0)
    assert action.kind == "RestartPod" and action.targets == ()
