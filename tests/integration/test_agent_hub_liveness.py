"""The hub's lost-agent watchdog must not lose a healthy cluster (SQLite and PostgreSQL).

Driven through ``AgentHub.Connect`` with an in-process stream, an injected monotonic
clock and a store whose calls can be held, so the races are reproduced exactly rather
than hoped for: a slow store call must not delay reading the heartbeats behind it, and a
heartbeat arriving while the watchdog marks another cluster lost must spare its cluster.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from conftest import ManualClock

from federation.control.loop import RoundScheduler
from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Node
from federation.domain.resources import Resources
from federation.service.agent_hub import AgentHub
from federation.service.auth import Authenticator
from federation.store import Store
from federation.v1 import agent_pb2
from federation.wire.convert import snapshot_to_proto, timestamp_to_proto

GRACE = 10.0


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Context:
    def invocation_metadata(self) -> tuple[()]:
        return ()


class Held:
    """Wraps a store call so the test decides when it may finish (it runs in a thread)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        assert self.release.wait(30), "held store call never released"
        return self.fn(*args, **kwargs)


class Agent:
    """One agent stream into the hub: ``send`` messages, read ``received``."""

    def __init__(self, hub: AgentHub, cluster: str) -> None:
        self.cluster = cluster
        self.inbound: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
        self.received: list[agent_pb2.CentralMessage] = []
        self.task = asyncio.create_task(self._run(hub))

    async def _messages(self) -> AsyncIterator[agent_pb2.AgentMessage]:
        while (msg := await self.inbound.get()) is not None:
            yield msg

    async def _run(self, hub: AgentHub) -> None:
        async for out in hub.Connect(self._messages(), Context()):
            self.received.append(out)

    def send(self, **body: Any) -> None:
        self.inbound.put_nowait(agent_pb2.AgentMessage(**body))

    def heartbeat(self) -> None:
        self.send(heartbeat=agent_pb2.Heartbeat(time=timestamp_to_proto(0.0)))

    def acks(self, what: str) -> int:
        return sum(1 for m in self.received if m.WhichOneof("body") == "ack" and m.ack.what == what)

    async def close(self) -> None:
        self.inbound.put_nowait(None)
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(600):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def connect(hub: AgentHub, cluster: str) -> Agent:
    agent = Agent(hub, cluster)
    agent.send(hello=agent_pb2.Hello(cluster=cluster, agent_id=f"{cluster}-agent", epoch=1))
    await until(lambda: agent.acks("sync") == 1, f"{cluster} synced")
    return agent


def hub_over(store: Store, mono: Monotonic) -> AgentHub:
    return AgentHub(store, RoundScheduler(store), Authenticator.open_mode(), grace_seconds=GRACE, monotonic=mono)


def snapshot(cluster: str) -> agent_pb2.AgentMessage:
    node = Node(f"{cluster}-n0", Resources.of(gpu=8), Resources.of(gpu=8))
    return agent_pb2.AgentMessage(snapshot=snapshot_to_proto(ClusterSnapshot(cluster, (node,), taken_at=5.0)))


async def test_heartbeats_behind_a_slow_store_call_keep_the_cluster_alive(store: Store, clock: ManualClock) -> None:
    mono = Monotonic()
    hub = hub_over(store, mono)
    held = Held(store.clusters.record_snapshot)
    store.clusters.record_snapshot = held  # type: ignore[method-assign]  # a test double replaces the method
    east = await connect(hub, "east")
    try:
        east.send(snapshot=snapshot("east").snapshot)
        await asyncio.to_thread(held.entered.wait, 30)  # the stream's store work is stuck on the snapshot
        for _ in range(4):  # the agent keeps beating every 4 s while the store is slow
            mono.now += 4
            clock.advance(4)
            east.heartbeat()
            seen = mono.now
            await until(lambda: hub._last_seen["east"] == seen, "heartbeat heard")  # noqa: B023 - the lambda is awaited within the loop iteration that defines it
        assert await hub.sweep() == []  # 16 s since the snapshot, 0 s since the last heartbeat
        assert not store.clusters.get("east").lost
        held.release.set()
        await until(lambda: east.acks("snapshot") == 1, "snapshot stored once the store is back")
        assert store.clusters.get("east").summary is not None
        mono.now += GRACE + 1  # now truly silent
        clock.advance(GRACE + 1)
        assert await hub.sweep() == ["east"]
        assert store.clusters.get("east").lost
    finally:
        held.release.set()
        await east.close()
        await hub.stop()


async def test_a_heartbeat_arriving_while_another_cluster_is_marked_lost_spares_its_cluster(
        store: Store, clock: ManualClock) -> None:
    mono = Monotonic()
    hub = hub_over(store, mono)
    agents = [await connect(hub, "alpha"), await connect(hub, "beta")]
    held = Held(store.clusters.mark_unreachable)
    store.clusters.mark_unreachable = held  # type: ignore[method-assign]  # a test double replaces the method
    try:
        mono.now += GRACE + 1  # both silent past the grace period when the sweep starts
        clock.advance(GRACE + 1)
        sweep = asyncio.create_task(hub.sweep())
        await asyncio.to_thread(held.entered.wait, 30)  # marking alpha (first by name) is under way
        agents[1].heartbeat()  # beta's heartbeat arrives meanwhile
        await until(lambda: hub._last_seen.get("beta") == mono.now, "beta heard")
        held.release.set()
        assert await sweep == ["alpha"]
        assert store.clusters.get("alpha").lost and not store.clusters.get("beta").lost
        assert "beta" in hub.connected()
    finally:
        held.release.set()
        for agent in agents:
            await agent.close()
        await hub.stop()


async def test_a_wall_clock_step_neither_ages_nor_rejuvenates_a_cluster(store: Store, clock: ManualClock) -> None:
    """Liveness runs on the monotonic clock only: the wall clock the service passes as
    ``clock`` may jump (NTP) without any effect on the watchdog."""
    mono = Monotonic()
    wall = [1_000_000.0]
    hub = AgentHub(store, RoundScheduler(store), Authenticator.open_mode(), grace_seconds=GRACE,
                   clock=lambda: wall[0], monotonic=mono)
    east = await connect(hub, "east")
    try:
        wall[0] += 3600  # the wall clock steps an hour ahead
        assert await hub.sweep() == []
        mono.now += GRACE + 1
        clock.advance(GRACE + 1)
        wall[0] -= 7200  # and back
        assert await hub.sweep() == ["east"]
    finally:
        await east.close()
        await hub.stop()
