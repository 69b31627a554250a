"""A new agent (a restarted process, or a new leader of the DaemonSet) takes over a job
the old one was running, with nothing but the cluster: it resumes the job's maxRetry
budget and sees the pods someone deleted while no agent ran, from the runtime state the
old one saved on the job's Service (agents/core/checkpoints.py)."""

from __future__ import annotations

import logging

import pytest
from agentkit import LABEL_KEYS, fabric, fake, job, work

from agents.core.checkpoints import ANNOTATION_CHECKPOINT
from agents.core.controller import JobController
from agents.core.records import ANNOTATION_SPEC_HASH
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from federation.domain.jobs import LifecyclePolicy
from federation.domain.works import Work

P = LifecyclePolicy
RESTART_ON_FAILURE_OR_EVICTION = (P("RestartJob", events=("PodFailed", "PodEvicted")),)


def new_agent(w: Work) -> JobController:
    return JobController(w, label_keys=LABEL_KEYS)


async def started(w: Work, clock: ManualClock, cluster: FakeCluster | None = None) -> tuple[FakeCluster, JobController]:
    cluster = cluster or fake(clock=clock)
    ctl = new_agent(w)
    await ctl.sync(cluster, clock(), None)
    assert (await ctl.sync(cluster, clock(), None)).phase == "Running"
    clock.advance(10)
    return cluster, ctl


def saved(cluster: FakeCluster) -> str | None:
    (service,) = cluster.services()
    return service.annotations.get(ANNOTATION_CHECKPOINT)


async def test_a_new_agent_resumes_the_retry_count_and_sees_a_pod_deleted_while_none_ran() -> None:
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=3))
    cluster, old = await started(w, clock)
    cluster.fail_pod("train-worker-0")
    assert [a.kind for a in (await old.sync(cluster, clock(), None)).actions] == ["RestartJob"]
    assert old.state.retries == 1
    clock.advance(10)
    # The old agent is gone (killed, or its Lease lost); a drain deletes a pod meanwhile.
    await cluster.delete_pod("default", "train-worker-1")

    new = new_agent(w)
    report = await new.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartJob"]
    assert report.events[0].message == "RestartJob on PodEvicted of pod train-worker-1 (retry 2/3)"
    assert new.state.retries == 2
    # The third restart exhausts maxRetry 3 instead of running the job again.
    clock.advance(10)
    cluster.fail_pod("train-worker-1")
    failed = await new_agent(w).sync(cluster, clock(), None)  # and yet another agent by then
    assert [a.kind for a in failed.actions] == ["FailJob"]
    assert failed.message.startswith("job Failed: maxRetry 3 exhausted after PodFailed of pod train-worker-1")


async def test_a_finished_job_stays_finished_with_its_reason_under_a_new_agent() -> None:
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=1))
    cluster, old = await started(w, clock)
    cluster.fail_pod("train-worker-0")
    assert (await old.sync(cluster, clock(), None)).phase == "Failed"
    report = await new_agent(w).sync(cluster, clock(), None)
    assert report.phase == "Failed" and report.actions == ()
    assert report.message == "job Failed: maxRetry 1 exhausted after PodFailed of pod train-worker-0 (exitCode=1)" \
        " on node n00"
    assert [p.name for p in cluster.pods()] == ["train-worker-0"]  # kept for inspection, nothing recreated


async def test_a_new_work_version_takes_only_the_retry_count_from_the_old_one() -> None:
    clock = ManualClock()
    j = job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=3)
    cluster, old = await started(work(j, version=1), clock)
    cluster.fail_pod("train-worker-0")
    assert [a.kind for a in (await old.sync(cluster, clock(), None)).actions] == ["RestartJob"]
    # Central re-places the job (version 2) and a new agent gets it: a re-plan moves the
    # job, it does not forgive its failures (JobController.update); the old version's pods
    # it deletes itself are no evictions.
    new = new_agent(work(j, version=2, hypernode="t1-l1"))
    for _ in range(3):
        report = await new.sync(cluster, clock(), None)
        assert report.actions == ()
    assert new.state.retries == 1 and report.phase == "Running"
    assert {p.node for p in cluster.pods()} == {"n02", "n03"}


class CrashAfterOneDelete(FakeCluster):
    """The agent process dies right after its first pod deletion of a pass."""

    armed = False

    async def delete_pod(self, namespace: str, name: str) -> bool:
        gone = await super().delete_pod(namespace, name)
        if self.armed:
            raise SystemExit("agent killed")
        return gone


async def test_the_agents_own_deletions_are_not_taken_for_evictions_by_the_next_agent() -> None:
    # The state is saved before the pass deletes pods, the doomed pods no longer live in it:
    # an agent killed midway through a restart leaves no deletion the next one would
    # blame on someone else (which would restart the job a second time).
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=5))
    cluster = CrashAfterOneDelete("c1", fabric(), clock=clock)
    _, old = await started(w, clock, cluster)
    cluster.fail_pod("train-worker-1")
    cluster.armed = True
    with pytest.raises(SystemExit):
        await old.sync(cluster, clock(), None)
    cluster.armed = False
    assert cluster.pod("train-worker-0") is None  # deleted, then the agent died

    new = new_agent(w)
    report = await new.sync(cluster, clock(), None)
    # The failed pod, not an "eviction" of train-worker-0. The restart was counted before
    # it was carried out, and is counted again now that it is: one retry too many, never
    # one too few (a leader that always dies there still runs out of retries).
    assert [a.kind for a in report.actions] == ["RestartJob"]
    assert report.events[0].message.startswith("RestartJob on PodFailed of pod train-worker-1")
    assert report.events[0].message.endswith("(retry 2/5)")


async def test_saving_the_state_never_replaces_the_service_and_a_recreated_service_keeps_it() -> None:
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION))
    cluster, ctl = await started(w, clock)
    before = saved(cluster)
    assert before is not None
    cluster.fail_pod("train-worker-0")
    cluster.calls.clear()
    await ctl.sync(cluster, clock(), None)
    after = saved(cluster)
    assert after is not None and after != before and '"retries":1' in after
    assert ("delete_service", "train") not in cluster.calls and ("create_service", "train") not in cluster.calls
    quiet = len(cluster.calls)
    await ctl.sync(cluster, clock(), None)  # nothing changed: nothing written
    assert cluster.calls[quiet:] == []

    await cluster.delete_service("default", "train")
    await ctl.sync(cluster, clock(), None)
    (service,) = cluster.services()
    assert service.annotations[ANNOTATION_CHECKPOINT] == after and ANNOTATION_SPEC_HASH in service.annotations


@pytest.mark.parametrize("hostile", [
    pytest.param("{", id="malformed"),
    pytest.param('{"v":9}', id="newer-format"),
    pytest.param(" " * 70_000, id="oversized"),
    pytest.param('{"v":1,"work":"w-train","version":1,"retries":0,"phase":"Running","reason":"",'
                 '"live":{"worker":[7]},"evicted":[]}', id="a-pod-the-job-lacks"),
])
async def test_a_bad_saved_state_is_logged_once_ignored_and_replaced(hostile: str,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION))
    cluster, _ = await started(w, clock)
    await cluster.annotate_service("default", "train", ANNOTATION_CHECKPOINT, hostile)
    new = new_agent(w)
    with caplog.at_level(logging.WARNING, logger="agents.core.controller"):
        report = await new.sync(cluster, clock(), None)
        await new.sync(cluster, clock(), None)
    assert report.phase == "Running" and report.actions == () and new.state.retries == 0
    warnings = [r.getMessage() for r in caplog.records if "ignored the runtime state" in r.getMessage()]
    assert len(warnings) == 1 and "starting fresh" in warnings[0]
    assert saved(cluster) not in (None, hostile)  # a good record replaced it
