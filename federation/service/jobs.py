"""JobService: submit, read, cancel, watch and explain jobs — a thin adapter over the store.

Each RPC authenticates, converts the request (``convert``, which validates and names
field paths), makes one store call per step in a worker thread (the store is synchronous
SQLAlchemy; every call is one transaction) and renders the answer (``views``). Errors are
raised, never turned into statuses here: ``errors.ErrorMapping`` does that for every RPC.

SubmitJob is the exception to "one store call per RPC": after its own checks (auth, size,
conversion, queue ownership) each call joins a group commit (``batching.Batcher``) that
stores the submissions in flight with one ``jobs.submit_many`` transaction, because the
per-transaction cost dominated the hot path (issue 2). Each call still answers only for
its own job, only after the batch committed, with the same codes as before; a database
failure fails every call of that batch (UNAVAILABLE), since none of it was stored.

WatchJobs and WatchJobBatches read the shared ``event_feed.EventFeed``: one poller of the store's event
table (every ``watch_poll_seconds``, at once after a submit or cancel through this
servicer) broadcasting to every stream. Why the table and not an in-process notifier
only: the rounds, the agent hub, and (with PostgreSQL) other service replicas write
events too; the table is the one feed every writer already appends to in the same
transaction as the change, so a watcher can never miss an event or see one whose change
was rolled back, and resumption is just "events after id N". Who may see which events
is decided in one place for both RPCs (``watching.Watches``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job
from federation.domain.names import dns_label
from federation.domain.queues import Queue
from federation.metrics.instruments import NO_METRICS, ServiceMetrics
from federation.placement.intent import topology_wait
from federation.service.admission import INLINE_TEMPLATE_BYTES, admit, template_bytes
from federation.service.auth import (
    Authenticator,
    Identity,
    check_queue,
    usable_queues,
)
from federation.service.batching import Batcher
from federation.service.errors import status_for
from federation.service.event_batches import pack
from federation.service.event_feed import DEFAULT_COALESCE_SECONDS, EventFeed
from federation.service.objects import PriorityClassCache
from federation.service.views import explain, job_to_view
from federation.service.watching import Watches
from federation.store.errors import AlreadyExists, NotFound
from federation.store.jobs_submit import Item, Outcome
from federation.store.records import DecisionRecord, EventPage, JobRecord, Page, Submitted, WorkRecord
from federation.v1 import jobs_pb2, jobs_pb2_grpc
from federation.wire.convert import job_from_proto, job_state_name
from federation.wire.limits import DEFAULT_LIMITS, Limits, check_job_spec

log = logging.getLogger(__name__)
T = TypeVar("T")
DEFAULT_SPEC_LIMIT = 1024 * 1024  # serialized JobSpec bytes
QUEUE_CACHE_SECONDS = 2.0


@dataclass(frozen=True)
class SubmitBatching:
    """Group commit settings for SubmitJob (see ``batching``): batch size, wait, batches at once."""

    max_items: int = 64
    max_delay_seconds: float = 0.002
    max_batches: int = 1
Context = grpc.aio.ServicerContext[Any, Any]


class Trigger(Protocol):
    def trigger(self, reason: str) -> None: ...


class Canceller(Protocol):
    async def cancel_job(self, job: str) -> None: ...


class _QueueReader(Protocol):
    def get(self, name: str) -> Queue: ...
    def all(self) -> list[Queue]: ...


class QueueSource(Protocol):
    """What ``QueueCache`` needs from the store."""

    @property
    def queues(self) -> _QueueReader: ...


class _Jobs(Protocol):
    def submit_many(self, items: Sequence[Item]) -> list[Outcome]: ...
    def get(self, name: str) -> JobRecord: ...
    def conflict(self, job: Job) -> AlreadyExists | None: ...
    def cancel(self, name: str, reason: str = "cancelled") -> JobRecord: ...
    def list(self, *, queue: str | None = None, states: Collection[str] | None = None, tenant: str | None = None,
             visible_to: str | None = None, page_size: int | None = None,
             page_token: str = "") -> Page[JobRecord]: ...
    def events_since(self, after_id: int, *, limit: int = 500, job: str | None = None,
                     queues: Collection[str] | None = None) -> EventPage: ...


class _Decisions(Protocol):
    def latest_decision(self, job: str, *, created_at: datetime | None = None) -> DecisionRecord | None: ...


class _Works(Protocol):
    def latest(self, job: str) -> WorkRecord | None: ...


class _Policies(Protocol):
    def claims(self, jobs: list[str] | None = None) -> dict[str, str]: ...


class JobStore(QueueSource, Protocol):
    """What ``JobServicer`` needs from the store."""

    @property
    def jobs(self) -> _Jobs: ...
    @property
    def audit(self) -> _Decisions: ...
    @property
    def works(self) -> _Works: ...
    @property
    def policies(self) -> _Policies: ...


class QueueCache:
    """Queues by name for at most ``ttl`` seconds: the submit hot path's owner check.

    Why a cache: every submission needs its queue's owners; reading them costs a
    transaction per submit, doubling the database round trips of the hot path. Queues
    change rarely and only through the QueueService, which invalidates this cache in the
    same process; another replica's change is seen within ``ttl``. A miss (unknown or
    new queue) always reads the store, so a new queue is usable at once.
    """

    def __init__(self, store: QueueSource, ttl: float = QUEUE_CACHE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._ttl, self._clock = store, ttl, clock
        self._entries: dict[str, tuple[float, Queue]] = {}
        self._loading: dict[str, asyncio.Future[Queue]] = {}

    async def get(self, name: str) -> Queue:
        hit = self._entries.get(name)
        now = self._clock()
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        # Single flight: when an entry expires under load, every in-flight submit would
        # otherwise read the same queue at once.
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.ensure_future(asyncio.to_thread(self._store.queues.get, name))
            self._loading[name] = loading
            loading.add_done_callback(lambda f: self._loaded(name, now, f))
        return await asyncio.shield(loading)

    def _loaded(self, name: str, when: float, future: asyncio.Future[Queue]) -> None:
        if self._loading.get(name) is future:
            del self._loading[name]
            if not future.cancelled() and future.exception() is None:
                self._entries[name] = (when, future.result())

    def invalidate(self, name: str | None = None) -> None:
        if name is None:
            self._entries.clear()
            self._loading.clear()
        else:
            self._entries.pop(name, None)
            self._loading.pop(name, None)


def refusal_outcome(exc: BaseException) -> str:
    """The ``federation_submissions_total`` outcome of a refused submission: the gRPC code
    ``ErrorMapping`` answers with, in lower case (``invalid_argument``, ``unavailable`` …)."""
    mapped = status_for(exc)
    return mapped[0].name.lower() if mapped is not None else "internal"


class JobServicer(jobs_pb2_grpc.JobServiceServicer):
    def __init__(self, store: JobStore, auth: Authenticator, *, rounds: Trigger | None = None,
                 hub: Canceller | None = None, queues: QueueCache | None = None,
                 spec_limit_bytes: int = DEFAULT_SPEC_LIMIT, watch_poll_seconds: float = 0.2,
                 watch_coalesce_seconds: float = DEFAULT_COALESCE_SECONDS,
                 batching: SubmitBatching | None = None, topology_wait_seconds: float = 0.0,
                 metrics: ServiceMetrics = NO_METRICS, classes: PriorityClassCache | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self._store = store
        self._limits = limits
        self._topology_wait = topology_wait_seconds  # the service default, for ExplainJob
        self._metrics = metrics
        self.classes = classes or PriorityClassCache(store)
        self._auth = auth
        self._rounds = rounds
        self._hub = hub
        self.queues = queues or QueueCache(store)
        self._limit = spec_limit_bytes
        self._closing = asyncio.Event()
        self.feed = EventFeed(store, poll_seconds=watch_poll_seconds, coalesce_seconds=watch_coalesce_seconds)
        self.watches = Watches(self.feed, self.queues, self._closing.is_set)
        b = batching or SubmitBatching()
        self.submissions: Batcher[tuple[Job, str], Outcome] = Batcher(
            self._submit_many, max_items=b.max_items, max_delay=b.max_delay_seconds, max_batches=b.max_batches)

    def shutdown(self) -> None:
        """End every WatchJobs stream (server shutdown: streams would hold the grace period open)
        and send the waiting submissions to the store now rather than after their delay."""
        self._closing.set()
        self.feed.shutdown()
        self.submissions.flush()

    def _submit_many(self, items: list[tuple[Job, str]]) -> list[Outcome]:
        outcomes: list[Outcome] = self._store.jobs.submit_many(items)
        return outcomes

    async def close(self) -> None:
        """Wait for every submission batch in flight (after the server stopped; before the store closes)."""
        await self.submissions.close()
        await self.feed.close()
        if self.submissions.batches:
            log.info("submissions: %d jobs in %d store transactions (%.1f per transaction)", self.submissions.items,
                     self.submissions.batches, self.submissions.items / self.submissions.batches)

    def _wake_watchers(self) -> None:
        self.feed.wake()

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _visible_record(self, who: Identity, name: str) -> JobRecord:
        """The job if the caller may see it: NOT_FOUND if absent, PERMISSION_DENIED if foreign."""
        dns_label(name, "name")  # a job name, bounded, before it is looked up or echoed in an error
        record: JobRecord = await self._call(self._store.jobs.get, name)
        if not who.admin:
            check_queue(who, record.queue, (await self.queues.get(record.queue)).owners)
        return record

    # ------------------------------------------------------------------ RPCs

    async def SubmitJob(self, request: jobs_pb2.SubmitJobRequest, context: Context) -> jobs_pb2.SubmitJobResponse:
        started = time.perf_counter()
        try:
            response = await self._submit(request, context)
        except Exception as exc:
            self._metrics.submission(refusal_outcome(exc), time.perf_counter() - started)
            raise
        self._metrics.submission("created" if response.created else "existing", time.perf_counter() - started)
        return response

    async def _submit(self, request: jobs_pb2.SubmitJobRequest, context: Context) -> jobs_pb2.SubmitJobResponse:
        who = self._auth.require_tenant(context)
        size = request.spec.ByteSize()
        if size > self._limit:
            raise InvalidInput("spec", f"is {size} bytes serialized, over the {self._limit}-byte limit")
        check_job_spec(request.spec, self._limits, "spec")  # counts and names: cheap, before any parsing
        job = job_from_proto(request.spec, "spec", None if request.spec.HasField("priority")
                             else await self.classes.get())
        try:
            queue = await self.queues.get(job.queue)
        except NotFound:
            raise InvalidInput("spec.queue", f"unknown queue {job.queue!r}") from None
        check_queue(who, queue.name, queue.owners)
        if template_bytes(request.spec) > INLINE_TEMPLATE_BYTES:  # big templates parse off the event loop
            job = await asyncio.to_thread(admit, job, request.spec, queue, self._limits)
        else:
            job = admit(job, request.spec, queue, self._limits)
        if request.dry_run:  # every check a submission makes, the name's owner included
            refused = await self._call(self._store.jobs.conflict, job)
            if refused is not None:
                raise refused
            return jobs_pb2.SubmitJobResponse(job=jobs_pb2.Job(id=job.name), created=False)
        outcome = await self.submissions.submit((job, who.tenant or ""))
        if isinstance(outcome, NotFound):  # the queue was deleted since the cache saw it
            self.queues.invalidate(job.queue)
            if outcome.kind == "queue":
                raise InvalidInput("spec.queue", f"unknown queue {job.queue!r}") from None
        if not isinstance(outcome, Submitted):
            raise outcome
        submitted = outcome
        if submitted.created:
            if self._rounds is not None:
                self._rounds.trigger("submit")
            self._wake_watchers()
        return jobs_pb2.SubmitJobResponse(job=job_to_view(submitted.record), created=submitted.created)

    async def CancelJob(self, request: jobs_pb2.CancelJobRequest, context: Context) -> jobs_pb2.Job:
        who = self._auth.require_tenant(context)
        if len(request.reason) > self._limits.max_string_chars:  # stored, and sent with every event of the job
            raise InvalidInput("reason", f"is {len(request.reason)} characters, over the limit of "
                                         f"{self._limits.max_string_chars}")
        await self._visible_record(who, request.name)
        reason = request.reason or f"cancelled by {who.tenant}"
        record: JobRecord = await self._call(self._store.jobs.cancel, request.name, reason)
        if self._hub is not None:
            await self._hub.cancel_job(request.name)
        if self._rounds is not None:
            self._rounds.trigger("cancel")
        self._wake_watchers()
        return job_to_view(record)

    async def GetJob(self, request: jobs_pb2.GetJobRequest, context: Context) -> jobs_pb2.Job:
        who = self._auth.require_tenant(context)
        return job_to_view(await self._visible_record(who, request.name))

    async def _visible_queues(self, who: Identity, queue: str) -> list[str] | None:
        """Queue filter for listings: None = all (admins), else the queues ``who`` may see."""
        if queue:
            try:
                q = await self.queues.get(queue)
            except NotFound:
                return [queue]  # an unknown queue simply has no jobs
            check_queue(who, q.name, q.owners)
            return [queue]
        return None if who.admin else usable_queues(who, await self._call(self._store.queues.all))

    async def ListJobs(self, request: jobs_pb2.ListJobsRequest, context: Context) -> jobs_pb2.ListJobsResponse:
        who = self._auth.require_tenant(context)
        if request.page_size < 0:
            raise InvalidInput("page_size", "must not be negative")
        states = [job_state_name(request.state)] if request.state else None
        if states == [""]:
            raise InvalidInput("state", f"unknown job state {request.state}")
        if request.queue:
            dns_label(request.queue, "queue")  # a filter no queue can match is refused, not answered empty
            await self._visible_queues(who, request.queue)
        return await self._call(
            self._listing, queue=request.queue or None, states=states,
            visible_to=None if who.admin else who.tenant, page_size=request.page_size or None,
            page_token=request.page_token)

    def _listing(self, **query: Any) -> jobs_pb2.ListJobsResponse:
        """One page of jobs, read AND rendered in the calling worker thread. Why not render on
        the event loop: a page holds up to 1,000 jobs, each spec with its pod templates, and
        rendering one took about 0.1 s of CPU (10,000 jobs, 1,000 to a page), during which
        every other RPC and agent stream of the server waited."""
        page = self._store.jobs.list(**query)
        return jobs_pb2.ListJobsResponse(jobs=[job_to_view(r) for r in page.items], next_page_token=page.next_token)

    async def WatchJobs(  # type: ignore[override]  # bytes of a JobEvent: wire_bytes.PassBytes sends them
            self, request: jobs_pb2.WatchJobsRequest, context: Context) -> AsyncIterator[bytes]:
        """One message per event (serialized once for every stream); the rules are ``watching.Watches``'."""
        who = self._auth.require_tenant(context)
        async for items in self.watches.visible(who, request):
            for item in items:
                yield item.wire

    async def WatchJobBatches(  # type: ignore[override]  # bytes of a JobEventBatch: wire_bytes.PassBytes sends them
            self, request: jobs_pb2.WatchJobsRequest, context: Context) -> AsyncIterator[bytes]:
        """WatchJobs' events, one message per feed turn (bounded: ``event_batches.pack``), joined
        from each event's precomputed framing without re-serializing."""
        who = self._auth.require_tenant(context)
        async for items in self.watches.visible(who, request):
            for batch in pack(item.framed for item in items):
                yield batch

    async def ExplainJob(self, request: jobs_pb2.ExplainJobRequest, context: Context) -> jobs_pb2.ExplainJobResponse:
        who = self._auth.require_tenant(context)
        record = await self._visible_record(who, request.name)
        latest = await self._call(self._store.audit.latest_decision, request.name, created_at=record.created_at)
        work = await self._call(self._store.works.latest, request.name)  # where pods actually are
        resp = explain(record, latest, work)
        try:
            queue: Queue | None = await self.queues.get(record.queue)
        except NotFound:
            queue = None
        resp.topology_wait = topology_wait(record.job, queue, self._topology_wait).describe()
        if record.job.propagation is not None:
            resp.policy = "inline"
        else:
            claims = await self._call(self._store.policies.claims, [request.name])
            resp.policy = claims.get(request.name, "")
        return resp
