"""The resumable job event feed (WatchJobs): exact resumption, filters, commit-order gaps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from federation.domain import Job, Queue, Resources, Task
from federation.store import JobEvent, Store


def make_job(name: str, queue: str = "research") -> Job:
    return Job(name=name, queue=queue, tasks=(Task("worker", 1, Resources.of(gpu=1)),))


@pytest.fixture
def busy(store: Store) -> Store:
    store.queues.create(Queue("research"))
    store.queues.create(Queue("prod"))
    for i in range(6):
        store.jobs.submit(make_job(f"job-{i}", "research" if i % 2 == 0 else "prod"))
    store.jobs.transition("job-0", "placed", cluster="c1")
    store.jobs.transition("job-1", "placed", cluster="c1")
    store.jobs.cancel("job-2")
    return store


def test_reading_in_small_pages_resumes_exactly(busy: Store) -> None:
    everything = busy.jobs.events_since(0, limit=1000).events
    assert len(everything) == 9
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    collected: list[JobEvent] = []
    cursor = 0
    while True:
        page = busy.jobs.events_since(cursor, limit=2)
        if not page.events:
            break
        collected += page.events
        cursor = page.cursor
    assert collected == list(everything)


def test_a_watcher_resuming_from_the_middle_sees_only_later_events(busy: Store) -> None:
    first = busy.jobs.events_since(0, limit=4)
    busy.jobs.transition("job-0", "dispatched")
    rest = busy.jobs.events_since(first.cursor).events
    assert [(e.job, e.type) for e in rest][-1] == ("job-0", "Dispatched")
    assert {e.id for e in rest}.isdisjoint(e.id for e in first.events)
    assert len(first.events) + len(rest) == 10


def test_filters_by_job_and_queue_still_advance_the_cursor(busy: Store) -> None:
    prod = busy.jobs.events_since(0, queues=["prod"])
    assert {e.queue for e in prod.events} == {"prod"}
    assert prod.cursor == busy.jobs.latest_event_id()  # skipped research events are not re-read
    one = busy.jobs.events_since(0, job="job-2").events
    assert [e.type for e in one] == ["Submitted", "Cancelled"]
    assert one[-1].state == "cancelled"


def test_an_empty_feed_keeps_the_cursor(store: Store) -> None:
    page = store.jobs.events_since(0)
    assert (page.events, page.cursor) == ((), 0)
    assert store.jobs.latest_event_id() == 0


def test_event_times_are_timezone_aware_utc(busy: Store) -> None:
    event = busy.jobs.events_since(0).events[0]
    assert event.time.tzinfo is not None
    assert event.time.utcoffset() == UTC.utcoffset(datetime(2026, 1, 1))


def test_an_uncommitted_earlier_event_holds_back_later_ones(pg_store: Store, clock: Any) -> None:
    """PostgreSQL assigns ids before commit: id N+1 may commit first. The feed must not
    deliver N+1 (and move the cursor past N) until N commits or is known to be gone."""
    pg_store.queues.create(Queue("research"))
    pg_store.jobs.submit(make_job("early"))
    base = pg_store.jobs.latest_event_id()
    slow = create_engine(pg_store.url)
    try:
        with slow.connect() as conn:
            tx = conn.begin()
            conn.execute(
                text("INSERT INTO job_events (job, queue, type, state, message, time) "
                     "VALUES ('early', 'research', 'Unschedulable', 'pending', 'slow writer', :t)"),
                {"t": clock.now},
            )
            pg_store.jobs.submit(make_job("late"))  # takes the next id and commits first
            held = pg_store.jobs.events_since(base)
            assert held.events == ()
            assert held.cursor == base
            tx.commit()
        released = pg_store.jobs.events_since(base).events
        assert [(e.job, e.type) for e in released] == [("early", "Unschedulable"), ("late", "Submitted")]
    finally:
        slow.dispose()


def test_a_rolled_back_gap_is_skipped_once_it_has_settled(pg_store: Store) -> None:
    pg_store.queues.create(Queue("research"))
    pg_store.jobs.submit(make_job("a"))
    base = pg_store.jobs.latest_event_id()
    burner = create_engine(pg_store.url)
    try:
        with burner.begin() as conn:  # burn an id, as a rolled-back transaction would
            conn.execute(text("SELECT nextval(pg_get_serial_sequence('job_events', 'id'))"))
    finally:
        burner.dispose()
    pg_store.jobs.submit(make_job("b"))
    assert pg_store.jobs.events_since(base).events == ()  # notes who may still fill the gap: nobody
    after = pg_store.jobs.events_since(base)
    assert [e.job for e in after.events] == ["b"]
    assert after.cursor == after.events[-1].id == base + 2


def test_a_gap_left_by_a_deleted_queue_does_not_hold_watchers_for_a_clock(store: Store) -> None:
    """Deleting a queue deletes its jobs' events, leaving a gap in the ids. No writer can
    still commit into it: SQLite serialises writers (a reader never sees a later id before
    an earlier one commits), and on PostgreSQL no transaction holds the id sequence. So
    the events after it are delivered at once — before, SQLite held every watcher back
    until the event after the gap was ``settle_seconds`` old (the test clock never is)."""
    store.queues.create(Queue("old"))
    store.queues.create(Queue("research"))
    store.jobs.submit(make_job("gone", "old"))
    store.jobs.cancel("gone")
    store.queues.delete("old")
    store.jobs.submit(make_job("fresh"))
    store.jobs.events_since(0)  # PostgreSQL: the first read sees the gap and notes who may fill it
    assert [e.job for e in store.jobs.events_since(0).events] == ["fresh"]
