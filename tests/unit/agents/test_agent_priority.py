"""The job's PriorityClass in the member cluster (agents/core/priority.py): ensured there
(created when absent, the cluster's own used when it differs, a Warning when it cannot
be), carried by the pods as ``priorityClassName`` + ``priority``, and reported once."""

from __future__ import annotations

from dataclasses import replace

import pytest
from agentkit import fabric, fake, job, work

from agents.backend import BackendError
from agents.core.controller import JobController
from agents.core.priority import NONE, ClusterPriority, decide, ensure_priority_class, for_cluster
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from agents.k8s.convert import pod_body


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


def _high(name: str = "train") -> object:
    return replace(job(name), priority_class="high", priority=10_000)


async def test_the_class_is_created_once_and_the_pods_carry_it() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=100.0)
    ctl = JobController(work(_high()))  # type: ignore[arg-type]
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
    ctl = JobController(work(_high()))  # type: ignore[arg-type]
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
    priority = await ensure_priority_class(cluster, _high())  # type: ignore[arg-type]
    assert priority.name == "" and "could not be ensured in cluster c1 (HTTP 403" in priority.warning
    ctl = JobController(work(_high()))  # type: ignore[arg-type]
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["Warning"]
    manifest = cluster.manifest("train-worker-0")
    assert manifest is not None and manifest.priority_class_name == "" and "priorityClassName" not in \
        pod_body(manifest)["spec"]


def test_for_cluster_leaves_a_workload_and_an_unchanged_job_alone() -> None:
    w = work(_high())  # type: ignore[arg-type]
    assert for_cluster(w, ClusterPriority("high", 10_000)) is w
    assert for_cluster(w, ClusterPriority("high", 7)).job.priority == 7
    assert for_cluster(w, NONE).job.priority_class == ""
