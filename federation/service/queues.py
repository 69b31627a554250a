"""QueueService: admins manage queues; every tenant may read them (to know where to submit).

A tenant reads another tenant's queue without its status or owners: the pending and
running counts, allocation and share of a queue are counts of its owners' jobs (issue 10).

Status (pending and running counts, allocation, dominant share) is computed on read
from the jobs table and the clusters' last snapshots: queues are few and read rarely, so
a derived view beats keeping counters that every state change would have to update.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.domain.queues import Queue
from federation.domain.resources import Resources, total
from federation.domain.states import ACTIVE_STATES
from federation.service.auth import Authenticator, Identity, may_use_queue
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


class QueueServicer(queues_pb2_grpc.QueueServiceServicer):
    def __init__(self, store: QueueStore, auth: Authenticator, cache: QueueCache | None = None) -> None:
        self._store = store
        self._auth = auth
        self._cache = cache

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _status_inputs(self) -> tuple[dict[str, dict[str, int]], dict[str, Resources], Resources]:
        """Counts per queue and state, allocation per queue, federation capacity (one thread hop)."""
        counts = {u.queue: dict(u.counts) for u in self._store.jobs.usage()}
        allocated: dict[str, Resources] = {}
        for r in self._store.jobs.in_states(ACTIVE_STATES):
            allocated[r.queue] = allocated.get(r.queue, Resources()) + r.job.requests
        capacity = total(c.summary.allocatable for c in self._store.clusters.list()
                         if c.summary is not None and not c.lost)
        return counts, allocated, capacity

    async def _view(self, queues: list[Queue], who: Identity | None = None) -> list[queues_pb2.Queue]:
        """The queues as ``who`` may see them (``None``: an admin's write, seen whole)."""
        counts, allocated, capacity = await self._call(self._status_inputs)
        views = [queue_to_view(q, counts.get(q.name, {}), allocated.get(q.name, Resources()), capacity)
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
        if not request.name:
            raise InvalidInput("name", "must not be empty")
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
        if not request.name:
            raise InvalidInput("name", "must not be empty")
        try:
            await self._call(self._store.queues.delete, request.name)
        finally:
            self._forget(request.name)
        return queues_pb2.DeleteQueueResponse()
