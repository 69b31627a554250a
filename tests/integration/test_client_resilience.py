"""FederationClient across a server restart (issue 10, "clients recover slowly").

Idempotent calls that fail UNAVAILABLE are re-sent with bounded, jittered back-off, the
channel reconnects within ``Reconnect.max_backoff_ms``, and a submission retried after a
lost answer stores the job once (created=False the second time).
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from servicekit import counts, queue, spec

from federation.client import NO_RETRY, FederationClient, Reconnect, Retry, ServiceError
from federation.service.server import build_server
from federation.store import Store


def test_retry_delays_are_bounded_and_jittered() -> None:
    delays = Retry(attempts=6, initial_backoff=0.1, max_backoff=0.5, jitter=0.2).delays()
    assert len(delays) == 5
    assert all(0.08 <= d <= 0.6 for d in delays) and max(delays) <= 0.5 * 1.2
    assert NO_RETRY.delays() == []
    with pytest.raises(ValueError):
        Retry(attempts=0)
    assert ("grpc.max_reconnect_backoff_ms", 2000) in Reconnect().options()


async def test_idempotent_calls_ride_out_a_server_restart(store: Store) -> None:
    first = await build_server(store, listen="127.0.0.1:0", control_loop=False)
    port = first.port
    retry = Retry(attempts=12, initial_backoff=0.1, max_backoff=0.5)
    async with FederationClient(f"127.0.0.1:{port}", timeout=5, retry=retry) as c, \
            FederationClient(f"127.0.0.1:{port}", timeout=5, retry=NO_RETRY) as once:
        await c.create_queue(queue("research"))
        made = await c.submit_job(spec("j1"))
        assert made.created
        await first.stop(grace=1.0)
        with pytest.raises(ServiceError) as err:
            await once.get_job("j1")
        assert err.value.code == grpc.StatusCode.UNAVAILABLE

        async def restart() -> object:
            await asyncio.sleep(1.0)
            return await build_server(store, listen=f"127.0.0.1:{port}", control_loop=False)

        restarting = asyncio.create_task(restart())
        try:
            again = await asyncio.wait_for(c.submit_job(spec("j1")), 30)  # re-sent until the server is back
            assert not again.created and again.job.id == "j1"
            assert counts(store)[0] == 1
            assert (await c.get_job("j1")).id == "j1"
        finally:
            second = await restarting
            await second.stop(grace=1.0)  # type: ignore[attr-defined]  # the restarted server, typed object by the task


async def test_non_idempotent_calls_are_not_retried(store: Store) -> None:
    srv = await build_server(store, listen="127.0.0.1:0", control_loop=False)
    port = srv.port
    await srv.stop(grace=1.0)
    asked: list[int] = []

    class Counting(Retry):
        def delays(self) -> list[float]:
            asked.append(1)
            return super().delays()

    async with FederationClient(f"127.0.0.1:{port}", timeout=5, retry=Counting(attempts=3)) as c:
        with pytest.raises(ServiceError) as err:
            await c.create_queue(queue("research"))
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
        assert asked == []  # sent once: a retry after a lost success would answer ALREADY_EXISTS
        with pytest.raises(ServiceError):
            await c.list_queues()
        assert asked == [1]
