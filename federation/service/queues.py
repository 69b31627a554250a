"""QueueService: admins manage queues; every tenant may read them (to know where to submit).

A tenant reads another tenant's queue without its status or owners: the pending and
running counts, allocation and share of a queue are counts of its owners' jobs (issue 10).

Status (pending and running counts, allocation, dominant share) is computed on read
from the jobs table and the clusters' last snapshots: queues are few and read rarely, so
a derived view beats keeping counters that every state change would have to update.
The counts are one GROUP BY per read, so a job is counted as soon as it is submitted.
The allocation decodes every active job of the federation, whoever asks and for
whichever queue, so it is shared (``AllocationCache``): one computation at a time,
reused for a while, so a tenant reading queues in a loop costs the server a bounded
share of its CPU rather than one federation-wide decode per call.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.domain.names import dns_label
from federation.domain.queues import Queue
from federation.domain.resources import Resources, total
from federation.domain.states import ACTIVE_STATES
from federation.service.auth import Authenticator, Identity, may_use_queue
from federation.service.event_feed import EventFeed
from federation.service.jobs import QueueCache
from federation.service.views import queue_to_view
from federation.store.records import ClusterRecord, JobRecord, Page, QueueUsage
from federation.v1 import queues_pb2, queues_pb2_grpc
from federation.wire.convert import queue_from_proto

T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]


class _Queues(Protocol):
    def create(self, queue: Queue) -> Queue: ...
    def update(self, queue: Queue) -> Queue: ...
    def get(self, name: str) -> Queue: ...
    def list(self, *, page_size: int | None = None, page_token: str = "") -> Page[Queue]: ...
    def delete(self, name: str) -> None: ...


class _Jobs(Protocol):
    def usage(self) -> list[QueueUsage]: ...
    def in_states(self, states: Collection[str], *, limit: int | None = None) -> list[JobRecord]: ...


class _Clusters(Protocol):
    def list(self) -> builtins.list[ClusterRecord]: ...


class QueueStore(Protocol):
    """What ``QueueServicer`` needs from the store."""

    @property
    def queues(self) -> _Queues: ...
    @property
    def jobs(self) -> _Jobs: ...
    @property
    def clusters(self) -> _Clusters: ...


@dataclass(frozen=True)
class Allocation:
    """What the queues hold: the requests of their active jobs, and the federation's capacity."""

    per_queue: dict[str, Resources]
    capacity: Resources


def allocation(store: QueueStore) -> Allocation:
    """Read and sum the allocation (in a worker thread: it decodes every active job)."""
    per_queue: dict[str, Resources] = {}
    for r in store.jobs.in_states(ACTIVE_STATES):
        per_queue[r.queue] = per_queue.get(r.queue, Resources()) + r.job.requests
    capacity = total(c.summary.allocatable for c in store.clusters.list() if c.summary is not None and not c.lost)
    return Allocation(per_queue, capacity)


class AllocationCache:
    """The allocation, computed once at a time and reused for ``factor`` times what the
    last computation took (at least ``min_seconds``, at most ``max_seconds``).

    Why tied to the cost: the computation grows with the active jobs of the whole
    federation, so a fixed period would still let a tenant's read loop hold a worker
    thread and the CPU most of the time once the federation is big; reusing a result ten
    times as long as it took keeps those reads near a tenth of one core however big it
    gets, and the one in flight is shared by every caller meanwhile. An allocation a few
    seconds old is fine: it changes when rounds place jobs, which callers see later anyway.
    """

    def __init__(self, compute: Callable[[], Allocation], *, min_seconds: float = 1.0, max_seconds: float = 30.0,
                 factor: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._compute, self._clock = compute, clock
        self._min, self._max, self._factor = min_seconds, max_seconds, factor
        self._value: Allocation | None = None
        self._until = 0.0
        self._loading: asyncio.Future[Allocation] | None = None

    async def get(self) -> Allocation:
        if self._value is not None and self._clock() < self._until:
            return self._value
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        return await asyncio.shield(self._loading)

    async def _load(self) -> Allocation:
        try:
            started = self._clock()
            value = await asyncio.to_thread(self._compute)
            ended = self._clock()
            self._value, self._until = value, ended + min(self._max, max(self._min, self._factor * (ended - started)))
            return value
        finally:
            self._loading = None


class QueueServicer(queues_pb2_grpc.QueueServiceServicer):
    def __init__(self, store: QueueStore, auth: Authenticator, cache: QueueCache | None = None,
                 feed: EventFeed | None = None) -> None:
        self._store = store
        self._auth = auth
        self._cache = cache
        self._feed = feed  # drops a deleted queue's events from memory (event_feed, "Deleted events")
        self._allocation = AllocationCache(lambda: allocation(store))

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _view(self, queues: list[Queue], who: Identity | None = None) -> list[queues_pb2.Queue]:
        """The queues as ``who`` may see them (``None``: an admin's write, seen whole)."""
        usage, held = await asyncio.gather(self._call(self._store.jobs.usage), self._allocation.get())
        counts = {u.queue: u.counts for u in usage}
        views = [queue_to_view(q, counts.get(q.name, {}), held.per_queue.get(q.name, Resources()), held.capacity)
                 for q in queues]
        for q, view in zip(queues, views, strict=True):
            if who is not None and not may_use_queue(who, q.owners):
                view.ClearField("status")
                del view.owners[:]
        return views

    def _forget(self, name: str) -> None:
        if self._cache is not None:
            self._cache.invalidate(name)

    async def CreateQueue(self, request: queues_pb2.CreateQueueRequest, context: Context) -> queues_pb2.Queue:
        self._auth.require_admin(context)
        queue = queue_from_proto(request.queue, "queue")
        created: Queue = await self._call(self._store.queues.create, queue)
        self._forget(created.name)
        return (await self._view([created]))[0]

    async def UpdateQueue(self, request: queues_pb2.UpdateQueueRequest, context: Context) -> queues_pb2.Queue:
        self._auth.require_admin(context)
        queue = queue_from_proto(request.queue, "queue")
        updated: Queue = await self._call(self._store.queues.update, queue)
        self._forget(updated.name)
        return (await self._view([updated]))[0]

    async def GetQueue(self, request: queues_pb2.GetQueueRequest, context: Context) -> queues_pb2.Queue:
        who = self._auth.require_tenant(context)
        dns_label(request.name, "name")  # before it is looked up or echoed in an error
        queue: Queue = await self._call(self._store.queues.get, request.name)
        return (await self._view([queue], who))[0]

    async def ListQueues(self, request: queues_pb2.ListQueuesRequest,
                         context: Context) -> queues_pb2.ListQueuesResponse:
        who = self._auth.require_tenant(context)
        if request.page_size < 0:
            raise InvalidInput("page_size", "must not be negative")
        page = await self._call(self._store.queues.list, page_size=request.page_size or None,
                                page_token=request.page_token)
        return queues_pb2.ListQueuesResponse(queues=await self._view(list(page.items), who),
                                             next_page_token=page.next_token)

    async def DeleteQueue(self, request: queues_pb2.DeleteQueueRequest,
                          context: Context) -> queues_pb2.DeleteQueueResponse:
        self._auth.require_admin(context)
        dns_label(request.name, "name")  # before it is looked up or echoed in an error
        try:
            await self._call(self._store.queues.delete, request.name)
        finally:
            self._forget(request.name)
        if self._feed is not None:
            self._feed.forget(request.name)
        return queues_pb2.DeleteQueueResponse()
