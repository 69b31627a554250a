"""The central's leader lease on real PostgreSQL (store/leases.py, service/leadership.py):
one holder at a time, epochs that grow, a fence that refuses an old leader's writes and
makes a new leader wait for the old one's open transaction; two in-process replicas
(leader SERVING, standby NOT_SERVING and refusing writes and agent streams, a graceful
hand-over); SQLite refused."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import grpc
import grpc.aio
import pytest
from fleetkit import eventually
from grpc_health.v1 import health_pb2
from servicekit import ADMIN, EAST, NLP, client, secured, spec
from sqlalchemy import text

from federation.cli.main import main as federation_main
from federation.domain.queues import Queue
from federation.service.health import AGENTS, AUDIT, CLUSTERS, JOBS
from federation.service.leadership import LeaseTimings
from federation.service.server import build_server
from federation.store import Store
from federation.store.leases import LeaseFence, LeaseRepository, NotLeader
from federation.v1 import agent_pb2_grpc

pytestmark = pytest.mark.postgres
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def test_one_holder_epochs_grow_and_a_released_lease_is_taken_at_once(pg_store: Store) -> None:
    leases = LeaseRepository(pg_store.db)
    assert leases.try_acquire("a", 30) == 1
    assert leases.try_acquire("b", 30) is None  # held
    assert leases.renew("a", 1, 30)
    assert not leases.renew("b", 1, 30)  # not the holder
    leases.release("a", 1)
    assert leases.try_acquire("b", 30) == 2
    assert not leases.renew("a", 1, 30)  # a's term is over for good
    state = leases.read()
    assert state is not None and (state.holder, state.epoch, state.expired) == ("b", 2, False)


def test_an_expired_lease_is_taken_and_the_old_leader_cannot_write(pg_store: Store) -> None:
    leases = LeaseRepository(pg_store.db)
    assert leases.try_acquire("old", 0.3) == 1
    old_epoch = {"epoch": 1}
    pg_store.db.fence = LeaseFence(lambda: old_epoch["epoch"])
    pg_store.queues.create(Queue("before"))  # the leader writes
    time.sleep(0.4)
    assert leases.try_acquire("new", 30) == 2
    with pytest.raises(NotLeader, match="epoch 1 is over"):
        pg_store.queues.create(Queue("after"))
    old_epoch["epoch"] = 0  # a standby: refused before touching the database
    with pytest.raises(NotLeader, match="standby"):
        pg_store.queues.create(Queue("standby"))
    pg_store.db.fence = None
    assert [q.name for q in pg_store.queues.list().items] == ["before"]


def test_a_new_leader_waits_for_the_old_leaders_open_transaction(pg_store: Store) -> None:
    """The fence's share lock: the old round commits before the new term starts, never after."""
    pg_store.queues.create(Queue("research", weight=1))
    leases = LeaseRepository(pg_store.db)
    assert leases.try_acquire("old", 0.3) == 1
    pg_store.db.fence = LeaseFence(lambda: 1)
    events: list[tuple[str, float]] = []
    inside = threading.Event()

    def old_round() -> None:
        with pg_store.db.write() as session:  # passes the fence, holds the share lock
            inside.set()
            time.sleep(1.0)  # the lease expires meanwhile
            session.execute(text("UPDATE queues SET weight = 7 WHERE name = 'research'"))
        events.append(("old committed", time.monotonic()))

    thread = threading.Thread(target=old_round)
    thread.start()
    inside.wait(5)
    time.sleep(0.5)
    epoch = leases.try_acquire("new", 30)  # blocks on the share lock until the old round commits
    # Read the moment the new term starts: the old round's write is already there. (Clock
    # stamps taken in the two threads after the commit raced each other once in CI.)
    with pg_store.db.read() as session:
        weight_when_elected = session.execute(text("SELECT weight FROM queues WHERE name = 'research'")).scalar()
    thread.join()
    assert epoch == 2
    assert weight_when_elected == 7 and [e for e, _ in events] == ["old committed"]
    with pytest.raises(NotLeader):
        pg_store.queues.create(Queue("after"))
    pg_store.db.fence = None
    assert pg_store.queues.get("research").weight == 7  # the old round committed, before the new term


async def _status(port: int, service: str = "") -> int:
    from grpc_health.v1 import health_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service),
                                                                 timeout=5)
        return int(reply.status)


async def test_two_replicas_one_leads_the_standby_refuses_writes_and_agents_and_takes_over_on_stop(
        pg_store: Store) -> None:
    pg_store.queues.create(Queue("research", owners=("nlp",)))
    timings = LeaseTimings(3.0)
    first = await build_server(Store(pg_store.url), auth=secured(), leader_election=timings,
                               health_interval_seconds=0.2, round_debounce_seconds=0.05)
    await eventually(lambda: first.leadership.leading())
    second = await build_server(Store(pg_store.url), auth=secured(), leader_election=timings,
                                health_interval_seconds=0.2, round_debounce_seconds=0.05)
    try:
        await eventually(lambda: second.health.status() is not None)
        assert await _status(first.port) == SERVING
        assert await _status(second.port) == NOT_SERVING
        assert await _status(second.port, AGENTS) == NOT_SERVING
        assert await _status(second.port, JOBS) == NOT_SERVING
        assert await _status(second.port, CLUSTERS) == SERVING  # reads are served by a standby
        assert await _status(second.port, AUDIT) == SERVING

        async with client(second, NLP) as c:  # the standby: reads yes, writes no
            assert [q.name for q in await c.list_queues()] == ["research"]
            with pytest.raises(Exception, match="standby") as refused:
                await c.submit_job(spec("on-standby"))
            assert getattr(refused.value, "code", None) == grpc.StatusCode.UNAVAILABLE
        async with grpc.aio.insecure_channel(f"127.0.0.1:{second.port}") as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(metadata=(("authorization", f"Bearer {EAST}"),))  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
            # A standby refuses the stream before it reads anything, so nothing is written: a
            # hello written while the refusal ends the stream fails with the client's own
            # INTERNAL ("Failed execute_batch"), which then becomes the call's code.
            reply = None
            with contextlib.suppress(grpc.aio.AioRpcError):
                reply = await call.read()
            assert reply is None  # no answer but the refusal
            assert await call.code() == grpc.StatusCode.UNAVAILABLE and "standby" in (await call.details() or "")
        async with client(first, NLP) as c:
            assert (await c.submit_job(spec("on-leader"))).created

        started = time.monotonic()
        await first.stop(grace=1.0)  # graceful: the lease is released, no waiting for expiry
        await eventually(lambda: second.leadership.leading(), timeout=timings.seconds + 5)
        handover = time.monotonic() - started
        assert handover < timings.seconds  # released, so well inside one lease
        await eventually(lambda: second.health.status() == SERVING)
        assert await _status(second.port) == SERVING
        async with client(second, ADMIN) as c:
            assert (await c.submit_job(spec("after-handover"))).created
    finally:
        await first.stop(grace=1.0)
        await second.stop(grace=1.0)
        first.store.dispose()
        second.store.dispose()


def test_sqlite_refuses_leader_election(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code = federation_main(["serve", "--db", f"sqlite:///{tmp_path / 'f.db'}", "--leader-election"])
    assert code == 2
    assert "--leader-election needs PostgreSQL" in capsys.readouterr().err


def test_lease_seconds_out_of_range_is_refused(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = federation_main(["serve", "--db", pg_url, "--leader-election", "--lease-seconds", "0.5"])
    assert code == 2
    assert "--lease-seconds: must be between" in capsys.readouterr().err
