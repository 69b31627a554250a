"""The database briefly gone under open watches (real PostgreSQL, real gRPC): the feed keeps
retrying, and once the database is back every event reaches the watcher, none twice."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from servicekit import ADMIN, NLP, client, queue, running, secured, spec

from federation.client import ServiceError
from federation.store import Store
from federation.store import migrate as migrations

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("batched", [True, False], ids=["WatchJobBatches", "WatchJobs"])
async def test_a_watch_outlives_a_database_outage_without_losing_an_event(
        scratch_postgres: Any, batched: bool) -> None:
    url = scratch_postgres.url
    await asyncio.to_thread(migrations.upgrade, url)
    store = Store(url)
    try:
        async with running(store, secured(), watch_poll_seconds=0.05) as srv, \
                client(srv, ADMIN) as admin, client(srv, NLP) as nlp:
            await admin.create_queue(queue("nlp-q", "nlp"))
            seen: list[tuple[int, str, int]] = []

            async def watch() -> None:
                async for ev in nlp.watch_jobs(0, "nlp-q", batched=batched):
                    seen.append((ev.event_id, ev.job.id, ev.type))
                    if ev.job.id == "after":
                        return

            watching = asyncio.create_task(watch())
            await nlp.submit_job(spec("before", "nlp-q"))
            for _ in range(400):
                if seen:
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(scratch_postgres.stop)
            await asyncio.sleep(1.0)  # the feed polls (and fails) meanwhile
            await asyncio.to_thread(scratch_postgres.start)
            for _ in range(100):  # the first calls after the restart may still meet a dropped connection
                try:
                    await nlp.submit_job(spec("after", "nlp-q"))
                    break
                except ServiceError as err:  # UNAVAILABLE, once per dropped pooled connection
                    assert err.code == grpc.StatusCode.UNAVAILABLE, err
                    await asyncio.sleep(0.1)
            await asyncio.wait_for(watching, 60)
            ids = [i for i, _, _ in seen]
            assert ids == sorted(set(ids)), seen  # in order, none twice
            assert [j for _, j, _ in seen] == ["before", "after"], seen
    finally:
        store.dispose()
