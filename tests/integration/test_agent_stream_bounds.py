"""Bounds on what an agent sends on ``AgentService.Connect`` (docs/design/limits.md), over
real gRPC and a real store (SQLite and PostgreSQL).

The reviewer's reproductions: a hello with a 5 MB agent id (stored, logged on every line,
ListClusters too big for a tenant), a 5 MB taint key, a snapshot taken in year 31,690,708
(dropped with a traceback, never answered), an 8 MB status message and 5,000 restart
events in one report (stored in the tenant's job; 5,000 transactions), and refusals of a
status report that were only logged. Each is now refused naming the field, and a refused
snapshot or status is answered on the open stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
import pytest
from servicekit import ADMIN, EAST, client, counts, queue, running, secured, spec
from test_service_bad_input import GOOD_TREE, _session, _snapshot

from federation.service.server import RunningServer
from federation.store import NotFound, Store
from federation.v1 import agent_pb2, agent_pb2_grpc, types_pb2
from federation.wire.limits import STATUS_MAX_EVENTS

HELLO = agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="east", agent_id="agent-1", epoch=1))


def _taken_at(seconds: int) -> types_pb2.ClusterSnapshot:
    snap = _snapshot(*GOOD_TREE)
    snap.taken_at.seconds = seconds
    return snap


async def _answers(port: int, *snapshots: types_pb2.ClusterSnapshot) -> list[agent_pb2.Ack]:
    replies = await asyncio.wait_for(
        _session(port, HELLO, *(agent_pb2.AgentMessage(snapshot=s) for s in snapshots)), 30)
    return [r.ack for r in replies if r.ack.what.startswith("snapshot")]


async def test_a_snapshot_taken_at_an_impossible_time_is_rejected_not_dropped(store: Store) -> None:
    async with running(store, secured(), control_loop=True) as srv:
        acks = await _answers(srv.port, _taken_at(10**15), _taken_at(-1), _taken_at(1_700_000_000))
        assert [a.what for a in acks] == ["snapshot-rejected", "snapshot-rejected", "snapshot"], acks
        assert acks[0].rejection.field_path == "snapshot.takenAt" and "9999-12-31" in acks[0].rejection.rule
        assert acks[2].id.startswith("2023-11-14T")


def _tainted(where: str, taint: types_pb2.Taint) -> types_pb2.ClusterSnapshot:
    snap = _snapshot(*GOOD_TREE)
    (snap if where == "cluster" else snap.nodes[0]).taints.append(taint)
    return snap


@pytest.mark.parametrize(("where", "taint", "path"), [
    pytest.param("cluster", types_pb2.Taint(key="k" * 5_000_000, effect="NoSchedule"), "snapshot.taints[0].key",
                 id="5 MB cluster taint key"),
    pytest.param("cluster", types_pb2.Taint(key="gpu", value="v" * 64), "snapshot.taints[0].value",
                 id="cluster taint value over 63"),
    pytest.param("node", types_pb2.Taint(key="a b", effect="NoSchedule"), "snapshot.nodes[0].taints[0].key",
                 id="node taint key not a qualified name"),
    pytest.param("node", types_pb2.Taint(key="gpu", effect="NoWay"), "snapshot.nodes[0].taints[0].effect",
                 id="unknown effect"),
    pytest.param("node", types_pb2.Taint(key="gpu", effect="NoExecute", time_added=float("nan")),
                 "snapshot.nodes[0].taints[0].timeAdded", id="timeAdded NaN"),
])
async def test_a_hostile_taint_is_rejected_and_the_last_good_snapshot_stays(
        store: Store, where: str, taint: types_pb2.Taint, path: str) -> None:
    good = _tainted("cluster", types_pb2.Taint(key="example.com/maintenance", value="true", effect="NoSchedule"))
    async with running(store, secured(), control_loop=True) as srv:
        acks = await _answers(srv.port, good, _tainted(where, taint))
        assert [a.what for a in acks] == ["snapshot", "snapshot-rejected"], acks
        assert acks[1].rejection.field_path == path, acks[1]
        async with client(srv, ADMIN) as admin:
            (east,) = await admin.list_clusters()
        assert east.ByteSize() < 10_000 and east.last_snapshot.tree_error.startswith(f"{path}:")


async def _hello_refused(port: int, hello: agent_pb2.Hello) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await asyncio.wait_for(_session(port, agent_pb2.AgentMessage(hello=hello)), 20)
    return err.value


@pytest.mark.parametrize(("hello", "path"), [
    pytest.param(agent_pb2.Hello(cluster="east", agent_id="A" * 5_000_000, epoch=1), "hello.agentId",
                 id="5 MB agent id"),
    pytest.param(agent_pb2.Hello(cluster="east", agent_id="a\nforged log line", epoch=1), "hello.agentId",
                 id="agent id with a newline"),
    pytest.param(agent_pb2.Hello(cluster="East_1", agent_id="a", epoch=1), "hello.cluster", id="cluster East_1"),
    pytest.param(agent_pb2.Hello(cluster="", agent_id="a", epoch=1), "hello.cluster", id="no cluster"),
])
async def test_a_hostile_hello_is_refused_before_the_cluster_is_registered(
        store: Store, hello: agent_pb2.Hello, path: str) -> None:
    async with running(store, secured(), control_loop=True) as srv:
        err = await _hello_refused(srv.port, hello)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.details() or "").startswith(f"{path}:"), err.details()
        assert len(err.details() or "") < 1_000
        with pytest.raises(NotFound):
            store.clusters.get("east")


# ---------------------------------------------------------------------- status reports


class Stream:
    """The east agent's stream: ``send`` messages, ``answer`` waits for an ack of some kinds."""

    def __init__(self, call: Any) -> None:
        self.call = call

    async def send(self, **body: Any) -> None:
        await self.call.write(agent_pb2.AgentMessage(**body))

    async def next(self, *kinds: str) -> agent_pb2.CentralMessage:
        while True:
            reply = await asyncio.wait_for(self.call.read(), 60)
            assert isinstance(reply, agent_pb2.CentralMessage), "the stream ended"
            if reply.WhichOneof("body") in kinds or reply.ack.what in kinds:
                return reply


@asynccontextmanager
async def _east(srv: RunningServer) -> AsyncIterator[Stream]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
            metadata=(("authorization", f"Bearer {EAST}"),))
        stream = Stream(call)
        await stream.send(hello=HELLO.hello)
        await stream.next("sync")
        try:
            yield stream
        finally:
            call.cancel()


async def _work(srv: RunningServer, stream: Stream, job: str, *, replicas: int = 1,
                min_available: int | None = None) -> agent_pb2.Work:
    """Submit a job (one pod unless told) pinned to east and wait for its Work on the stream."""
    snap = _snapshot(*GOOD_TREE)
    for node in snap.nodes:  # room for servicekit's pod (4 cpu, 16Gi, one GPU)
        node.allocatable["memory"] = node.free["memory"] = "512Gi"
    await stream.send(snapshot=snap)
    await stream.next("snapshot")
    async with client(srv, ADMIN) as admin:
        await admin.create_queue(queue("research"))
        msg = spec(job, replicas=replicas, gpus="1")
        if min_available is not None:
            msg.min_available = min_available
        msg.propagation.cluster_affinity.cluster_names.append("east")
        await admin.submit_job(msg)
    return (await stream.next("work")).work


def _report(work: agent_pb2.Work, **fields: Any) -> agent_pb2.WorkStatus:
    return agent_pb2.WorkStatus(work_id=work.work_id, job=work.job, version=work.version,
                                phase=agent_pb2.WORK_PHASE_RUNNING, **fields)


def _restarts(n: int, reason: str = "PodFailed") -> list[agent_pb2.WorkEvent]:
    return [agent_pb2.WorkEvent(action="RestartPod", reason=reason, task="worker", index=0) for _ in range(n)]


async def test_unbounded_status_reports_are_rejected_on_the_stream_and_change_nothing(store: Store) -> None:
    """An 8 MB message, an 8 MB event reason and 5,000 events (one per transaction) each get
    ``status-rejected`` naming the field and the limit, with the report's ``work_id@version``;
    the job keeps its message and restart count. A report within bounds is then acked."""
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "bounded")
        before = counts(store)
        hostile = [
            (_report(work, message="x" * 8_000_000), "status.message"),
            (_report(work, events=_restarts(1, "y" * 8_000_000)), "status.events[0].reason"),
            (_report(work, events=_restarts(5_000)), "status.events"),
        ]
        for report, path in hostile:
            await east.send(status=report)
            answer = (await east.next("status", "status-rejected")).ack
            assert answer.what == "status-rejected", answer
            assert answer.id == f"{work.work_id}@{work.version}"
            assert answer.rejection.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
            assert answer.rejection.field_path == path and "limit" in answer.rejection.rule, answer.rejection
        assert counts(store) == before
        await east.send(status=_report(work, events=_restarts(STATUS_MAX_EVENTS)))
        assert (await east.next("status", "status-rejected")).ack.what == "status"
        async with client(srv, ADMIN) as admin:
            job = await admin.get_job("bounded")
        assert job.restarts == STATUS_MAX_EVENTS and job.ByteSize() < 1_000_000


async def test_a_report_on_a_malformed_or_foreign_work_is_answered_status_rejected(store: Store) -> None:
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "mine")
        await east.send(status=agent_pb2.WorkStatus(work_id="not-a-number", job="mine", version=1))
        answer = (await east.next("status", "status-rejected")).ack
        assert (answer.what, answer.id, answer.rejection.field_path) == (
            "status-rejected", "not-a-number@1", "status.work_id")
        store.works.get(int(work.work_id))  # still there, still east's
        await east.send(status=_report(work))
        assert (await east.next("status", "status-rejected")).ack.what == "status"


@pytest.mark.parametrize("work_id", [
    pytest.param("9" * 30, id="beyond int64 (SQLite OverflowError: never answered)"),
    pytest.param("9223372036854775808", id="2**63"),
    pytest.param("-5", id="negative"),
    pytest.param("\u0665", id="an Arabic-Indic digit int() accepts"),
    pytest.param(" 5", id="padded"),
    pytest.param("1_0", id="underscore int() accepts"),
])
async def test_a_work_id_that_is_no_stored_id_is_rejected_not_looked_up(store: Store, work_id: str) -> None:
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "ids")
        await east.send(status=agent_pb2.WorkStatus(work_id=work_id, job="ids", version=1))
        answer = (await east.next("status", "status-rejected")).ack
        assert (answer.what, answer.rejection.field_path) == ("status-rejected", "status.work_id"), answer
        assert answer.id == f"{work_id}@1"
        await east.send(status=_report(work))
        assert (await east.next("status", "status-rejected")).ack.what == "status"
