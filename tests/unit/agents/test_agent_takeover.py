"""A new agent (a restarted process, or a new leader of the DaemonSet) takes over a job
the old one was running, with nothing but the cluster: it resumes the job's maxRetry
budget and sees the pods someone deleted while no agent ran, from the runtime state the
old one saved on the job's Service (agents/core/checkpoints.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest
from agentkit import LABEL_KEYS, fabric, fake, gpu, job, work
from test_agent_workload_manifests import controller_creates, serve

from agents.backend import AlreadyExists, BackendError
from agents.core.checkpoints import ANNOTATION_CHECKPOINT
from agents.core.controller import JobController
from agents.core.records import ANNOTATION_SPEC_HASH, ServiceManifest
from agents.core.recovery import JobRuntimeState
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


async def test_a_service_deleted_under_a_running_job_is_made_again_carrying_the_record_before_a_restart() -> None:
    # Someone deletes the job's Service; a pod then fails and the agent dies midway through
    # the restart, before reconcile would have made the Service again. The record of that
    # restart (and of the one before) must be on the cluster already.
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=5))
    cluster = CrashAfterOneDelete("c1", fabric(), clock=clock)
    _, old = await started(w, clock, cluster)
    cluster.fail_pod("train-worker-0")
    assert [a.kind for a in (await old.sync(cluster, clock(), None)).actions] == ["RestartJob"]  # retry 1
    await old.sync(cluster, clock(), None)
    clock.advance(10)
    await cluster.delete_service("default", "train")
    cluster.fail_pod("train-worker-1")
    cluster.armed = True
    with pytest.raises(SystemExit):
        await old.sync(cluster, clock(), None)
    cluster.armed = False
    assert '"retries":2' in (saved(cluster) or "")

    report = await new_agent(w).sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartJob"]
    assert report.events[0].message.startswith("RestartJob on PodFailed of pod train-worker-1")
    assert report.events[0].message.endswith("(retry 3/5)")


class RefusesToAnnotate(FakeCluster):
    """The apiserver refuses every write of the record while ``refusing`` (a webhook, an
    RBAC slip)."""

    refusing = True

    async def annotate_service(self, namespace: str, name: str, key: str, value: str) -> None:
        if not self.refusing:
            return await super().annotate_service(namespace, name, key, value)
        self.calls.append(("annotate_service", name))
        raise BackendError("admission webhook denied the request")


async def test_a_restart_waits_for_its_record_so_flapping_agents_never_restart_a_job_for_ever() -> None:
    # Every leader lives for one pass. Were a restart carried out without its record, each
    # new leader would find retries 0 and restart the crashing job again, for ever.
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=2))
    cluster = RefusesToAnnotate("c1", fabric(), clock=clock)
    first = new_agent(w)
    await first.sync(cluster, clock(), None)
    await first.sync(cluster, clock(), None)
    clock.advance(10)
    cluster.fail_pod("train-worker-0")
    for _ in range(4):
        report = await new_agent(w).sync(cluster, clock(), None)
        assert report.actions == ()
        assert "save runtime state on service default/train: admission webhook denied" in report.error
        assert report.wake_at is not None and report.wake_at > clock()  # tried again after a back-off
        clock.advance(10)
    assert cluster.pod("train-worker-0") is not None and cluster.pod("train-worker-1") is not None
    assert not any(call[0] == "delete_pod" for call in cluster.calls)
    cluster.refusing = False  # once the record can be written, the restart is carried out, counted once
    report = await new_agent(w).sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartJob"] and report.error == ""
    assert report.events[0].message.endswith("(retry 1/2)") and '"retries":1' in (saved(cluster) or "")


async def test_a_gang_is_not_unbound_before_the_record_says_the_agent_did_it() -> None:
    # Unbinding a gang that cannot be completed deletes live pods; unsaved, a new leader
    # would take those deletions for evictions (under PodEvicted -> RestartJob, a retry).
    clock = ManualClock()
    w = work(job())
    cluster = RefusesToAnnotate("c1", fabric(), clock=clock)
    cluster.refusing = False
    await started(w, clock, cluster)
    await cluster.delete_pod("default", "train-worker-1")  # someone deletes it and takes its room
    cluster.occupy("theirs", "n01", gpu(8))
    cluster.refusing = True
    ctl = new_agent(w)
    report = await ctl.sync(cluster, clock(), None)
    assert report.phase == "Replan" and "save runtime state" in report.error
    kept = cluster.pod("train-worker-0")
    assert kept is not None and kept.node == "n00"
    cluster.refusing = False
    report = await ctl.sync(cluster, clock(), None)
    assert report.phase == "Replan" and report.error == ""
    assert cluster.pod("train-worker-0") is None


class LaggingServiceCache(FakeCluster):
    """A new agent whose cache has not seen the job's Service yet (``hide``), against the
    Kubernetes adapter's create, which takes an identical Service that exists for made
    (a 409 with the same spec hash, agents/k8s/backend.py)."""

    hide = False

    async def list_services(self, selector: Mapping[str, str]) -> list[ServiceManifest]:
        if self.hide:
            self.hide = False
            return []
        return await super().list_services(selector)

    async def create_service(self, manifest: ServiceManifest) -> None:
        try:
            await super().create_service(manifest)
        except AlreadyExists:
            (have,) = [s for s in self.services() if s.name == manifest.name]
            if have.annotations[ANNOTATION_SPEC_HASH] != manifest.annotations[ANNOTATION_SPEC_HASH]:
                raise


async def test_a_new_agent_that_finds_no_service_resumes_from_the_one_its_create_meets() -> None:
    clock = ManualClock()
    w = work(job(policies=RESTART_ON_FAILURE_OR_EVICTION, max_retry=3))
    cluster = LaggingServiceCache("c1", fabric(), clock=clock)
    _, old = await started(w, clock, cluster)
    cluster.fail_pod("train-worker-0")
    assert [a.kind for a in (await old.sync(cluster, clock(), None)).actions] == ["RestartJob"]
    clock.advance(10)
    cluster.hide = True
    new = new_agent(w)
    await new.sync(cluster, clock(), None)
    assert new.state.retries == 1 and '"retries":1' in (saved(cluster) or "")


class CrashAfterOneBind(FakeCluster):
    """The agent process dies right after its first bind of a pass."""

    armed = False

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        await super().bind_pod(namespace, name, node)
        if self.armed:
            raise SystemExit("agent killed")


async def test_a_workload_job_leaves_a_new_agent_nothing_to_take_up_but_the_cluster() -> None:
    # A Deployment's controller restarts and replaces its pods; the agent only binds them,
    # so it holds no retries, verdict or live set (docs/design/agent.md): the old agent's
    # state is the initial one, nothing is saved, and a new one binds from the pods alone.
    clock = ManualClock()
    cluster = CrashAfterOneBind("c1", fabric(), clock=clock)
    w = work(serve(), hypernode="t1-l0")
    old = new_agent(w)
    await old.sync(cluster, clock(), None)
    await controller_creates(cluster, w, "a", "b", "c")
    cluster.armed = True
    with pytest.raises(SystemExit):
        await old.sync(cluster, clock(), None)
    cluster.armed = False
    [bound] = [p.name for p in cluster.pods() if p.node is not None]
    assert old.state == JobRuntimeState() and cluster.services() == []
    await cluster.delete_pod("default", bound)  # while no agent runs; the ReplicaSet replaces it
    await controller_creates(cluster, w, "d")
    cluster.calls.clear()

    new = new_agent(w)
    report = await new.sync(cluster, clock(), None)
    assert report.phase == "Bound" and report.actions == ()
    assert len(cluster.pods()) == 3 and all(p.node in ("n00", "n01") for p in cluster.pods())
    assert {call[0] for call in cluster.calls} == {"bind_pod"} and new.state == JobRuntimeState()
    assert (await new.sync(cluster, clock(), None)).phase == "Running"

