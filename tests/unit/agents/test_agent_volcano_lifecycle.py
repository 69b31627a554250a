"""A placed Volcano job's lifecycle on the fake cluster, as Volcano's job controller runs
it: a pod deleted by someone else is PodEvicted, a job whose every pod ended is settled by
its minAvailable, a task whose containers keep restarting is TaskFailed, and every restart
spends the job's maxRetry."""

from __future__ import annotations

from dataclasses import replace

from agentkit import LABEL_KEYS, fake, job, work

from agents.core.controller import JobController
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from federation.domain.jobs import Job, LifecyclePolicy

P = LifecyclePolicy


async def running(j: Job, hypernode: str = "t1-l0", runtime: float | None = None
                  ) -> tuple[ManualClock, FakeCluster, JobController]:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=runtime)
    ctl = JobController(work(j, hypernode), label_keys=LABEL_KEYS)
    await ctl.sync(cluster, clock(), None)
    assert (await ctl.sync(cluster, clock(), None)).phase == "Running"
    clock.advance(10)
    return clock, cluster, ctl


async def test_a_pod_deleted_by_someone_else_is_pod_evicted_and_restarts_the_job() -> None:
    # The policy most real Volcano jobs carry (PodEvicted -> RestartJob): a drain or a
    # preemption deletes the pod, and the whole gang restarts, not just that pod.
    clock, cluster, ctl = await running(job(policies=(P("RestartJob", events=("PodEvicted",)),)))
    survivor = cluster.pod("train-worker-0")
    await cluster.delete_pod("default", "train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartJob"]
    assert report.events[0].message.startswith("RestartJob on PodEvicted of pod train-worker-1")
    assert ctl.state.retries == 1
    assert survivor is not None and cluster.pod("train-worker-0") != survivor  # the gang was restarted
    assert all(p.phase == "Running" for p in cluster.pods()) and len(cluster.pods()) == 2
    again = await ctl.sync(cluster, clock(), None)
    assert again.actions == () and ctl.state.retries == 1  # acted on once


async def test_the_agents_own_deletions_are_not_evictions() -> None:
    clock, cluster, ctl = await running(job(policies=(P("RestartJob", events=("PodEvicted",)),
                                                      P("RestartPod", events=("PodFailed",)))))
    cluster.fail_pod("train-worker-1")
    assert [a.kind for a in (await ctl.sync(cluster, clock(), None)).actions] == ["RestartPod"]
    for _ in range(2):
        assert (await ctl.sync(cluster, clock(), None)).actions == ()
    assert ctl.state.retries == 1


async def test_a_deleted_pod_without_a_policy_is_recreated_without_spending_a_retry() -> None:
    clock, cluster, ctl = await running(job(policies=(P("RestartJob", events=("PodFailed",)),)))
    await cluster.delete_pod("default", "train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert report.actions == () and ctl.state.retries == 0
    pod = cluster.pod("train-worker-1")
    assert pod is not None and pod.phase == "Running"


async def test_a_delayed_eviction_action_is_dropped_once_the_pod_runs_again() -> None:
    clock, cluster, ctl = await running(job(policies=(P("RestartJob", events=("PodEvicted",),
                                                        timeout_seconds=600),)))
    await cluster.delete_pod("default", "train-worker-1")
    waiting = await ctl.sync(cluster, clock(), None)
    assert waiting.actions == () and waiting.wake_at == 610.0
    clock.set(610.0)
    assert (await ctl.sync(cluster, clock(), None)).actions == ()  # recreated and running: cancelled
    assert ctl.state.evicted == () and ctl.state.retries == 0


async def test_an_elastic_job_whose_pods_all_ended_completes_with_min_available_succeeded() -> None:
    # 3 of 4 Succeeded, 1 Failed, minAvailable 2, no policy: Volcano completes the job.
    # It used to stay Running for ever (no task had every replica Succeeded).
    clock, cluster, ctl = await running(job(tasks=(("worker", 4, 1),), min_available=2), "t2-s0", runtime=100.0)
    cluster.fail_pod("train-worker-3")
    assert (await ctl.sync(cluster, clock(), None)).actions == ()  # 3 left >= minAvailable: keeps running
    cluster.advance(200)
    done = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in done.actions] == ["CompleteJob"] and done.phase == "Succeeded"
    assert done.events[0].message == "all pods ended: 3 of 4 Succeeded, minAvailable 2"


async def test_an_elastic_job_whose_pods_all_ended_below_min_available_fails() -> None:
    clock, cluster, ctl = await running(job(tasks=(("worker", 4, 1),), min_available=2), "t2-s0", runtime=100.0)
    cluster.fail_pod("train-worker-3")
    await ctl.sync(cluster, clock(), None)
    cluster.fail_pod("train-worker-2")
    cluster.fail_pod("train-worker-1")
    # 1 left < minAvailable 2, no policy: Volcano's SyncJob leaves the last pod running
    assert (await ctl.sync(cluster, clock(), None)).actions == ()
    assert (cluster.pod("train-worker-0") or cluster.pods()[0]).phase == "Running"
    cluster.advance(200)
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["FailJob"] and report.phase == "Failed"
    assert report.events[0].message == "all pods ended: 1 of 4 Succeeded, minAvailable 2"


async def test_a_failed_pod_without_a_policy_is_kept_and_the_gang_runs_on_until_all_pods_end() -> None:
    # Volcano's default action is SyncJob: it creates only missing pods (a Failed one is
    # counted, not recreated) and settles the job when every pod has ended (running.go).
    # The gang used to be failed at once, its running pods deleted.
    clock, cluster, ctl = await running(job(tasks=(("worker", 3, 1),)), "t2-s0", runtime=100.0)
    cluster.fail_pod("train-worker-2")
    for _ in range(2):
        report = await ctl.sync(cluster, clock(), None)
        assert report.actions == () and ctl.state.phase == "Running" and ctl.state.retries == 0
    phases = {p.name: p.phase for p in cluster.pods()}
    assert phases == {"train-worker-0": "Running", "train-worker-1": "Running", "train-worker-2": "Failed"}
    cluster.advance(200)
    done = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in done.actions] == ["FailJob"] and done.phase == "Failed"
    assert done.events[0].message == "all pods ended: task worker has 2 Succeeded, minAvailable 3"


async def test_a_kubelet_evicted_pod_without_a_policy_is_kept_like_a_failed_one() -> None:
    clock, cluster, ctl = await running(job(tasks=(("worker", 2, 1),), min_available=1), "t2-s0", runtime=100.0)
    cluster.evict_pod("train-worker-1")
    assert (await ctl.sync(cluster, clock(), None)).actions == ()
    evicted = cluster.pod("train-worker-1")
    assert evicted is not None and evicted.phase == "Failed" and evicted.reason == "Evicted"  # not recreated
    cluster.advance(200)
    done = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in done.actions] == ["CompleteJob"] and done.phase == "Succeeded"


async def test_min_success_completes_the_job_and_deletes_the_pods_still_running() -> None:
    # Volcano's minSuccess (docs/design/minsuccess.md): a service task runs for ever, so
    # the job is Completed once minSuccess pods Succeeded and the rest are reclaimed.
    j = replace(job(tasks=(("worker", 2, 1), ("redis", 1, 0))), min_success=2)
    clock, cluster, ctl = await running(j, "t2-s0")
    cluster.succeed_pod("train-worker-0")
    assert (await ctl.sync(cluster, clock(), None)).actions == ()
    cluster.succeed_pod("train-worker-1")
    done = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in done.actions] == ["CompleteJob"] and done.phase == "Succeeded"
    assert done.events[0].message == "minSuccess 2 reached: 2 of 3 pods Succeeded"
    assert {p.name: p.phase for p in cluster.pods()} == {"train-worker-0": "Succeeded",
                                                         "train-worker-1": "Succeeded"}


async def test_min_success_not_reached_when_every_pod_ended_fails_the_job() -> None:
    j = replace(job(tasks=(("worker", 3, 1),), min_available=1), min_success=2)
    clock, cluster, ctl = await running(j, "t2-s0")
    cluster.succeed_pod("train-worker-0")
    cluster.fail_pod("train-worker-1")
    cluster.fail_pod("train-worker-2")
    done = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in done.actions] == ["FailJob"] and done.phase == "Failed"
    assert done.events[0].message == "all pods ended: 1 of 3 Succeeded, minSuccess 2"


async def test_restart_pod_on_task_completed_restarts_only_the_pod_that_completed_the_task() -> None:
    # Volcano raises TaskCompleted on the update of the pod whose success completed the
    # task, and RestartPod kills that request's pod (job_controller_util.go GetStateAction).
    j = job(tasks=(("worker", 2, 1), ("ps", 1, 0)), policies=(P("RestartPod", events=("TaskCompleted",)),))
    clock, cluster, ctl = await running(j, "t2-s0")
    cluster.succeed_pod("train-worker-0")
    clock.advance(5)
    cluster.succeed_pod("train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert [(a.kind, a.pods) for a in report.actions] == [("RestartPod", ("train-worker-1",))]
    assert report.events[0].message.startswith(
        "RestartPod on TaskCompleted of task worker (completed by pod train-worker-1)")
    phases = {p.name: p.phase for p in cluster.pods()}
    assert phases["train-worker-0"] == "Succeeded" and phases["train-worker-1"] == "Running"
    assert ctl.state.retries == 1


async def test_all_pods_ended_waits_for_a_restart_under_way() -> None:
    clock, cluster, ctl = await running(job(tasks=(("worker", 2, 1),), min_available=1,
                                            policies=(P("RestartPod", events=("PodFailed",)),)), runtime=100.0)
    cluster.succeed_pod("train-worker-0")
    cluster.fail_pod("train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartPod"] and ctl.state.phase == "Running"


async def test_a_task_whose_containers_restart_max_retry_times_is_task_failed() -> None:
    # tasks[].maxRetry is Volcano's TaskFailed threshold (container restarts of the task's
    # running pods), acted on by a TaskFailed policy; it used to be a restart budget.
    j = job(tasks=(("worker", 2, 1),), task_max_retry={"worker": 2},
            policies=(P("AbortJob", events=("TaskFailed",)),))
    clock, cluster, ctl = await running(j)
    cluster.restart_container("train-worker-0")
    assert (await ctl.sync(cluster, clock(), None)).actions == ()
    cluster.restart_container("train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["AbortJob"]
    assert report.events[0].message.startswith("AbortJob on TaskFailed of pods train-worker-0, train-worker-1")


async def test_task_failed_without_a_policy_changes_nothing() -> None:
    clock, cluster, ctl = await running(job(tasks=(("worker", 2, 1),)))
    for _ in range(3):
        cluster.restart_container("train-worker-0")
    assert (await ctl.sync(cluster, clock(), None)).actions == () and ctl.state.phase == "Running"
