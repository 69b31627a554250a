"""SubmitJob's group commit over real gRPC, against SQLite and PostgreSQL.

Calls that share a store transaction must still each get their own answer with the codes
single calls get, and only after the commit; a database failure must fail every call of
its batch and store nothing. To put chosen calls in one batch, the batch size is set to
the number of calls and the delay to an hour, so the batch goes exactly when all arrived.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from servicekit import client, counts, queue, running, spec

from federation.client import ServiceError
from federation.service.jobs import SubmitBatching
from federation.store import Store, Unavailable
from federation.v1 import jobs_pb2

HOUR = 3600.0


async def _outcomes(calls: list[Any]) -> list[jobs_pb2.SubmitJobResponse | ServiceError]:
    results: list[jobs_pb2.SubmitJobResponse | ServiceError] = []
    for r in await asyncio.gather(*calls, return_exceptions=True):
        if not isinstance(r, jobs_pb2.SubmitJobResponse | ServiceError):
            raise r
        results.append(r)
    return results


async def test_many_concurrent_submissions_share_transactions(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await c.create_queue(queue("research"))
        results = await _outcomes([c.submit_job(spec(f"job-{i}")) for i in range(200)])
        assert all(isinstance(r, jobs_pb2.SubmitJobResponse) and r.created for r in results)
        assert srv.jobs.submissions.batches < 200  # coalesced
    assert len(store.jobs.list(page_size=1000).items) == 200
    assert len(store.jobs.events_since(0, limit=1000).events) == 200


async def test_one_batch_answers_each_call_with_its_own_code(store: Store) -> None:
    async with running(store, submit_batching=SubmitBatching(max_items=1, max_delay_seconds=HOUR)) as srv, \
            client(srv) as c:
        await c.create_queue(queue("research"))
        await c.create_queue(queue("doomed"))
        await c.submit_job(spec("old"))  # a batch of one, stored before the mixed batch
        await srv.jobs.queues.get("doomed")  # the service's queue cache has it...
        store.queues.delete("doomed")  # ...when it is deleted behind the service's back
        srv.jobs.submissions.max_items = 6
        results = await _outcomes([
            c.submit_job(spec("new-1")),
            c.submit_job(spec("old")),                     # identical
            c.submit_job(spec("old", replicas=5)),         # different spec
            c.submit_job(spec("new-2")),
            c.submit_job(spec("new-2")),                   # identical to the one created in this batch
            c.submit_job(spec("lost", queue="doomed")),    # the store says: no such queue
        ])
        assert srv.jobs.submissions.batches == 2
    kinds = [(r.created, r.job.id) if isinstance(r, jobs_pb2.SubmitJobResponse) else r.code for r in results]
    assert kinds == [(True, "new-1"), (False, "old"), grpc.StatusCode.ALREADY_EXISTS, (True, "new-2"),
                     (False, "new-2"), grpc.StatusCode.INVALID_ARGUMENT]
    lost = results[5]
    assert isinstance(lost, ServiceError) and lost.message.startswith("spec.queue") and "doomed" in lost.message
    assert {r.name for r in store.jobs.list().items} == {"old", "new-1", "new-2"}


async def test_a_database_failure_fails_every_call_of_the_batch(store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(store, submit_batching=SubmitBatching(max_items=1, max_delay_seconds=HOUR)) as srv, \
            client(srv) as c:
        await c.create_queue(queue("research"))
        await c.submit_job(spec("warm"))  # the queue cache holds "research" now
        srv.jobs.submissions.max_items = 4
        before = counts(store)

        def database_gone(items: object) -> object:
            raise Unavailable("database unavailable: connection refused")

        monkeypatch.setattr(store.jobs, "submit_many", database_gone)
        results = await _outcomes([c.submit_job(spec(f"job-{i}")) for i in range(4)])
        assert all(isinstance(r, ServiceError) and r.code == grpc.StatusCode.UNAVAILABLE for r in results)
        monkeypatch.undo()
        assert counts(store) == before
        again = await _outcomes([c.submit_job(spec(f"job-{i}")) for i in range(4)])  # a retry stores them
        assert all(isinstance(r, jobs_pb2.SubmitJobResponse) and r.created for r in again)
