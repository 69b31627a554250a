"""A queue deleted and created again for another tenant: nothing of the first owner's jobs
reaches the new owner. The queue's events went with it, and the shared event feed's
memory must not outlive them (service/event_feed.py, "Deleted events")."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from servicekit import ADMIN, NLP, VISION, client, queue, running, secured, spec

from federation.client import FederationClient
from federation.domain.queues import Queue
from federation.service.server import RunningServer
from federation.store import Store
from federation.store.records import QueueCounts, RoundRecord

BOTH_WATCHES = pytest.mark.parametrize("batched", [True, False], ids=["WatchJobBatches", "WatchJobs"])


async def _secret_then_gone(srv: RunningServer, admin: FederationClient, nlp: FederationClient) -> None:
    """nlp's job in queue ``reused``, held in the feed's memory, then finished."""
    await srv.jobs.feed.start()  # before any event: every event below stays in the feed's memory
    await admin.create_queue(queue("reused", "nlp"))
    secret = spec("nlp-secret", "reused")
    secret.labels["project"] = "top-secret-model"
    await nlp.submit_job(secret)
    await nlp.cancel_job("nlp-secret")


async def _vision_sees(vision: FederationClient, batched: bool) -> None:
    await vision.submit_job(spec("vision-1", "reused"))
    for name in ("reused", ""):  # the queue's watch, and the unfiltered one
        seen: list[str] = []
        async for ev in vision.watch_jobs(0, name, batched=batched):
            seen.append(ev.job.id)
            assert "top-secret-model" not in str(ev)
            if ev.job.id == "vision-1":
                break
        assert seen == ["vision-1"], (name, seen)


@BOTH_WATCHES
async def test_a_recreated_queue_does_not_replay_the_old_owners_events(store: Store, batched: bool) -> None:
    async with running(store, secured(), watch_poll_seconds=0.05) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp, client(srv, VISION) as vision:
        await _secret_then_gone(srv, admin, nlp)
        await admin.delete_queue("reused")
        await admin.create_queue(queue("reused", "vision"))
        await _vision_sees(vision, batched)


@BOTH_WATCHES
async def test_a_queue_deleted_by_another_replica_is_forgotten_at_the_next_poll(store: Store, batched: bool) -> None:
    """The deletion bypasses this server (another replica's QueueService): the feed's
    next poll notices that events it holds are gone."""
    async with running(store, secured(), watch_poll_seconds=0.05) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp, client(srv, VISION) as vision:
        await _secret_then_gone(srv, admin, nlp)
        await asyncio.to_thread(store.queues.delete, "reused")
        await asyncio.to_thread(store.queues.create, Queue(name="reused", owners=("vision",)))
        polls = srv.jobs.feed.polls
        while srv.jobs.feed.polls < polls + 2:  # one poll that began after the deletion
            await asyncio.sleep(0.02)
        srv.jobs.queues.invalidate()  # what the cache's ttl does on another replica
        await _vision_sees(vision, batched)


async def test_a_recreated_queue_does_not_inherit_the_old_queues_round_counts(store: Store) -> None:
    """A round's per-queue counts are what a tenant sees of it (ListRounds); the old
    queue's went on showing to the new owner of its name. The round's totals stay (admins)."""
    async with running(store, secured()) as srv, client(srv, ADMIN) as admin, client(srv, VISION) as vision:
        await admin.create_queue(queue("reused", "nlp"))
        now = datetime.now(UTC)
        counted = store.audit.record_round(RoundRecord(
            started_at=now, ended_at=now, pending_count=7, unplaced_count=7,
            queue_counts=(QueueCounts("reused", pending=7, unplaced=7),)), ()).round_id
        await admin.delete_queue("reused")
        await admin.create_queue(queue("reused", "vision"))
        assert list((await vision.list_rounds()).rounds) == []
        [kept] = (await admin.list_rounds()).rounds
        assert (kept.round_id, kept.pending_jobs) == (counted, 7)


async def test_a_page_read_while_the_queue_is_deleted_is_not_published(store: Store) -> None:
    """The poller reads a page in a worker thread. A queue deleted (and ``forget`` called)
    while that page is in flight: the page, read before the deletion, holds the queue's
    events, and publishing it put them back behind ``forget``, for whoever owns the name
    next. It is read again instead. One poll is driven by hand (no background poller), so
    the page is held exactly while the queue goes."""
    import threading

    from federation.service.event_feed import EventFeed
    from federation.wire.convert import job_from_proto

    store.queues.create(Queue(name="reused", owners=("nlp",)))
    feed = EventFeed(store, poll_seconds=0.02, coalesce_seconds=0)
    feed._floor = feed._cursor = store.jobs.latest_event_id()  # what start() does, without its poller
    read, release = threading.Event(), threading.Event()
    original = feed._poll_read

    def held_read(floor: int, cursor: int, held: int) -> tuple[bool, list[Any], int]:
        result = original(floor, cursor, held)
        read.set()
        release.wait(10)
        return result

    feed._poll_read = held_read  # type: ignore[method-assign]
    secret = spec("nlp-secret", "reused")
    secret.labels["project"] = "top-secret-model"
    store.jobs.submit(job_from_proto(secret, "spec"))
    store.jobs.cancel("nlp-secret")
    poll = asyncio.create_task(feed._poll_once())
    try:
        assert await asyncio.to_thread(read.wait, 10)
        store.queues.delete("reused")  # its finished jobs and their events go with it
        feed.forget("reused")
        release.set()
        await poll
        # What a watcher is served now, before any later poll:
        assert [item for item in feed._after(0) if item.queue == "reused"] == []
    finally:
        release.set()
        await feed.close()
