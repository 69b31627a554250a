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
from collections.abc import Collection, Sequence

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from federation.domain.jobs import Job
from federation.domain.states import JobState
from federation.store import paging
from federation.store.codec import digest_of, job_to_json
from federation.store.engine import Database
from federation.store.errors import AlreadyExists, Conflict, NotFound
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
from federation.store.models import JobEventRow, JobRow, QueueRow
from federation.store.records import EventPage, JobRecord, Page, QueueUsage, Submitted


def _check_version(row: JobRow, expected: int | None) -> None:
    if expected is not None and row.version != expected:
        raise Conflict(f"job {row.name!r} changed (version {row.version}, expected {expected}); re-read and retry",
                       race=True)


class JobRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

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
    ) -> JobRecord:
        """Move a job along the state machine and record the event, in one transaction.

        ``expected_version`` makes the change conditional on the caller's last read
        (``Conflict`` with ``race=True`` if the job changed since).
        """
        now = self._db.now()
        with self._db.write() as session:
            row = lock_job(session, name)
            _check_version(row, expected_version)
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
    ) -> JobRecord:
        """Change a job's reason/message/restart count without changing its state.

        A higher restart count records a Restarted event (unless ``event`` names another);
        other changes record an event only when ``event`` is given.
        """
        now = self._db.now()
        with self._db.write() as session:
            row = lock_job(session, name)
            _check_version(row, expected_version)
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

    # ------------------------------------------------------------------ events

    def latest_event_id(self) -> int:
        """The newest event id (where a watcher that wants only new events starts)."""
        with self._db.read() as session:
            return int(session.scalar(select(func.coalesce(func.max(JobEventRow.id), 0))) or 0)

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
        past 11 would lose 11 forever. So delivery stops before a gap unless the event
        after it is older than ``settle_seconds`` (the gap is then a rolled-back
        transaction, not a slow one). SQLite serialises writers and never has gaps.
        """
        scan = max(limit, 1) if job is None and queues is None else max(limit * 10, 2000)
        now = self._db.now()
        with self._db.read() as session:
            stmt = select(JobEventRow.id, JobEventRow.time).where(JobEventRow.id > after_id)
            horizon = after_id
            for event_id, time in session.execute(stmt.order_by(JobEventRow.id).limit(scan)):
                gap = event_id != horizon + 1
                if gap and (now - time).total_seconds() < self._db.settle_seconds:
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


def _visible_queues(session: Session, tenant: str) -> builtins.list[str]:
    rows = session.execute(select(QueueRow.name, QueueRow.owners))
    return [name for name, owners in rows if not owners or tenant in owners]
