"""An event id still in flight behind a later event stamped long ago is never skipped.

Writers stamp an event's time before they wait for row locks (up to ``lock_timeout``,
10 s), so the event after a gap can look older than any settling time while the
transaction holding the id before it is still open. The feed used to call such a gap
settled and move its cursor past the id for good (a live WatchJobs lost it; a new watch
from 0 saw it). A gap now settles only when every transaction that could commit a
missing id has ended, whatever the clocks say.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import create_engine, text

from federation.domain import Job, Queue, Resources, Task
from federation.store import Store

INSERT = text("INSERT INTO job_events (job, queue, type, state, message, time) "
              "VALUES (:job, 'research', :type, 'pending', :message, :t) RETURNING id")


OLD_RULE_SECONDS = 5  # the clock rule this replaced: a gap "settled" once the event after it was this old


def make_job(name: str) -> Job:
    return Job(name=name, queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),))


def test_an_old_stamped_event_does_not_settle_an_in_flight_gap(pg_store: Store, clock: Any) -> None:
    pg_store.queues.create(Queue("research"))
    pg_store.jobs.submit(make_job("x"))
    pg_store.jobs.submit(make_job("y"))
    base = pg_store.jobs.latest_event_id()
    stamped_long_ago = clock.now - timedelta(seconds=OLD_RULE_SECONDS + 60)
    writers = create_engine(pg_store.url)
    try:
        with writers.connect() as slow, writers.connect() as late:
            held = slow.begin()  # takes base+1 and stays open
            slow_id = slow.execute(INSERT, {"job": "y", "type": "Waiting", "message": "in flight",
                                            "t": clock.now}).scalar_one()
            with late.begin():  # base+2, its time stamped before a long lock wait: commits first
                late_id = late.execute(INSERT, {"job": "x", "type": "Cancelled", "message": "slow cancel",
                                                "t": stamped_long_ago}).scalar_one()
            assert (slow_id, late_id) == (base + 1, base + 2)
            for _ in range(3):  # however often the reader looks, and however late it is
                page = pg_store.jobs.events_since(base)
                assert (page.events, page.cursor) == ((), base)
                clock.advance(OLD_RULE_SECONDS + 1)
            held.commit()
        delivered = pg_store.jobs.events_since(base)
        assert [(e.id, e.message) for e in delivered.events] == [(base + 1, "in flight"), (base + 2, "slow cancel")]
        assert delivered.cursor == base + 2
    finally:
        writers.dispose()


def test_a_rolled_back_gap_settles_once_its_writer_has_ended(pg_store: Store, clock: Any) -> None:
    """No clock needed: the next read after the writer ended lets the later events through."""
    pg_store.queues.create(Queue("research"))
    pg_store.jobs.submit(make_job("a"))
    base = pg_store.jobs.latest_event_id()
    writers = create_engine(pg_store.url)
    try:
        with writers.connect() as doomed:
            tx = doomed.begin()
            doomed.execute(INSERT, {"job": "a", "type": "Waiting", "message": "rolled back", "t": clock.now})
            pg_store.jobs.submit(make_job("b"))
            assert pg_store.jobs.events_since(base).events == ()
            assert pg_store.jobs.events_since(base).events == ()  # its writer is still open
            tx.rollback()
        after = pg_store.jobs.events_since(base)  # the first read after it ended proves it gone
        assert [e.job for e in after.events] == ["b"]
        assert after.cursor == base + 2
    finally:
        writers.dispose()
