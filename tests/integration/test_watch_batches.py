"""WatchJobBatches over real gRPC and real SQLite/PostgreSQL: the same events as WatchJobs, coalesced.

The access rules of both watch calls are in test_access_matrix.py; here: both calls show a
tenant exactly the same events (history and live, resumed from an id), a burst within the
coalescing window reaches a watcher as one message, and the client library resumes a
batched watch after the connection is lost, delivering every event once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import grpc.aio
from servicekit import ADMIN, NLP, VISION, client, queue, running, secured, spec

from federation.client import FederationClient, Retry
from federation.domain import Job, Resources, Task
from federation.service.server import build_server
from federation.store import Store
from federation.v1 import jobs_pb2


async def _collect(c: FederationClient, after: int, until: str, *, batched: bool,
                   queue_name: str = "") -> list[jobs_pb2.JobEvent]:
    out: list[jobs_pb2.JobEvent] = []
    async for ev in c.watch_jobs(after, queue_name, batched=batched):
        out.append(ev)
        if ev.job.id == until and ev.type == jobs_pb2.JOB_EVENT_TYPE_CANCELLED:
            return out
    raise AssertionError("the watch ended early")


async def test_both_calls_show_a_tenant_the_same_events_in_the_same_order(store: Store) -> None:
    async with running(store, secured(), watch_poll_seconds=0.05) as srv, client(srv, ADMIN) as admin, \
            client(srv, NLP) as nlp, client(srv, VISION) as vision:
        for name, owner in (("nlp-q", "nlp"), ("vision-q", "vision"), ("open-q", "")):
            await admin.create_queue(queue(name, *([owner] if owner else [])))
        for i in range(5):  # history, interleaved with another tenant's events
            await nlp.submit_job(spec(f"n{i}", "nlp-q"))
            await vision.submit_job(spec(f"v{i}", "vision-q"))
            await vision.submit_job(spec(f"o{i}", "open-q"))
        await nlp.cancel_job("n1")
        live = [asyncio.create_task(_collect(nlp, 0, "n-end", batched=b)) for b in (True, False)]
        await asyncio.sleep(0.3)
        for i in range(5, 8):  # live events, after both watches caught up
            await vision.submit_job(spec(f"v{i}", "vision-q"))
            await nlp.submit_job(spec(f"n{i}", "nlp-q"))
            await vision.cancel_job(f"v{i}")
        await nlp.submit_job(spec("n-end", "nlp-q"))
        await nlp.cancel_job("n-end")
        batched, single = map(_events, await asyncio.wait_for(asyncio.gather(*live), 60))
        assert batched == single
        assert {queue for *_, queue in batched} == {"nlp-q", "open-q"}
        assert [e[0] for e in batched] == sorted({e[0] for e in batched})
        middle = batched[len(batched) // 2][0]  # resumed from an id: the same tail on both
        tails = [_events(await asyncio.wait_for(_collect(nlp, middle, "n-end", batched=b, queue_name="nlp-q"), 60))
                 for b in (True, False)]
        assert tails[0] == tails[1] == [e for e in batched if e[0] > middle and e[-1] == "nlp-q"]


def _events(got: list[jobs_pb2.JobEvent]) -> list[tuple[int, int, str, str, str]]:
    """What identifies an event. Not the embedded job: it is the job as it was when the feed
    rendered the event, so a live copy and a later replay may show different states."""
    return [(ev.event_id, ev.type, ev.job.id, ev.message, ev.job.spec.queue) for ev in got]


async def test_a_burst_within_the_coalescing_window_is_one_message(store: Store) -> None:
    """One poll per window: the first submission after a quiet spell goes at once, the rest of
    the burst waits for the window's end and goes as one message to each watcher."""
    async with running(store, watch_poll_seconds=5.0, watch_coalesce_seconds=2.0) as srv, client(srv) as c:
        await c.create_queue(queue("research"))
        request = jobs_pb2.WatchJobsRequest(from_event_id=0, queue="research")
        batches: list[list[str]] = []
        singles: list[str] = []

        async def read_batches() -> None:
            async for batch in c.jobs.WatchJobBatches(request):
                batches.append([ev.job.id for ev in batch.events])

        async def read_events() -> None:
            async for ev in c.jobs.WatchJobs(request):
                singles.append(ev.job.id)

        readers = [asyncio.create_task(read_batches()), asyncio.create_task(read_events())]
        await asyncio.sleep(2.5)  # past the window of the feed's first poll
        names = [f"burst-{i}" for i in range(6)]
        for name in names:
            await c.submit_job(spec(name))
        for _ in range(400):
            if sum(map(len, batches)) >= 6 and len(singles) >= 6:
                break
            await asyncio.sleep(0.05)
        for reader in readers:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        assert [n for b in batches for n in b] == names == singles
        assert len(batches) <= 2, batches  # the first at once, the other five one window later


async def test_the_client_resumes_a_batched_watch_after_losing_the_server(store: Store) -> None:
    first = await build_server(store, listen="127.0.0.1:0", control_loop=False, watch_poll_seconds=0.05)
    port = first.port
    retry = Retry(attempts=40, initial_backoff=0.1, max_backoff=0.3)
    second = None
    async with FederationClient(f"127.0.0.1:{port}", timeout=5, retry=retry) as c:
        await c.create_queue(queue("research"))
        await c.submit_job(spec("before"))
        seen: list[str] = []

        async def follow() -> None:
            async for ev in c.watch_jobs(0):
                seen.append(ev.job.id)
                if ev.job.id == "after":
                    return

        watching = asyncio.create_task(follow())
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.05)
        try:
            await first.server.stop(None)  # the connection drops under the open stream (no clean end)
            await first.stop(grace=0.1)
            # written while no server runs
            store.jobs.submit(Job(name="while-down", queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
            second = await build_server(store, listen=f"127.0.0.1:{port}", control_loop=False,
                                        watch_poll_seconds=0.05)
            await c.submit_job(spec("after"))
            await asyncio.wait_for(watching, 60)
        finally:
            if second is not None:
                await second.stop(grace=1.0)
        assert seen == ["before", "while-down", "after"], seen


async def test_the_client_falls_back_to_watchjobs_on_a_server_without_the_batched_call() -> None:
    """An older server answers UNIMPLEMENTED for WatchJobBatches: the client reads WatchJobs instead."""
    asked: list[int] = []

    async def watch_jobs(request: jobs_pb2.WatchJobsRequest, context: object) -> AsyncIterator[jobs_pb2.JobEvent]:
        asked.append(request.from_event_id)
        for i in range(request.from_event_id + 1, request.from_event_id + 4):
            yield jobs_pb2.JobEvent(event_id=i, job=jobs_pb2.Job(id=f"j{i}"))

    old = grpc.aio.server()
    old.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("federation.v1.JobService", {
        "WatchJobs": grpc.unary_stream_rpc_method_handler(
            watch_jobs, request_deserializer=jobs_pb2.WatchJobsRequest.FromString,
            response_serializer=jobs_pb2.JobEvent.SerializeToString)})])
    port = old.add_insecure_port("127.0.0.1:0")
    await old.start()
    try:
        async with FederationClient(f"127.0.0.1:{port}", timeout=5) as c:
            got = [ev.event_id async for ev in c.watch_jobs(7)]
    finally:
        await old.stop(None)
    assert (got, asked) == ([8, 9, 10], [7])
