"""Jobs: idempotent submission, reads, cancellation, state changes and the event feed.

Idempotency rule: a job name is unique across the federation. Submitting a name that
exists with the same queue and the same spec digest returns the stored job with
``created=False`` (a retried RPC, a CI pipeline re-running); a different queue or spec
is ``AlreadyExists``. The digest covers the canonical spec, so field order or a
re-serialisation by a client library does not matter.

Submission is the hot path and is batched: ``submit_many`` (``jobs_submit``) stores many
jobs in one transaction (on PostgreSQL one statement), and ``submit`` is a batch of one.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Collection, Sequence

from sqlalchemy import and_, func, or_, select, text
from sqlalchemy.orm import Session

from federation.domain.jobs import Job
from federation.domain.states import ACTIVE_WORK_STATES, JobState
from federation.store import paging
from federation.store.codec import digest_of, job_to_json
from federation.store.engine import Database
from federation.store.errors import AlreadyExists, Conflict, NotFound, WorkInactive
from federation.store.jobs_submit import Item, Outcome, conflict, submit_many
from federation.store.lifecycle import (
    add_event,
    event_record,
    job_record,
    lock_job,
    move,
    touch,
    withdraw_works,
)
from federation.store.models import JobEventRow, JobRow, QueueRow, WorkRow
from federation.store.records import EventPage, JobRecord, Page, QueueUsage, Submitted
from federation.store.reported_events import add_reported_events, check_reporter


def _check_version(row: JobRow, expected: int | None) -> None:
    if expected is not None and row.version != expected:
        raise Conflict(f"job {row.name!r} changed (version {row.version}, expected {expected}); re-read and retry",
                       race=True)


def _check_work(session: Session, job: str, work_id: int | None) -> None:
    """Refuse (``WorkInactive``) unless ``work_id`` is still an active Work of ``job``.

    Called with the job row locked: every writer that withdraws a job's Work (a new
    placement, a re-plan, preemption, failover, cancel) locks the job first, so the Work
    cannot be withdrawn between this check and the caller's change. Why: an agent's report
    is about one Work; read outside this transaction, the check raced a re-placement and
    a stale report failed the job running under its next Work. The Work row is read
    share-locked (lock order job, then work, as everywhere).
    """
    if work_id is None:
        return
    state = session.scalar(select(WorkRow.state).where(WorkRow.id == work_id, WorkRow.job == job)
                           .with_for_update(read=True))
    if state not in ACTIVE_WORK_STATES:
        raise WorkInactive(work_id, job, state or "gone")


class JobRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._gaps = _GapSettler()  # events_since: which PostgreSQL id gaps are gone for good

    # ------------------------------------------------------------------ submit

    def submit(self, job: Job, *, tenant: str = "") -> Submitted:
        """Store a new pending job, or return the identical existing one (see module doc).

        A batch of one: raises the refusal ``submit_many`` would return for it.
        """
        outcome = submit_many(self._db, [(job, tenant)])[0]
        if isinstance(outcome, Submitted):
            return outcome
        raise outcome

    def submit_many(self, items: Sequence[Item]) -> builtins.list[Outcome]:
        """Submit ``(job, tenant)`` pairs in one transaction; one outcome per item, in order.

        Outcomes are what submitting them one by one would give: ``Submitted`` (created or
        identical), or the ``AlreadyExists`` / ``NotFound`` that ``submit`` would raise,
        returned rather than raised so one refusal does not fail the batch. A database
        failure raises ``Unavailable`` and nothing of the batch is stored.
        """
        return submit_many(self._db, items)

    def conflict(self, job: Job) -> AlreadyExists | None:
        """The ``AlreadyExists`` that submitting ``job`` now would meet, without storing it:
        a dry run checks what a submission checks."""
        try:
            existing = self.get(job.name)
        except NotFound:
            return None
        return conflict(existing, job.name, job.queue, digest_of(job_to_json(job)))

    # ------------------------------------------------------------------ reads

    def get(self, name: str) -> JobRecord:
        with self._db.read() as session:
            row = session.get(JobRow, name)
            if row is None:
                raise NotFound("job", name)
            return job_record(row)

    def get_many(self, names: Collection[str]) -> dict[str, JobRecord]:
        """The jobs among ``names`` that exist, by name, in one query (the event feed renders
        a page of events with one round trip, not one per job)."""
        if not names:
            return {}
        with self._db.read() as session:
            rows = session.scalars(select(JobRow).where(JobRow.name.in_(list(names))))
            return {row.name: job_record(row) for row in rows}

    def list(
        self,
        *,
        queue: str | None = None,
        states: Collection[str] | None = None,
        tenant: str | None = None,
        visible_to: str | None = None,
        page_size: int | None = None,
        page_token: str = "",
    ) -> Page[JobRecord]:
        """Jobs in submission order, filtered, one page at a time.

        ``tenant`` keeps the jobs that tenant submitted; ``visible_to`` keeps the jobs in
        queues whose owners include that tenant or are empty (open queues).
        """
        size = paging.page_size(page_size)
        stmt = select(JobRow).order_by(JobRow.created_at, JobRow.name).limit(size + 1)
        if queue:
            stmt = stmt.where(JobRow.queue == queue)
        if states:
            stmt = stmt.where(JobRow.state.in_(list(states)))
        if tenant is not None:
            stmt = stmt.where(JobRow.tenant == tenant)
        if page_token:
            created, name = paging.decode("jobs", page_token, 2)
            after, name = paging.decode_time(created), paging.decode_text(name)
            stmt = stmt.where(or_(JobRow.created_at > after, and_(JobRow.created_at == after, JobRow.name > name)))
        with self._db.read() as session:
            if visible_to is not None:
                stmt = stmt.where(JobRow.queue.in_(_visible_queues(session, visible_to)))
            rows = list(session.scalars(stmt))
            items = tuple(job_record(r) for r in rows[:size])
        token = paging.encode("jobs", items[-1].created_at, items[-1].name) if len(rows) > size else ""
        return Page(items, token)

    def in_states(self, states: Collection[str], *, limit: int | None = None) -> builtins.list[JobRecord]:
        """Every job in ``states`` in submission order (the planner's pending/active view)."""
        stmt = select(JobRow).where(JobRow.state.in_(list(states))).order_by(JobRow.created_at, JobRow.name)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._db.read() as session:
            return [job_record(r) for r in session.scalars(stmt)]

    def pending_counts(self) -> dict[str, int]:
        """Pending jobs per queue (one GROUP BY over the (queue, state) index): how a
        bounded round splits its intake between queues without loading the backlog."""
        stmt = select(JobRow.queue, func.count()).where(JobRow.state == JobState.PENDING).group_by(JobRow.queue)
        with self._db.read() as session:
            return {str(q): int(n) for q, n in session.execute(stmt)}

    def pending_head(self, queue: str, limit: int) -> builtins.list[JobRecord]:
        """The first ``limit`` pending jobs of ``queue`` in the order the planner serves
        them (job priority, then submission time): only those rows are decoded, so a
        bounded round's read costs its intake, not the backlog."""
        if limit <= 0:
            return []
        priority = func.coalesce(JobRow.spec["priority"].as_integer(), 0)
        stmt = (select(JobRow).where(JobRow.queue == queue, JobRow.state == JobState.PENDING)
                .order_by(priority.desc(), JobRow.created_at, JobRow.name).limit(limit))
        with self._db.read() as session:
            return [job_record(r) for r in session.scalars(stmt)]

    def usage(self) -> builtins.list[QueueUsage]:
        """Job counts per queue and state (for QueueStatus)."""
        stmt = select(JobRow.queue, JobRow.state, func.count()).group_by(JobRow.queue, JobRow.state)
        counts: dict[str, dict[str, int]] = {}
        with self._db.read() as session:
            for queue, state, count in session.execute(stmt):
                counts.setdefault(queue, {})[state] = int(count)
        return [QueueUsage(q, c) for q, c in sorted(counts.items())]

    # ------------------------------------------------------------------ writes

    def cancel(self, name: str, reason: str = "cancelled") -> JobRecord:
        """Cancel a job that has not finished, withdrawing its active works in the same transaction.

        Cancelling an already-cancelled job returns it unchanged (a retried cancel is not
        an error); cancelling a succeeded or failed job is ``IllegalTransition``.
        """
        now = self._db.now()
        with self._db.write() as session:
            row = lock_job(session, name)
            if row.state == JobState.CANCELLED:
                return job_record(row)
            move(session, row, JobState.CANCELLED, now, reason=reason)
            withdraw_works(session, now, jobs=[name], message=reason)
            return job_record(row)

    def transition(
        self,
        name: str,
        to_state: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        cluster: str | None = None,
        hypernode: str | None = None,
        tier: int | None = None,
        expected_version: int | None = None,
        event: str | None = None,
        work_id: int | None = None,
    ) -> JobRecord:
        """Move a job along the state machine and record the event, in one transaction.

        ``expected_version`` makes the change conditional on the caller's last read
        (``Conflict`` with ``race=True`` if the job changed since); ``work_id`` on that
        Work still being the job's active one (``WorkInactive`` otherwise: a report
        about it no longer speaks for the job).
        """
        now = self._db.now()
        with self._db.write() as session:
            row = lock_job(session, name)
            _check_version(row, expected_version)
            _check_work(session, name, work_id)
            move(session, row, to_state, now, reason=reason, message=message, cluster=cluster,
                 hypernode=hypernode, tier=tier, event=event)
            return job_record(row)

    def annotate(
        self,
        name: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        restarts: int | None = None,
        event: str | None = None,
        expected_version: int | None = None,
        work_id: int | None = None,
    ) -> JobRecord:
        """Change a job's reason/message/restart count without changing its state.

        A higher restart count records a Restarted event (unless ``event`` names another);
        other changes record an event only when ``event`` is given. ``work_id`` as for
        ``transition``.
        """
        now = self._db.now()
        with self._db.write() as session:
            row = lock_job(session, name)
            _check_version(row, expected_version)
            _check_work(session, name, work_id)
            if event is None and restarts is not None and restarts > row.restarts:
                event = "Restarted"
            if restarts is not None:
                row.restarts = restarts
            if reason is not None:
                row.reason = reason
            if message is not None:
                row.message = message
            touch(row, now)
            if event is not None:
                add_event(session, row, event, message or reason or "", now)
            return job_record(row)

    def record_reported(self, name: str, events: Sequence[tuple[str, str]], *, restarts: int, work_id: int,
                        cluster: str, epoch: int, max_events: int, notice: str) -> tuple[JobRecord, int]:
        """One status report's events (type, message) about ``work_id`` and the restarts
        they count, in one transaction, while ``work_id`` is the job's active Work (as for
        ``transition``) and ``epoch`` is ``cluster``'s current agent (``StaleEpoch``). At
        most ``max_events`` such events are kept per job, then ``notice`` once
        (``reported_events``); the restart count and the message (the last event's) always
        move. Returns the job and how many events were not stored."""
        now = self._db.now()
        with self._db.write() as session:
            check_reporter(session, cluster, epoch)
            row = lock_job(session, name)
            _check_work(session, name, work_id)
            row.restarts += restarts
            if events:
                row.message = events[-1][1]
            touch(row, now)
            dropped = add_reported_events(session, row, events, now, max_events=max_events, notice=notice)
            return job_record(row), dropped

    # ------------------------------------------------------------------ events

    def latest_event_id(self) -> int:
        """The newest event id (where a watcher that wants only new events starts)."""
        with self._db.read() as session:
            return int(session.scalar(select(func.coalesce(func.max(JobEventRow.id), 0))) or 0)

    def count_events(self, after_id: int, upto_id: int) -> int:
        """How many events have ids in (``after_id``, ``upto_id``]: the event feed compares
        it with what it holds in memory to learn that some of those events were deleted
        (with their queue), since a deletion leaves no event of its own."""
        stmt = select(func.count()).select_from(JobEventRow).where(JobEventRow.id > after_id,
                                                                   JobEventRow.id <= upto_id)
        with self._db.read() as session:
            return int(session.scalar(stmt) or 0)

    def events_since(
        self,
        after_id: int,
        *,
        limit: int = 500,
        job: str | None = None,
        queues: Collection[str] | None = None,
    ) -> EventPage:
        """Events with id > ``after_id`` in id order; resume with the returned cursor.

        Why the gap check: on PostgreSQL ids come from a sequence, so a transaction that
        took id 11 may commit after one that took 12. Delivering 12 and moving the cursor
        past 11 would lose 11 forever. So delivery stops before a gap until the gap is
        proven settled (``_GapSettler``): every transaction that could have taken a
        missing id has ended. Not by the time stamped on the event after the gap: writers
        stamp it before they wait for row locks (up to ``lock_timeout``, 10 s), so a
        slow writer's event can look old while an earlier id is still in flight.
        SQLite serialises writers (a transaction holds the write lock from its first
        insert to its commit), so a reader never sees an id before every lower id has
        committed: a gap there is settled as soon as it is seen (deleted events).
        """
        scan = max(limit, 1) if job is None and queues is None else max(limit * 10, 2000)
        postgres = self._db.postgres
        settled_below = self._gaps.settled_below(self._db) if postgres else 0  # before this read's snapshot
        with self._db.read() as session:
            stmt = select(JobEventRow.id).where(JobEventRow.id > after_id)
            horizon = after_id
            rows = session.scalars(stmt.order_by(JobEventRow.id).limit(scan)).all()
            for event_id in rows:
                if postgres and event_id != horizon + 1 and event_id > settled_below:
                    self._gaps.observed(session, rows[-1])
                    break
                horizon = event_id
            if horizon == after_id:
                return EventPage((), after_id)
            query = select(JobEventRow).where(JobEventRow.id > after_id, JobEventRow.id <= horizon)
            if job is not None:
                query = query.where(JobEventRow.job == job)
            if queues is not None:
                query = query.where(JobEventRow.queue.in_(list(queues)))
            events = tuple(event_record(r) for r in session.scalars(query.order_by(JobEventRow.id).limit(limit)))
        cursor = events[-1].id if len(events) == limit else horizon
        return EventPage(events, cursor)


# The transactions that hold the job_events id sequence: every nextval() locks it
# (RowExclusiveLock) until its transaction ends, so these are the writers that may still
# commit an event id. pg_locks is live (not MVCC) and lists fast-path locks too.
_ID_ALLOCATORS = text(
    "SELECT virtualtransaction FROM pg_locks WHERE locktype = 'relation'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND relation = pg_get_serial_sequence('job_events', 'id')::regclass"
)


class _GapSettler:
    """Proves PostgreSQL event-id gaps settled, for ``events_since`` (shared by its threads).

    A reader that sees event M committed while an id below M is missing records a probe:
    M and the transactions then holding the id sequence. The writer of a missing id took
    it before M's id, so before M committed, so before that read: if it is still running
    it is in the probe. Once none of the probe's transactions holds the sequence any more
    (checked BEFORE a later read's snapshot, so a writer that committed in between is
    visible to that read), every id below M that is still missing is gone for good.
    No clock is involved: a writer may stay open after taking an id for as long as its
    lock waits last, and the reader's or the writer's clock cannot bound that.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._below = 0  # every id < this that is not stored never will be
        self._probe: tuple[int, frozenset[str]] | None = None

    def settled_below(self, db: Database) -> int:
        """The bound to use for a read that starts after this call (resolves the probe if it can)."""
        with self._lock:
            probe = self._probe
        if probe is not None:
            with db.read() as session:
                running = frozenset(str(v) for v in session.scalars(_ID_ALLOCATORS))
            if not probe[1] & running:
                with self._lock:
                    self._below = max(self._below, probe[0])
                    if self._probe == probe:
                        self._probe = None
        with self._lock:
            return self._below

    def observed(self, session: Session, bound: int) -> None:
        """A read saw committed events up to ``bound`` past an unsettled gap: start a probe."""
        with self._lock:
            if self._probe is not None or bound <= self._below:
                return  # one probe at a time; the next starts when it resolves
        holders = frozenset(str(v) for v in session.scalars(_ID_ALLOCATORS))  # after the read
        with self._lock:
            if self._probe is None:
                self._probe = (bound, holders)


def _visible_queues(session: Session, tenant: str) -> builtins.list[str]:
    rows = session.execute(select(QueueRow.name, QueueRow.owners))
    return [name for name, owners in rows if not owners or tenant in owners]
