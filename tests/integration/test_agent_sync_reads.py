"""A reconnect costs a few store reads, not one per Work (over real gRPC, SQLite and
PostgreSQL; docs/design/work-protocol.md).

The reviewer's measure: the sync after each hello read every Work's job with its own
query. A cluster running 1,000 jobs cost 1,000 round trips per reconnect (1 s on SQLite,
2 s on PostgreSQL), and ten agents' reconnects at once took 10-15 s of the thread pool
every RPC shares; a storm of reconnects from a looping agent multiplied it. The jobs are
now read in chunks of ``SYNC_READ_CHUNK``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc.aio
import pytest
from servicekit import EAST, running, secured
from test_agent_stream_bounds import Stream

from federation.domain import Job, Queue, Resources, Task
from federation.service.agent_hub import SYNC_READ_CHUNK
from federation.store import Store
from federation.v1 import agent_pb2, agent_pb2_grpc

WORKS = SYNC_READ_CHUNK + 1


def _works_on_east(store: Store, n: int) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    for i in range(n):
        store.jobs.submit(Job(name=f"j{i}", queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
        store.jobs.transition(f"j{i}", "placed", cluster="east", hypernode="leaf", tier=1)
        store.works.create(f"j{i}", "east", {"cluster": "east", "hypernode": "leaf", "tier": 1,
                                             "pods": [["worker", 0, "n0"]]})


def _counted(calls: list[int], fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return fn(*args, **kwargs)
    return wrapper


async def test_a_sync_reads_the_jobs_of_its_works_in_chunks(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    _works_on_east(store, WORKS)
    reads: list[int] = []
    monkeypatch.setattr(store.jobs, "get", _counted(reads, store.jobs.get))
    monkeypatch.setattr(store.jobs, "get_many", _counted(reads, store.jobs.get_many))
    async with running(store, secured(), control_loop=True) as srv, \
            grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
            metadata=(("authorization", f"Bearer {EAST}"),))
        await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="east", agent_id="a", epoch=1)))
        jobs: set[str] = set()
        while (reply := await Stream(call).next("work", "sync")).WhichOneof("body") == "work":
            jobs.add(reply.work.job)
        call.cancel()
    assert len(jobs) == WORKS and reply.ack.id == str(WORKS)
    assert len(reads) <= 2, len(reads)
