"""The database briefly gone (real PostgreSQL): calls fail as Unavailable, never hang or
leak driver errors, and the store recovers by itself with no data lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from federation.domain import Job, Queue, Resources, Task
from federation.store import Store, Submitted, Unavailable
from federation.store import migrate as migrations

pytestmark = pytest.mark.postgres


def make_job(name: str) -> Job:
    return Job(name=name, queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),))


def _terminate_connections(url: str, *, wait: bool = True) -> int:
    """Terminate every other backend of the database and wait until they have exited.

    Why wait: ``pg_terminate_backend`` only signals. The store promises that a connection
    the server dropped while it sat in the pool is replaced unnoticed; one that is still
    being dropped when a call starts fails that call (``Unavailable``, once).
    """
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            pids = [pid for (pid,) in conn.execute(text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"))]
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM unnest(CAST(:pids AS int[])) AS t(pid)"),
                         {"pids": pids})
            for _ in range(500 if wait else 0):
                if not conn.scalar(text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(CAST(:pids AS int[]))"),
                                   {"pids": pids}):
                    break
                time.sleep(0.01)
            return len(pids)
    finally:
        admin.dispose()


def _warm(store: Store) -> None:
    store.ping()
    store.jobs.list()


@pytest.fixture
def seeded(pg_store: Store) -> Iterator[Store]:
    pg_store.queues.create(Queue("research"))
    for i in range(5):
        pg_store.jobs.submit(make_job(f"job-{i}"))
    yield pg_store


def test_terminated_connections_are_replaced_transparently(seeded: Store) -> None:
    _warm(seeded)
    assert _terminate_connections(seeded.url) >= 1
    assert len(seeded.jobs.list().items) == 5  # pre-ping found the dead connection and reconnected
    assert seeded.jobs.submit(make_job("after")).created


def test_connections_dropped_under_calls_cost_at_most_one_unavailable(seeded: Store, clock: Any) -> None:
    """Backends killed without waiting: a call may meet one still dying, once; then all recover."""
    store = Store(seeded.url, clock=clock, pool_size=3, max_overflow=0)
    try:
        with ThreadPoolExecutor(3) as pool:  # three pooled connections, each used
            list(pool.map(lambda _: store.jobs.list(), range(6)))
        _terminate_connections(store.url, wait=False)
        failures = 0
        for i in range(6):
            try:
                store.jobs.get(f"job-{i % 5}")
            except Unavailable:
                failures += 1
        assert failures <= 1
        outcomes = store.jobs.submit_many([(make_job("after-1"), ""), (make_job("after-2"), "")])
        assert all(isinstance(o, Submitted) and o.created for o in outcomes)
    finally:
        store.dispose()


def test_without_pre_ping_the_first_call_is_unavailable_and_the_next_recovers(seeded: Store, clock: Any) -> None:
    store = Store(seeded.url, clock=clock, pre_ping=False, pool_size=1, max_overflow=0)
    try:
        _warm(store)
        _terminate_connections(store.url)
        with pytest.raises(Unavailable, match=r"connection lost|unavailable"):
            store.jobs.get("job-0")
        assert store.jobs.get("job-0").state == "pending"
    finally:
        store.dispose()


def test_server_stopped_then_back(scratch_postgres: Any, clock: Any) -> None:
    url = scratch_postgres.url
    migrations.upgrade(url)
    store = Store(url, clock=clock)
    try:
        store.queues.create(Queue("research"))
        for i in range(3):
            store.jobs.submit(make_job(f"job-{i}"))
        _warm(store)

        scratch_postgres.stop()
        started = time.monotonic()
        with pytest.raises(Unavailable):
            store.ping()
        with pytest.raises(Unavailable):
            store.jobs.submit(make_job("while-down"))
        with pytest.raises(Unavailable):
            store.jobs.submit_many([(make_job("while-down-1"), ""), (make_job("while-down-2"), "")])
        with pytest.raises(Unavailable):
            store.jobs.get("job-0")
        assert time.monotonic() - started < 30  # refused promptly, never hangs

        scratch_postgres.start()
        assert scratch_postgres.url == url  # same port: clients keep their URL
        store.ping()
        assert [r.name for r in store.jobs.list().items] == ["job-0", "job-1", "job-2"]  # nothing half-stored
        assert store.jobs.submit(make_job("after")).created
        assert store.jobs.transition("job-0", "placed", cluster="east").state == "placed"
    finally:
        store.dispose()
