"""One agent stream's messages waiting for their store work, in order, coalesced.

Why it exists: the hub used to read a message, do its store work, then read the next.
One slow store call (a snapshot of 10,000 nodes, a busy PostgreSQL) then held up the
heartbeats queued behind it, and the watchdog declared a healthy cluster lost. Now the
stream's reader only records that the agent was heard (liveness) and drops the message
here; a worker per stream does the store work, one message at a time, so per-cluster
order is kept (a status reporting a bound gang must be applied before a snapshot sent
after it, see ``propagation.reflected_in_snapshot``).

Coalescing keeps the inbox bounded by what the agent holds, not by how far the store is
behind:

- **heartbeat**: only the newest waiting one is kept (its store write just refreshes
  ``last_heartbeat``; liveness itself was recorded on receipt);
- **snapshot**: only the newest is kept, and it moves to the tail, so a status received
  between two snapshots is still applied before the snapshot that follows it;
- **status**: one entry per Work; a newer report replaces the waiting one and moves to
  the tail (never earlier than any message received before it), and the recovery events
  of both are kept (restart events must not be lost). ``count`` says how many reports the
  entry stands for, so the hub still acknowledges each one. Merging stops at
  ``STATUS_MAX_EVENTS`` events: the waiting entry then stays where it is and the new
  report starts the Work's next entry at the tail, so every entry passes ``check_status``
  when each report did, and a merge never copies more than that many events.

``limit`` is a safety valve against an agent reporting on ever more Works: past it the
reader waits for room (back-pressure onto the stream) rather than grow without bound.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from federation.v1 import agent_pb2
from federation.wire.limits import STATUS_MAX_EVENTS

DEFAULT_LIMIT = 4096


@dataclass(frozen=True)
class Entry:
    """A message to process and how many received messages it stands for."""

    message: agent_pb2.AgentMessage
    count: int = 1


def _key(msg: agent_pb2.AgentMessage, serial: int) -> str:
    kind = msg.WhichOneof("body")
    if kind in ("heartbeat", "snapshot"):
        return kind
    if kind == "status":
        return f"status:{msg.status.work_id}"
    return f"other:{serial}"


def _mergeable(older: Entry, newer: agent_pb2.AgentMessage) -> bool:
    """Whether the two reports' events fit in one (see the module's docstring)."""
    if newer.WhichOneof("body") != "status":
        return True
    return len(older.message.status.events) + len(newer.status.events) <= STATUS_MAX_EVENTS


def _merged(older: Entry, newer: agent_pb2.AgentMessage) -> Entry:
    """The newer report, carrying the older one's recovery events first."""
    if newer.WhichOneof("body") != "status" or not older.message.status.events:
        return Entry(newer, older.count + 1)
    merged = agent_pb2.AgentMessage()
    merged.CopyFrom(newer)
    del merged.status.events[:]
    merged.status.events.extend([*older.message.status.events, *newer.status.events])
    return Entry(merged, older.count + 1)


class Inbox:
    """Ordered, coalescing, bounded queue between a stream's reader and its worker."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        # (coalescing key, 0), or (key, serial) for a Work's entry after a full one
        self._entries: OrderedDict[tuple[str, int], Entry] = OrderedDict()
        self._split: dict[str, int] = {}  # key -> serial of its newest entry, when not 0
        self._limit = limit
        self._serial = 0
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._finished = False

    def __len__(self) -> int:
        return len(self._entries)

    def offer(self, msg: agent_pb2.AgentMessage) -> bool:
        """Queue ``msg`` (coalescing as above); False when full — await ``room()`` and retry."""
        self._serial += 1
        key = _key(msg, self._serial)
        slot = (key, self._split.get(key, 0))
        older = self._entries.get(slot)
        if older is not None and not _mergeable(older, msg):
            older, slot = None, (key, self._serial)  # the full entry keeps its place
        if older is None and len(self._entries) >= self._limit:
            self._room.clear()
            return False
        if older is not None:
            del self._entries[slot]  # the merged entry moves to the tail
        self._entries[slot] = Entry(msg) if older is None else _merged(older, msg)
        if slot[1]:
            self._split[key] = slot[1]
        self._ready.set()
        return True

    async def room(self) -> None:
        await self._room.wait()

    def finish(self) -> None:
        """Nothing more will be offered (the stream ended): ``get`` returns None once drained."""
        self._finished = True
        self._ready.set()

    async def get(self) -> Entry | None:
        """The oldest waiting entry (waits while there is none); None when finished and drained."""
        while not self._entries:
            if self._finished:
                return None
            self._ready.clear()
            await self._ready.wait()
        (key, serial), entry = self._entries.popitem(last=False)
        if serial and self._split.get(key) == serial:
            del self._split[key]
        if len(self._entries) < self._limit:
            self._room.set()
        return entry
