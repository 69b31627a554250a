"""A status report must describe the Work it names: its job, version and a generation the
Work has reached (over real gRPC, SQLite and PostgreSQL; docs/design/work-protocol.md).

The reviewer's reproduction: a report naming east's Work of job ``mine`` but job
``theirs``, version 99 or generation 7 was acknowledged and applied to ``mine`` (job moved
to running, a future generation settled a growth the agent never bound): the fields were
accepted and ignored. Each is now ``status-rejected`` naming the field, and changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from servicekit import ADMIN, client, running, secured, spec
from test_agent_stream_bounds import _east, _report, _work

from federation.domain.plans import PodAssignment
from federation.store import Store
from federation.v1 import agent_pb2, jobs_pb2


@pytest.mark.parametrize(("change", "path"), [
    pytest.param({"job": "theirs"}, "status.job", id="another job"),
    pytest.param({"version": 99}, "status.version", id="a version the Work is not"),
    pytest.param({"version": 0}, "status.version", id="version 0"),
    pytest.param({"generation": 7}, "status.generation", id="a generation the Work has not reached"),
    pytest.param({"generation": -1}, "status.generation", id="negative generation"),
])
async def test_a_report_that_does_not_describe_its_work_is_rejected_and_changes_nothing(
        store: Store, change: dict[str, Any], path: str) -> None:
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "mine")
        report = _report(work)
        for name, value in change.items():
            setattr(report, name, value)
        await east.send(status=report)
        answer = (await east.next("status", "status-rejected")).ack
        assert (answer.what, answer.rejection.field_path) == ("status-rejected", path), answer
        async with client(srv, ADMIN) as admin:
            assert (await admin.get_job("mine")).state != jobs_pb2.JOB_STATE_RUNNING
        await east.send(status=_report(work))  # the same report, true to its Work, is applied
        assert (await east.next("status", "status-rejected")).ack.what == "status"
        async with client(srv, ADMIN) as admin:
            assert (await admin.get_job("mine")).state == jobs_pb2.JOB_STATE_RUNNING


@pytest.mark.parametrize(("pod", "path"), [
    pytest.param(agent_pb2.PodStatus(task="ghost", index=0, node="n0", phase="Running"), "status.pods[0].task",
                 id="a task the job lacks"),
    pytest.param(agent_pb2.PodStatus(task="worker", index=4, node="n0", phase="Running"), "status.pods[0].index",
                 id="an index past twice the replicas"),
    pytest.param(agent_pb2.PodStatus(task="worker", index=-1, node="n0", phase="Running"), "status.pods[0].index",
                 id="a negative index"),
])
async def test_a_pod_the_job_does_not_have_is_rejected_and_planning_goes_on(
        store: Store, pod: agent_pb2.PodStatus, path: str) -> None:
    """Recorded as the Work's placement, a pod of task ``ghost`` made every planning round of
    the federation fail (KeyError in the growth of the elastic job) for as long as it ran."""
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "elastic", replicas=2, min_available=1)
        planned = store.works.get(int(work.work_id)).payload["pods"]
        await east.send(status=_report(work, pods=[pod]))
        answer = (await east.next("status", "status-rejected")).ack
        assert (answer.what, answer.rejection.field_path) == ("status-rejected", path), answer
        assert store.works.get(int(work.work_id)).payload["pods"] == planned
        async with client(srv, ADMIN) as admin:
            other = spec("after", replicas=1, gpus="1")
            other.propagation.cluster_affinity.cluster_names.append("east")
            await admin.submit_job(other)
        assert (await east.next("work")).work.job == "after"  # the next round still plans


async def test_a_pod_of_a_task_the_job_lacks_recorded_by_an_earlier_release_does_not_stop_planning(
        store: Store) -> None:
    """A Work recorded before central checked reported pods may still hold such a pod: the
    round leaves it out (``control/snapshot.py``) instead of failing for every tenant."""
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "elastic", replicas=2, min_available=1)
        await east.send(status=_report(work, pods=[
            agent_pb2.PodStatus(task="worker", index=0, node="n0", phase="Running")]))
        assert (await east.next("status", "status-rejected")).ack.what == "status"
        # as an earlier release recorded it: one pod, of no task; the job may grow (2 replicas)
        store.works.record_pods(int(work.work_id), [PodAssignment("ghost", 0, "n0")])
        async with client(srv, ADMIN) as admin:
            other = spec("after", replicas=1, gpus="1")
            other.propagation.cluster_affinity.cluster_names.append("east")
            await admin.submit_job(other)
        assert (await east.next("work")).work.job == "after"
