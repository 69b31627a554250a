"""The job's PriorityClass in the member cluster (agents/core/priority.py): ensured there
(created when absent, the cluster's own used when it differs, a Warning when it cannot
be), carried by the pods as ``priorityClassName`` + ``priority``, and reported once."""

from __future__ import annotations

from dataclasses import replace

import pytest
from agentkit import fabric, fake, job, work

from agents.backend import BackendError
from agents.core.controller import JobController
from agents.core.priority import (
    NONE,
    RETRY_MAX_SECONDS,
    ClusterPriority,
    decide,
    ensure_priority_class,
    for_cluster,
    retry_delay,
)
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from agents.k8s.convert import pod_body
from federation.domain.jobs import Job


@pytest.mark.parametrize(("existing", "carried", "create", "warned"), [
    pytest.param(None, 10_000, True, False, id="absent: created with the federation's value"),
    pytest.param(10_000, 10_000, False, False, id="same value: used"),
    pytest.param(50, 50, False, True, id="another value: the cluster's is used, and said"),
])
def test_what_the_pods_carry(existing: int | None, carried: int, create: bool, warned: bool) -> None:
    result, must_create = decide("high", 10_000, existing, "east")
    assert (result.name, result.value, must_create, bool(result.warning)) == ("high", carried, create, warned)
    if warned:
        assert "has value 50, the federation's is 10000" in result.warning


def test_a_job_without_a_class_leaves_the_pods_to_the_cluster() -> None:
    assert decide("", 5, None, "east") == (NONE, False)


def _high(name: str = "train") -> Job:
    return replace(job(name), priority_class="high", priority=10_000)


async def test_the_class_is_created_once_and_the_pods_carry_it() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=100.0)
    ctl = JobController(work(_high()))
    report = await ctl.sync(cluster, clock(), None)
    assert cluster.priority_classes == {"high": 10_000} and report.actions == ()
    manifest = cluster.manifest("train-worker-0")
    assert manifest is not None and (manifest.priority_class_name, manifest.priority) == ("high", 10_000)
    body = pod_body(manifest)
    assert (body["spec"]["priorityClassName"], body["spec"]["priority"]) == ("high", 10_000)
    await ctl.sync(cluster, clock(), None)
    assert [c for c in cluster.calls if c[0] == "create_priority_class"] == [("create_priority_class", "high")]


async def test_a_class_the_cluster_defines_otherwise_is_used_as_it_is_and_reported_once() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=100.0)
    cluster.priority_classes["high"] = 7
    ctl = JobController(work(_high()))
    first = await ctl.sync(cluster, clock(), None)
    [note] = first.actions
    assert note.kind == "Warning" and "has value 7" in note.cause
    manifest = cluster.manifest("train-worker-1")
    assert manifest is not None and (manifest.priority_class_name, manifest.priority) == ("high", 7)
    assert (await ctl.sync(cluster, clock(), None)).actions == ()  # said once


class Refusing(FakeCluster):
    async def create_priority_class(self, name: str, value: int, description: str) -> None:
        raise BackendError("HTTP 403 Forbidden: priorityclasses is forbidden")


async def test_a_class_that_cannot_be_created_leaves_the_pods_without_one_and_says_why() -> None:
    clock = ManualClock()
    cluster = Refusing("c1", fabric(), clock=clock, runtime=lambda _m: 100.0)
    priority = await ensure_priority_class(cluster, _high())
    assert priority.name == "" and "could not be ensured in cluster c1 (HTTP 403" in priority.warning
    ctl = JobController(work(_high()))
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["Warning"]
    manifest = cluster.manifest("train-worker-0")
    assert manifest is not None and manifest.priority_class_name == "" and "priorityClassName" not in \
        pod_body(manifest)["spec"]


class Flaky(FakeCluster):
    """Refuses the first ``failures`` creations (an apiserver timing out), then creates."""

    failures = 2
    attempts = 0

    async def create_priority_class(self, name: str, value: int, description: str) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise BackendError("HTTP 503 Service Unavailable")
        await super().create_priority_class(name, value, description)


async def test_a_failed_class_is_tried_again_after_a_bounded_back_off_and_then_carried() -> None:
    clock = ManualClock()
    cluster = Flaky("c1", fabric(), clock=clock, runtime=lambda _m: 100.0)
    ctl = JobController(work(_high()))
    first = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in first.actions] == ["Warning"] and "HTTP 503" in first.actions[0].cause
    assert (cluster.attempts, first.wake_at) == (1, 1.0)  # the runtime wakes the job for the retry
    clock.advance(0.5)
    early = await ctl.sync(cluster, clock(), None)
    assert (cluster.attempts, early.actions, early.wake_at) == (1, (), 1.0)  # not before its back-off
    clock.advance(0.5)
    second = await ctl.sync(cluster, clock(), None)
    assert (cluster.attempts, second.actions, second.wake_at) == (2, (), 3.0)  # failed again: said once, 2 s
    clock.advance(2.0)
    third = await ctl.sync(cluster, clock(), None)
    assert cluster.attempts == 3 and cluster.priority_classes == {"high": 10_000}
    assert (third.actions, third.wake_at) == ((), None)
    assert ctl.priority == ClusterPriority("high", 10_000)
    gone = cluster.manifest("train-worker-0")
    assert gone is not None and gone.priority_class_name == ""  # created while the class was missing
    await cluster.delete_pod(gone.namespace, "train-worker-0")  # a pod created from now on carries the class
    await ctl.sync(cluster, clock(), None)
    manifest = cluster.manifest("train-worker-0")
    assert manifest is not None and (manifest.priority_class_name, manifest.priority) == ("high", 10_000)
    await ctl.sync(cluster, clock(), None)
    assert cluster.attempts == 3  # ensured: never asked again


@pytest.mark.parametrize(("failures", "delay"), [
    (1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, RETRY_MAX_SECONDS), (10_000, RETRY_MAX_SECONDS),
])
def test_the_retry_back_off_doubles_and_is_bounded(failures: int, delay: float) -> None:
    assert retry_delay(failures) == delay


def test_for_cluster_leaves_a_workload_and_an_unchanged_job_alone() -> None:
    w = work(_high())
    assert for_cluster(w, ClusterPriority("high", 10_000)) is w
    assert for_cluster(w, ClusterPriority("high", 7)).job.priority == 7
    assert for_cluster(w, NONE).job.priority_class == ""


def _per_task(name: str = "train") -> Job:
    """Volcano's per-task classes: the job is ordered by ``high``, the ps task's pods by its own."""
    base = _high(name)
    ps = replace(base.tasks[0], name="ps", replicas=1,
                 template_json='{"spec":{"priorityClassName":"task-priority"}}')
    return replace(base, tasks=(ps, base.tasks[0]))


async def test_a_tasks_own_class_the_cluster_has_is_kept_on_its_pods() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=100.0)
    cluster.priority_classes["task-priority"] = 50
    report = await JobController(work(_per_task())).sync(cluster, clock(), None)
    assert report.actions == () and cluster.priority_classes == {"task-priority": 50, "high": 10_000}
    ps, worker = cluster.manifest("train-ps-0"), cluster.manifest("train-worker-0")
    assert ps is not None and worker is not None
    spec = pod_body(ps)["spec"]
    assert spec["priorityClassName"] == "task-priority" and "priority" not in spec  # admission sets 50
    assert (pod_body(worker)["spec"]["priorityClassName"], pod_body(worker)["spec"]["priority"]) == ("high", 10_000)


async def test_a_tasks_own_class_the_cluster_lacks_gives_way_to_the_jobs_and_is_reported() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=100.0)
    ctl = JobController(work(_per_task()))
    [note] = (await ctl.sync(cluster, clock(), None)).actions
    assert note.kind == "Warning" and "PriorityClass task-priority named by a task's pod template does not exist " \
        "in cluster c1" in note.cause
    assert "task-priority" not in cluster.priority_classes  # the federation knows no value for it: not created
    ps = cluster.manifest("train-ps-0")
    assert ps is not None
    assert (pod_body(ps)["spec"]["priorityClassName"], pod_body(ps)["spec"]["priority"]) == ("high", 10_000)
    assert (await ctl.sync(cluster, clock(), None)).actions == ()  # said once
