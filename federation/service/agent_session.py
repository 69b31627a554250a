"""One agent stream's state on the central side, and its bounded outbox.

Why the outbox is bounded: every status report and snapshot is answered, and the answers
wait here until the agent reads them. An agent that writes and never reads (buggy, stuck,
or hostile) once left 109,349 acks queued after 300,000 five-byte reports, and the queue
grew as fast as it wrote. Now at most ``OUTBOX_LIMIT`` messages wait: ``send`` waits for
room, so the stream's worker stops taking messages, its inbox fills (``agent_inbox``), the
reader stops reading and gRPC's flow control stops the agent's writes. Nothing is dropped:
an agent that reads again gets every answer, in order. Closing never waits (a ``Fence``
must get out whatever is queued).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from federation.service.agent_inbox import Inbox
from federation.v1 import agent_pb2

OUTBOX_LIMIT = 256  # answers and Works waiting for the agent to read them


def _room() -> asyncio.Event:
    room = asyncio.Event()
    room.set()
    return room


@dataclass(eq=False)
class Session:
    """One agent stream: what was sent to it and the queue of what is to be sent."""

    cluster: str
    epoch: int
    agent_id: str
    inbox: Inbox = field(default_factory=Inbox)  # received, store work not yet done
    # job -> (work id, version, generation) of the Work last sent
    sent: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    _out: asyncio.Queue[agent_pb2.CentralMessage | None] = field(default_factory=asyncio.Queue)
    _room: asyncio.Event = field(default_factory=_room)

    async def send(self, msg: agent_pb2.CentralMessage) -> None:
        """Queue ``msg`` for the agent once fewer than ``OUTBOX_LIMIT`` wait; dropped once closed."""
        while not self.closed and self._out.qsize() >= OUTBOX_LIMIT:
            self._room.clear()
            await self._room.wait()
        if not self.closed:
            self._out.put_nowait(msg)

    async def next(self) -> agent_pb2.CentralMessage | None:
        """The next message for the agent; None once the session is closed and drained."""
        msg = await self._out.get()
        if self._out.qsize() < OUTBOX_LIMIT:
            self._room.set()
        return msg

    def queued(self) -> int:
        return self._out.qsize()

    def close(self, last: agent_pb2.CentralMessage | None = None) -> None:
        """End the stream after ``last`` (a Fence, say); idempotent, never waits."""
        if self.closed:
            return
        if last is not None:
            self._out.put_nowait(last)
        self.closed = True
        self._out.put_nowait(None)
        self._room.set()  # senders waiting for room give up
