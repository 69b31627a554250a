"""What a watcher may see of the shared event feed: the one access check behind both watch RPCs.

``WatchJobs`` (one ``JobEvent`` per message, for grpcurl and older clients) and
``WatchJobBatches`` (a ``JobEventBatch`` per feed turn, ``event_batches``) stream the same
events in the same order under the same rules; only the message shape differs. So both are
thin loops over ``Watches.visible``, which owns the rules (docs/design/limits.md, "Tenant
isolation over time"):

- a tenant may watch one queue only if it exists and is theirs now (a queue created later
  for someone else must not stream to them): refused with PERMISSION_DENIED up front;
- access is re-checked, through the queue cache (invalidated by this process's
  QueueService, else at most its ttl old), for the events of every feed turn before they
  are sent; a watch on one queue ends with PERMISSION_DENIED the moment the caller no
  longer owns it (the events before that point, which it could see, are still sent);
- an unfiltered watch skips the events of queues the caller may not see (or that no
  longer exist).

Within one feed turn each queue is checked once: the checks of one turn happen at the same
instant either way (a cached lookup does not yield to the event loop), and checking once
per queue rather than once per event keeps 200 watchers' checks cheap in a burst.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

from federation.domain.errors import InvalidInput
from federation.domain.names import dns_label
from federation.domain.queues import Queue
from federation.service.auth import Identity, PermissionDenied, check_queue, may_use_queue
from federation.service.event_feed import EventFeed, FeedItem
from federation.store.errors import NotFound
from federation.v1 import jobs_pb2


class QueueLookup(Protocol):
    async def get(self, name: str) -> Queue: ...


class Watches:
    """The events of the shared ``feed`` that a caller may see, a feed turn at a time (module doc)."""

    def __init__(self, feed: EventFeed, queues: QueueLookup, closing: Callable[[], bool]) -> None:
        self._feed = feed
        self._queues = queues
        self._closing = closing

    async def visible(self, who: Identity, request: jobs_pb2.WatchJobsRequest) -> AsyncIterator[Sequence[FeedItem]]:
        """Each feed turn's events that ``who`` may see (never an empty list), in event order."""
        if request.from_event_id < 0:
            raise InvalidInput("from_event_id", "must not be negative")
        if request.queue:
            dns_label(request.queue, "queue")  # a name no queue can have is refused, not watched forever
            await self.check(who, request.queue)
        cursor = request.from_event_id
        narrow = [request.queue] if request.queue else None
        with self._feed.watching():  # the feed's coalescing window grows with the watchers
            while not self._closing():
                items, cursor = await self._feed.next_batch(cursor, narrow)
                out: list[FeedItem] = []
                seen: dict[str, bool] = {}
                try:
                    for item in items:
                        if request.queue and item.queue != request.queue:
                            continue
                        ok = seen.get(item.queue)
                        if ok is None:
                            ok = seen[item.queue] = await self._allowed(who, item.queue, required=bool(request.queue))
                        if ok:
                            out.append(item)
                except PermissionDenied:
                    if out:  # what the caller could still see when its access ended
                        yield out
                    raise
                if out:
                    yield out

    async def check(self, who: Identity, name: str) -> None:
        """PERMISSION_DENIED unless ``who`` may watch queue ``name`` now (it must exist for a tenant)."""
        await self._allowed(who, name, required=True)

    async def _allowed(self, who: Identity, name: str, *, required: bool) -> bool:
        """Whether ``who`` may see queue ``name``'s events; with ``required``, PERMISSION_DENIED instead of False."""
        if who.admin:
            return True
        try:
            queue = await self._queues.get(name)
        except NotFound:
            if required:
                raise PermissionDenied(f"tenant {who.name} may not watch queue {name}: no such queue") from None
            return False
        if required:
            check_queue(who, queue.name, queue.owners)
            return True
        return may_use_queue(who, queue.owners)
