"""A queue's status is a view over every active job: one tenant reading it in a loop must
not make the server decode the whole federation's jobs per call. Measured before the fix
(3,000 active jobs, SQLite, 2 cores): 16 concurrent GetQueue loops by one tenant on its own
queue made another tenant's SubmitJob p50 go from 8 ms to 2.6 s."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from servicekit import ADMIN, NLP, VISION, client, queue, running, secured, spec

from federation.store import Store


async def test_concurrent_and_repeated_queue_reads_share_one_status_computation(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = 0
    in_states = store.jobs.in_states

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return in_states(*args, **kwargs)

    monkeypatch.setattr(store.jobs, "in_states", counting)
    async with running(store, secured()) as srv, client(srv, ADMIN) as admin, \
            client(srv, NLP) as nlp, client(srv, VISION) as vision:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await admin.create_queue(queue("vision-q", "vision"))
        await nlp.submit_job(spec("nlp-1", "nlp-q"))
        await asyncio.sleep(1.2)  # what the queue creations computed is older than the shortest reuse
        reads = 0
        views, _ = await asyncio.gather(asyncio.gather(*(vision.get_queue("vision-q") for _ in range(16))),
                                        asyncio.gather(*(vision.list_queues() for _ in range(16))))
        for _ in range(10):
            await vision.get_queue("vision-q")
        assert reads == 1, reads
        assert all(v.status.pending_jobs == 0 for v in views)
        assert (await nlp.get_queue("nlp-q")).status.pending_jobs == 1  # shared inputs, each caller's own view
        assert not (await vision.get_queue("nlp-q")).HasField("status")
