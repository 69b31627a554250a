"""The watch feed's memory is bounded in bytes, not only in events: an event carries its
job's spec (up to 1 MiB, templates included), so 4,096 buffered events of a tenant's
biggest jobs held about 8 GiB (measured: 60 such events, 114 MiB), and each watcher
replaying history rendered a page of 500 of them at once (about 1 GiB). Real store."""

from __future__ import annotations

import asyncio
import json

from federation.domain.queues import Queue
from federation.service.event_feed import EventFeed
from federation.store import Store
from federation.v1 import jobs_pb2, types_pb2
from federation.wire.convert import job_from_proto

MIB = 1024 * 1024


def _big(name: str) -> types_pb2.JobSpec:
    """A job whose spec is about 1 MiB: four tasks with 250 KB pod templates."""
    template = json.dumps({"metadata": {"annotations": {"pad": "x" * 250_000}},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    return types_pb2.JobSpec(name=name, queue="big", tasks=[
        types_pb2.TaskSpec(name=f"t{i}", replicas=1, resources={"cpu": "1"}, template_json=template)
        for i in range(4)])


async def test_the_buffer_and_a_replayed_page_stay_within_their_byte_budgets(store: Store) -> None:
    store.queues.create(Queue(name="big"))
    feed = EventFeed(store, poll_seconds=0.02, coalesce_seconds=0, capacity_bytes=12 * MIB, page_bytes=6 * MIB)
    await feed.start()
    try:
        names = [f"big-{i:02}" for i in range(12)]
        for name in names:  # two events each, ~2 MiB apiece as the feed holds them
            store.jobs.submit(job_from_proto(_big(name), "spec"))
            store.jobs.cancel(name)
        feed.wake()
        for _ in range(500):
            if feed.cursor == store.jobs.latest_event_id():
                break
            await asyncio.sleep(0.02)
        assert feed.held_bytes <= 12 * MIB, feed.held_bytes
        assert feed.held_bytes > 6 * MIB  # the newest events are still served from memory

        items, cursor = await asyncio.to_thread(feed._read_page, 0, None)  # what a replaying watcher reads
        assert sum(i.size for i in items) <= 6 * MIB + 3 * MIB and 0 < cursor < feed.cursor

        seen: list[tuple[int, str]] = []  # from event 0: the store, then memory; each event once, in order
        cursor = 0
        while cursor < feed.cursor:
            batch, cursor = await feed.next_batch(cursor, None)
            seen.extend((i.id, jobs_pb2.JobEvent.FromString(i.wire).job.id) for i in batch)
        assert [i for i, _ in seen] == sorted({i for i, _ in seen})
        assert [job for _, job in seen] == [n for n in names for _ in range(2)]
    finally:
        await feed.close()
