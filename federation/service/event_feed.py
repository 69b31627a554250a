"""One shared job-event feed for every WatchJobs stream (issue 10, "watchers slow everyone down").

Before, each watcher polled the store's event table on its own and fetched the job of
every event it delivered: 200 watchers made 1,000 queries a second while idle, pushed
SubmitJob's p50 from 6 ms to over 400 ms and delivered events 6-16 s late. Now one poller
reads each page of new events once, renders it once (one query for all the page's jobs)
and keeps the last ``capacity`` rendered events in memory; watchers read from that buffer
and wait on one asyncio event. The store stays the one source of truth (every writer —
the servicers, the rounds, the agent hub, other replicas — appends to the event table in
the same transaction as the change, and ``events_since`` never skips a slow transaction),
so nothing is lost and resumption is still "events after id N".

A watcher whose cursor is older than the buffer (resuming, or replaying history from 0)
is served from the store in pages of ``page`` events, each page rendered with one job
query, until it reaches the buffer; only such a watcher touches the store.

Bounded in bytes as well as in events: an event carries its job's spec (up to 1 MiB with
its pod templates), so 4,096 events of big jobs held about 8 GiB and a replayed page of
500 about 1 GiB. The buffer keeps at most ``capacity_bytes`` (older events are then
replayed from the store), and a page stops once it holds ``page_bytes``, its jobs read
``RENDER_CHUNK`` at a time.

Deleted events: deleting a queue deletes its jobs and their events, and a queue of the
same name may then be created for another tenant, who may watch it from event 0. The
buffer must not outlive what it copies, so each poll first counts the stored events in
the buffer's range (one indexed count) and drops the whole buffer when the count differs
(watchers behind it then replay from the store, which holds only what is left); a
deletion in this process drops the queue's events at once (``forget``).

Sending to many streams stays cheap on the event loop (the busy half of the fan-out
benchmark, docs/benchmarks.md):
- each event is serialized once, by the poller in its worker thread (``FeedItem.wire``),
  and every stream writes those bytes (``WatchJobs`` answers with ``PRESERIALIZED``
  methods' bytes as they are: ``wire_bytes.PassBytes``), not 200 ``SerializeToString``;
- a watcher takes every event that arrived since its last turn in one batch, and a
  ``WatchJobBatches`` stream sends that batch as one message (``event_batches``: each
  event's framing as a batch field is computed here once, ``FeedItem.framed``);
- coalescing: the poller reads the table at most once per window. A wake (a local submit
  or cancel) right after a quiet spell polls at once; a wake within the window of the last
  poll waits for the window's end, so the events of every submission of a burst in that
  window are published together and each watcher gets one message per window instead of
  one per event. The window is ``coalesce_seconds`` (50 ms by default), or 1 ms per open
  watch stream if that is longer, at most 250 ms: a feed turn costs the loop about one
  message write per watcher (~0.1 ms each), so turns at least 1 ms per watcher apart keep
  the fan-out near a tenth of the loop however many watch, while a few watchers keep the
  short window. The cost is at most one window of extra delay during a burst, against the
  1 s delivery goal (docs/design/watch.md);
- watchers are woken ``WAKE_CHUNK`` at a time with a turn of the loop in between, so a
  unary call (SubmitJob) that arrives during a 200-stream burst waits for one chunk's
  writes, not for all of them.

Why in-memory broadcast rather than PostgreSQL LISTEN/NOTIFY: it works the same on
SQLite, needs no dedicated connection per replica, and the poll (one indexed query per
``poll_seconds``) is already cheap; a NOTIFY would only shorten the poll wait for writers
in another process, which ``wake()`` already does for this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from federation.service.event_batches import frame
from federation.service.views import event_to_view
from federation.store.errors import StoreError
from federation.store.records import JobEvent
from federation.v1 import jobs_pb2

log = logging.getLogger(__name__)

# Watchers woken per turn of the event loop (module doc).
WAKE_CHUNK = 16
MIB = 1024 * 1024
# Events rendered per job query: a page's jobs are read in chunks, so a page of big jobs
# stops at its byte budget without reading the rest (module doc).
RENDER_CHUNK = 16
# The shortest time between two polls (module doc: coalescing); `federation serve --watch-coalesce-ms`.
DEFAULT_COALESCE_SECONDS = 0.05
# The window grows by this much per open watcher, up to MAX_COALESCE_SECONDS (module doc).
COALESCE_PER_WATCHER_SECONDS = 0.001
MAX_COALESCE_SECONDS = 0.25


@dataclass(frozen=True)
class FeedItem:
    """One event as every watcher sends it (rendered and serialized once), with its queue."""

    id: int
    queue: str
    wire: bytes  # a serialized jobs_pb2.JobEvent
    framed: bytes = field(init=False, repr=False)  # ``wire`` as field 1 of a JobEventBatch (``event_batches``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "framed", frame(self.wire))  # once per event, in the poller's thread

    @property
    def size(self) -> int:
        """The bytes it holds (both forms): what the feed's byte budgets count."""
        return len(self.wire) + len(self.framed)

    @property
    def view(self) -> jobs_pb2.JobEvent:
        return jobs_pb2.JobEvent.FromString(self.wire)


class EventFeed:
    """Poll the event table once for everyone; broadcast in memory; replay history from the store."""

    def __init__(self, store: Any, *, poll_seconds: float = 0.2, capacity: int = 4096, page: int = 500,
                 coalesce_seconds: float = DEFAULT_COALESCE_SECONDS, capacity_bytes: int = 64 * MIB,
                 page_bytes: int = 8 * MIB) -> None:
        if coalesce_seconds < 0 or poll_seconds <= 0 or min(capacity, page, capacity_bytes, page_bytes) < 1:
            raise ValueError("EventFeed: poll_seconds > 0, coalesce_seconds >= 0, positive capacities and pages")
        self._store = store
        self._poll = poll_seconds
        self._coalesce = coalesce_seconds
        self.watchers = 0  # open watch streams (``watching``)
        self._page = page
        self._items: deque[FeedItem] = deque()
        self._capacity = capacity
        self._capacity_bytes = capacity_bytes
        self._page_bytes = page_bytes
        self._held = 0  # bytes of _items
        self._floor = 0  # every stored event with id in (floor, cursor] is in _items
        self._cursor = 0
        self._waiters: list[asyncio.Future[None]] = []  # watchers waiting for the next event
        self._to_wake: deque[asyncio.Future[None]] = deque()  # woken WAKE_CHUNK per turn by _waker
        self._waker: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self.polls = 0  # store reads by the poller (for tests and the benchmark)
        self._forgets = 0  # ``forget`` calls so far: a page read across one is not published

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start polling from the newest event (idempotent; the first watcher calls it)."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        try:
            latest = int(await asyncio.to_thread(self._store.jobs.latest_event_id))
        except BaseException:
            self._starting = None  # let the next watcher retry
            raise
        self._floor = self._cursor = latest
        self._task = asyncio.create_task(self._run(), name="event-feed")

    def forget(self, queue: str) -> None:
        """Drop the buffered events of ``queue``: it was deleted in this process, and its
        events with it (a later queue of that name, maybe another tenant's, must not
        replay them). Another process's deletion is found by the next poll (module doc)."""
        self._items = deque(item for item in self._items if item.queue != queue)
        self._held = sum(item.size for item in self._items)
        self._forgets += 1

    @property
    def cursor(self) -> int:
        """The newest event id the feed has read."""
        return self._cursor

    @property
    def held_bytes(self) -> int:
        """The bytes of the events held in memory (at most ``capacity_bytes``)."""
        return self._held

    def wake(self) -> None:
        """Poll now (a submit or cancel in this process just wrote an event)."""
        self._wake.set()

    def shutdown(self) -> None:
        """End every waiting watcher now (server shutdown); ``close`` then stops the poller."""
        self._closing = True
        for waiter in [*self._to_wake, *self._waiters]:
            if not waiter.done():
                waiter.set_result(None)
        self._to_wake.clear()
        self._waiters.clear()

    async def close(self) -> None:
        self.shutdown()
        for task in (self._task, self._waker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._waker = None

    @property
    def closing(self) -> bool:
        return self._closing

    # ------------------------------------------------------------------ the poller

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            self._wake.clear()
            polled = loop.time()
            try:
                full = await self._poll_once()
            except StoreError as exc:
                log.warning("event feed: cannot read events (%s); retrying", exc)
                full = False
            if full:
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll):
                    await self._wake.wait()
            # The coalescing window (module doc): at most one poll per window, so a burst's
            # events reach each watcher together; a lone event after a quiet spell goes at once.
            rest = polled + self.window() - loop.time()
            if rest > 0 and not self._closing:
                await asyncio.sleep(rest)

    async def _poll_once(self) -> bool:
        """Read, render and publish one page; True if the page was full (more may be waiting).

        First drop the buffer if the store no longer holds every event in it (module doc:
        deleted events), so no watcher is served an event that went with its queue.
        """
        self.polls += 1
        floor, start, forgets = self._floor, self._cursor, self._forgets
        stale, events, cursor = await asyncio.to_thread(self._poll_read, floor, start, len(self._items))
        if forgets != self._forgets:
            # A queue was deleted while this page was read: it may hold that queue's events,
            # read before the deletion, which ``forget`` could not drop. Read it again.
            return True
        if stale:
            self._items.clear()
            self._held = 0
            self._floor = start  # watchers behind it replay from the store, which has only what is left
        for item in events:
            self._items.append(item)
            self._held += item.size
            while self._items and (len(self._items) > self._capacity or self._held > self._capacity_bytes):
                oldest = self._items.popleft()
                self._held -= oldest.size
                self._floor = oldest.id
        if cursor != self._cursor or events:
            self._cursor = cursor
            self._notify()
        return len(events) >= self._page or sum(item.size for item in events) >= self._page_bytes

    def _poll_read(self, floor: int, cursor: int, held: int) -> tuple[bool, list[FeedItem], int]:
        """Whether the buffer (``held`` events in (floor, cursor]) holds events the store no
        longer has, and the next page after ``cursor`` (in a worker thread)."""
        stale = held > 0 and self._store.jobs.count_events(floor, cursor) != held
        return (stale, *self._read_page(cursor, None))

    def _read_page(self, after: int, queues: Collection[str] | None) -> tuple[list[FeedItem], int]:
        """One page of events after ``after`` rendered with their jobs (in a worker thread),
        and the cursor after it: the page ends early, at an event's id, once it holds
        ``page_bytes`` (module doc).

        An event whose job is gone by the time its job is read is left out: it was deleted
        with the job (and its queue), and its queue's name may already belong to another tenant.
        """
        page = self._store.jobs.events_since(after, limit=self._page, queues=queues)
        events: tuple[JobEvent, ...] = page.events
        out: list[FeedItem] = []
        size = 0
        for start in range(0, len(events), RENDER_CHUNK):
            chunk = events[start:start + RENDER_CHUNK]
            records = self._store.jobs.get_many({ev.job for ev in chunk})
            for i, ev in enumerate(chunk):
                if size >= self._page_bytes:
                    return out, events[start + i - 1].id  # resume after the last event read
                if ev.job in records:
                    out.append(FeedItem(ev.id, ev.queue, event_to_view(ev, records[ev.job]).SerializeToString()))
                    size += out[-1].size
        return out, page.cursor

    def _notify(self) -> None:
        """Wake every waiting watcher, ``WAKE_CHUNK`` per turn of the loop (module doc)."""
        self._to_wake.extend(self._waiters)
        self._waiters = []
        if self._to_wake and (self._waker is None or self._waker.done()):
            self._waker = asyncio.create_task(self._wake_in_chunks(), name="event-feed-waker")

    async def _wake_in_chunks(self) -> None:
        while self._to_wake:
            for _ in range(min(WAKE_CHUNK, len(self._to_wake))):
                waiter = self._to_wake.popleft()
                if not waiter.done():  # a cancelled watcher's
                    waiter.set_result(None)
            await asyncio.sleep(0)  # let calls that arrived meanwhile run before the next chunk

    # ------------------------------------------------------------------ watchers

    def window(self) -> float:
        """The coalescing window now: the configured one, or longer with many watchers (module doc)."""
        return max(self._coalesce, min(MAX_COALESCE_SECONDS, COALESCE_PER_WATCHER_SECONDS * self.watchers))

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Count an open watch stream for as long as it lasts (``window``)."""
        self.watchers += 1
        try:
            yield
        finally:
            self.watchers -= 1

    async def next_batch(self, cursor: int, queues: Collection[str] | None) -> tuple[list[FeedItem], int]:
        """Events after ``cursor`` (waiting until there are some) and the cursor to pass next.

        ``queues`` (None = all) only narrows history replayed from the store; callers still
        check each item's queue, since access may change while they watch.
        """
        await self.start()
        while not self._closing:
            if cursor < self._floor:  # older than the buffer: replay a page from the store
                items, replayed = await asyncio.to_thread(self._read_page, cursor, queues)
                if items or replayed > cursor:
                    return items, replayed
                await asyncio.sleep(self._poll)  # an unsettled gap (a slow transaction): never skip it
                continue
            items = self._after(cursor)
            if items:
                return items, items[-1].id
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:  # the stream ended: do not keep its waiter
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
                raise
        return [], cursor

    def _after(self, cursor: int) -> list[FeedItem]:
        out: list[FeedItem] = []
        for item in reversed(self._items):
            if item.id <= cursor:
                break
            out.append(item)
        out.reverse()
        return out
