"""A placed Volcano job's lifecycle on the fake cluster, as Volcano's job controller runs
it: a pod deleted by someone else is PodEvicted, a job whose every pod ended is settled by
its minAvailable, a task whose containers keep restarting is TaskFailed, and every restart
spends the job's maxRetry."""

from __future__ import annotations

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
    # 1 left < minAvailable 2: the failures end the job at once
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["FailJob"] and report.phase == "Failed"


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
