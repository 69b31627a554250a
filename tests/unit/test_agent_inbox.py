"""The per-stream inbox between the hub's reader and its store worker: arrival order is
kept, heartbeats and snapshots coalesce to the newest, a newer status of the same Work
replaces the waiting one at the tail with both reports' restart events, and it is bounded."""

from __future__ import annotations

import asyncio

from federation.service.agent_inbox import Entry, Inbox
from federation.v1 import agent_pb2


def heartbeat() -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat())


def snapshot(cluster: str) -> agent_pb2.AgentMessage:
    msg = agent_pb2.AgentMessage()
    msg.snapshot.cluster = cluster
    return msg


def status(work: str, phase: int, *actions: str) -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(status=agent_pb2.WorkStatus(
        work_id=work, version=1, phase=phase,  # type: ignore[arg-type]  # raw enum numbers, out-of-range ones included, on purpose
        events=[agent_pb2.WorkEvent(action=a) for a in actions]))


async def drain(inbox: Inbox) -> list[Entry]:
    inbox.finish()
    out = []
    while (entry := await inbox.get()) is not None:
        out.append(entry)
    return out


def label(entry: Entry) -> str:
    msg = entry.message
    kind = msg.WhichOneof("body")
    if kind == "snapshot":
        return f"snapshot:{msg.snapshot.cluster}"
    if kind == "status":
        actions = ",".join(e.action for e in msg.status.events)
        return f"status:{msg.status.work_id}:{msg.status.phase}:{actions}x{entry.count}"
    return str(kind)


async def test_order_is_kept_and_newer_messages_replace_waiting_ones_at_the_tail() -> None:
    inbox = Inbox()
    for msg in (status("1", agent_pb2.WORK_PHASE_PENDING, "RestartPod"), snapshot("before-binding"), heartbeat(),
                status("2", agent_pb2.WORK_PHASE_RUNNING), status("1", agent_pb2.WORK_PHASE_BOUND, "RestartTask"),
                heartbeat(), snapshot("after-binding")):
        assert inbox.offer(msg)
    # Work 1's bound report comes after the snapshot taken before binding (never earlier
    # than a message received before it), and carries both reports' restart events.
    assert [label(e) for e in await drain(inbox)] == [
        "status:2:3:x1", "status:1:2:RestartPod,RestartTaskx2", "heartbeat", "snapshot:after-binding"]


async def test_the_inbox_is_bounded_and_the_reader_waits_for_room() -> None:
    inbox = Inbox(limit=2)
    assert inbox.offer(status("1", 1)) and inbox.offer(status("2", 1))
    assert inbox.offer(status("1", 3))  # coalesces: no new room needed
    assert not inbox.offer(status("3", 1))
    waiting = asyncio.create_task(inbox.room())
    await asyncio.sleep(0)
    assert not waiting.done()
    first = await inbox.get()
    assert first is not None and first.message.status.work_id == "2"
    await asyncio.wait_for(waiting, 1)
    assert inbox.offer(status("3", 1))


async def test_get_waits_for_a_message_and_ends_once_finished_and_drained() -> None:
    inbox = Inbox()
    pending = asyncio.create_task(inbox.get())
    await asyncio.sleep(0)
    assert not pending.done()
    inbox.offer(heartbeat())
    entry = await asyncio.wait_for(pending, 1)
    assert entry is not None and entry.message.WhichOneof("body") == "heartbeat"
    inbox.offer(heartbeat())
    inbox.finish()
    assert await inbox.get() is not None and await inbox.get() is None
