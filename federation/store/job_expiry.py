"""Finished jobs past their ``ttlSecondsAfterFinished``: found and deleted, a batch per transaction.

``lifecycle.move`` stamps ``jobs.expires_at`` once, as a job with a TTL enters a terminal
state; this repository deletes the rows whose time has passed. Why the store keeps the
deadline rather than a timer in the service: it survives a central restart and a standby
taking over (the new leader's sweep reads the same column), and the sweep is one indexed
range read whoever runs it.

Deleting a job is what deleting its queue does to it (``QueueRepository.delete``): the
job row goes, and with it, by the schema's ``ON DELETE CASCADE``, its events, its Works
and its policy claim. The planning audit has no foreign key to jobs and stays (each
decision names the job's creation time, so a later job of the same name does not inherit
it). The caller tells the agents: a Work that leaves the store is withdrawn from its
cluster at the hub's next refresh (``AgentHub._refresh``), whose Cancel makes the agent
delete the job's pods, Service, ConfigMap and Secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, func, select

from federation.store.engine import Database
from federation.store.job_waits import awaited
from federation.store.models import JobRow, WorkRow

DEFAULT_BATCH = 500


@dataclass(frozen=True)
class ExpiredJob:
    """A job deleted because its TTL after finishing ran out."""

    name: str
    queue: str
    state: str
    expired_at: datetime
    clusters: tuple[str, ...]  # every cluster a Work of the job was sent to (their agents are told)


class JobExpiryRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def delete_expired(self, limit: int = DEFAULT_BATCH, *, since: datetime | None = None) -> list[ExpiredJob]:
        """Delete up to ``limit`` jobs whose ``expires_at`` has passed (and is after ``since``,
        when given: the caller already looked at the earlier ones), in one transaction;
        returns them (fewer than ``limit``: none is left for now). A job that a job which has
        not finished waits for (``after``) is kept (``store.job_waits``); its deadline stays,
        so a later look without ``since`` deletes it once nothing waits for it.

        The jobs are found by a read transaction first and only those are locked and
        checked again in the write transaction: a look over thousands of kept jobs then
        holds no lock (on SQLite, the one write lock every writer queues for). Rows are
        locked in name order, as every writer locks jobs, then their Works go by cascade
        (job before work, the store's lock order)."""
        now = self._db.now()
        due: ColumnElement[bool] = JobRow.expires_at <= now
        if since is not None:
            due = and_(due, JobRow.expires_at > since)
        deletable = and_(due, ~awaited(self._db.postgres))
        with self._db.read() as session:
            found = list(session.scalars(select(JobRow.name).where(deletable).order_by(JobRow.name).limit(limit)))
        if not found:
            return []
        with self._db.write() as session:
            # Again under the lock: a job submitted meanwhile may wait for one of them.
            rows = session.execute(
                select(JobRow.name, JobRow.queue, JobRow.state, JobRow.expires_at)
                .where(JobRow.name.in_(found), deletable).order_by(JobRow.name).with_for_update()
            ).all()
            if not rows:
                return []
            names = [r.name for r in rows]
            clusters: dict[str, set[str]] = {}
            for job, cluster in session.execute(select(WorkRow.job, WorkRow.cluster).where(WorkRow.job.in_(names))):
                clusters.setdefault(job, set()).add(cluster)
            session.execute(delete(JobRow).where(JobRow.name.in_(names)))
        return [ExpiredJob(r.name, r.queue, r.state, r.expires_at, tuple(sorted(clusters.get(r.name, ()))))
                for r in rows]

    def next_expiry(self, *, after: datetime | None = None) -> datetime | None:
        """The earliest ``expires_at`` stored (after ``after``, when given): one end of an
        index, whatever is kept behind it (the sweep sleeps until then)."""
        stmt = select(func.min(JobRow.expires_at))
        if after is not None:
            stmt = stmt.where(JobRow.expires_at > after)
        with self._db.read() as session:
            value: datetime | None = session.scalar(stmt)
            return value
