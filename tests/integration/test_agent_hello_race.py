"""Two leaders of one cluster saying hello at once: the newer epoch keeps the stream,
whatever order their registrations come back in (over real gRPC, SQLite and PostgreSQL;
docs/design/work-protocol.md).

The reviewer's reproduction: the old leader's registration (epoch 10) committed first
and the newer leader's (epoch 11) second, but the old one's call returned last (its
thread was slower to hand back). The hub then took the stream of epoch 10 as the newest,
closed the newer leader's stream without a ``Fence`` and sent the old leader the cluster's
Works: a deposed leader synced and acting, until the newer one reconnected.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import grpc.aio
import pytest
from servicekit import EAST, running, secured
from test_agent_stream_bounds import _east, _report, _restarts, _work

from federation.store import Store
from federation.v1 import agent_pb2, agent_pb2_grpc


async def _hello(port: int, epoch: int, replies: list[str]) -> None:
    """Say hello as east with ``epoch``; record what comes back until the stream ends."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
            metadata=(("authorization", f"Bearer {EAST}"),))
        await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="east", agent_id=f"a{epoch}",
                                                                      epoch=epoch)))
        try:
            async for reply in call:
                replies.append(reply.ack.what if reply.HasField("ack") else str(reply.WhichOneof("body")))
        except grpc.aio.AioRpcError:
            replies.append("error")
        replies.append("end")


async def test_a_registration_that_returns_late_does_not_supersede_a_newer_leader(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    register = store.clusters.register
    committed, release = threading.Event(), threading.Event()

    def slow_to_return(name: str, epoch: int, **kwargs: Any) -> Any:
        registration = register(name, epoch, **kwargs)
        if epoch == 10:  # committed; the caller hears of it only after epoch 11 has connected
            committed.set()
            release.wait(30)
        return registration

    monkeypatch.setattr(store.clusters, "register", slow_to_return)
    async with running(store, secured(), control_loop=True) as srv:
        old: list[str] = []
        new: list[str] = []
        first = asyncio.create_task(_hello(srv.port, 10, old))
        assert await asyncio.to_thread(committed.wait, 30)
        second = asyncio.create_task(_hello(srv.port, 11, new))
        await _until(lambda: new == ["hello", "sync"])
        release.set()
        await _until(lambda: "end" in old or "sync" in old)
        await asyncio.sleep(0.5)
        assert old == ["fence", "end"], (old, new)
        assert new == ["hello", "sync"], new  # still open
        assert srv.hub is not None and srv.hub.connected() == {"east": 11}
        for task in (first, second):
            task.cancel()
        await asyncio.gather(first, second, return_exceptions=True)


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(600):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


async def test_a_deposed_leaders_restart_events_are_refused_and_it_is_fenced(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newer leader's hello commits while the old leader's report is being handled:
    the report's restarts were counted and stored (only its job and work writes checked
    the epoch), so a deposed leader still wrote the job's history."""
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "j")
        await east.send(status=_report(work))
        await east.next("status")
        read = store.jobs.get

        def newer_leader_meanwhile(name: str) -> Any:
            record = read(name)
            if name == "j" and store.clusters.get("east").epoch == 1:
                store.clusters.register("east", 2)  # what the newer leader's hello does
            return record

        monkeypatch.setattr(store.jobs, "get", newer_leader_meanwhile)
        await east.send(status=_report(work, events=_restarts(3)))
        assert (await east.next("fence")).fence.current_epoch == 2
    assert store.jobs.get("j").restarts == 0
    assert not [e for e in store.jobs.events_since(0, job="j").events if e.type == "Restarted"]
