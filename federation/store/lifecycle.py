"""Job row changes shared by every writer (jobs, audit rounds, cluster failover).

Why one place: whoever moves a job (a user cancelling, a planning round placing, the
agent hub reporting progress, failover requeueing) must check the state machine, bump
the version, stamp the time and append the WatchJobs event in the same transaction.
Doing that here means no writer can forget one of the four.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job
from federation.domain.states import (
    ACTIVE_WORK_STATES,
    EVENT_FOR_STATE,
    TERMINAL_STATES,
    JobState,
    WorkState,
    allowed,
)
from federation.store.codec import job_from_json
from federation.store.errors import IllegalTransition, NotFound
from federation.store.models import JobEventRow, JobRow, WorkRow
from federation.store.records import JobEvent, JobRecord

log = logging.getLogger(__name__)


def check_transition(from_state: str, to_state: str, job: str = "") -> None:
    """Raise ``IllegalTransition`` naming both states unless the state machine
    (``domain.states``) allows the move: every state change the store writes passes here."""
    if not allowed(from_state, to_state):
        raise IllegalTransition(from_state, to_state, job)

_CHUNK = 500


# Decoded specs by digest. A spec never changes after submission and ``Job`` is frozen,
# so one decoded object can be shared; the planner reads every pending job every round
# and decoding costs far more than the query (~0.1-0.2 ms per job).
_DECODED: dict[str, Job] = {}
_DECODED_MAX = 50_000
# A spec holds up to 1 MiB of template text: 50,000 of them would be tens of GiB, so the
# cache is also bounded by the text it holds (roughly what a decoded job weighs).
_DECODED_MAX_BYTES = 256 * 1024 * 1024
_DECODED_LOCK = threading.Lock()
_decoded_bytes = 0


def _weight(job: Job) -> int:
    """About what a decoded job holds: its templates' and workload's text, plus the rest."""
    body = len(job.workload.body_json) if job.workload is not None else 0
    return 1024 + body + sum(len(t.template_json) for t in job.tasks)


def decode_spec(digest: str, spec: dict[str, Any]) -> Job:
    job = _DECODED.get(digest)
    if job is None:
        try:
            job = job_from_json(spec)
        except InvalidInput as exc:
            # Stored by an earlier release, before a rule it breaks was added: read as it
            # was accepted, so no round, listing or job is lost to an upgrade.
            log.warning("job spec %s breaks a rule of this release (%s); read as stored", digest[:12], exc)
            job = job_from_json(spec, trusted=True)
        global _decoded_bytes
        weight = _weight(job)
        with _DECODED_LOCK:
            if len(_DECODED) >= _DECODED_MAX or _decoded_bytes + weight > _DECODED_MAX_BYTES:
                _DECODED.clear()
                _decoded_bytes = 0
            if digest not in _DECODED:
                _DECODED[digest] = job
                _decoded_bytes += weight
    return job


def job_record(row: JobRow) -> JobRecord:
    return JobRecord(
        name=row.name,
        queue=row.queue,
        tenant=row.tenant,
        job=decode_spec(row.spec_digest, row.spec),
        spec_digest=row.spec_digest,
        state=row.state,
        unschedulable=row.unschedulable,
        reason=row.reason,
        message=row.message,
        cluster=row.cluster,
        hypernode=row.hypernode,
        tier=row.tier,
        restarts=row.restarts,
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
        expires_at=row.expires_at,
    )


def event_record(row: JobEventRow) -> JobEvent:
    return JobEvent(id=row.id, job=row.job, queue=row.queue, type=row.type, state=row.state,
                    message=row.message, time=row.time)


def lock_job(session: Session, name: str) -> JobRow:
    """The job row, locked for update (PostgreSQL; SQLite already holds the write lock)."""
    row = session.scalars(select(JobRow).where(JobRow.name == name).with_for_update()).one_or_none()
    if row is None:
        raise NotFound("job", name)
    return row


def lock_jobs(session: Session, names: Iterable[str]) -> dict[str, JobRow]:
    """Several job rows locked in name order (a fixed order, so two writers cannot deadlock)."""
    ordered = sorted(set(names))
    rows: dict[str, JobRow] = {}
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start:start + _CHUNK]
        stmt = select(JobRow).where(JobRow.name.in_(chunk)).order_by(JobRow.name).with_for_update()
        rows.update((r.name, r) for r in session.scalars(stmt))
    return rows


def add_event(session: Session, row: JobRow, type_: str, message: str, now: datetime) -> None:
    session.add(JobEventRow(job=row.name, queue=row.queue, type=type_, state=row.state, message=message, time=now))


def touch(row: JobRow, now: datetime) -> None:
    row.updated_at = now
    row.version += 1


def move(
    session: Session,
    row: JobRow,
    to_state: str,
    now: datetime,
    *,
    reason: str | None = None,
    message: str | None = None,
    cluster: str | None = None,
    hypernode: str | None = None,
    tier: int | None = None,
    event: str | None = None,
) -> None:
    """Apply one state-machine transition to ``row`` and record its event.

    Entering ``placed`` requires the cluster; entering ``pending`` (re-plan) forgets the
    old placement so the planner sees a clean pending job.
    """
    check_transition(row.state, to_state, row.name)
    if to_state == JobState.PLACED and not cluster:
        raise ValueError(f"job {row.name!r}: placing a job requires its cluster")
    row.state = to_state
    if to_state == JobState.PENDING:
        row.cluster = row.hypernode = None
        row.tier = None
    else:
        row.unschedulable = False
    if cluster is not None:
        row.cluster = cluster
    if hypernode is not None:
        row.hypernode = hypernode
    if tier is not None:
        row.tier = tier
    if reason is not None:
        row.reason = reason
    if message is not None:
        row.message = message
    if to_state in TERMINAL_STATES:
        row.expires_at = expiry(decode_spec(row.spec_digest, row.spec), now)
    touch(row, now)
    add_event(session, row, event or EVENT_FOR_STATE[to_state], reason or message or "", now)


def expiry(job: Job, finished_at: datetime) -> datetime | None:
    """When a job that finished at ``finished_at`` is to be deleted: its
    ``ttlSecondsAfterFinished`` after that, or never. The clock starts when the terminal
    state is recorded, as Volcano's garbage collector counts from the job's last state
    transition time (volcano-sh/volcano pkg/controllers/garbagecollector/garbagecollector.go,
    ``getFinishAndExpireTime``); terminal states never change, so it is set once."""
    ttl = job.ttl_seconds_after_finished
    return None if ttl is None else finished_at + timedelta(seconds=ttl)


def withdraw_works(session: Session, now: datetime, *, jobs: Sequence[str] = (), cluster: str | None = None,
                   message: str = "") -> list[int]:
    """Mark the active works of ``jobs`` (or of ``cluster``) withdrawn; returns their ids."""
    stmt = select(WorkRow).where(WorkRow.state.in_(ACTIVE_WORK_STATES)).with_for_update()
    if jobs:
        stmt = stmt.where(WorkRow.job.in_(list(jobs)))
    if cluster is not None:
        stmt = stmt.where(WorkRow.cluster == cluster)
    ids: list[int] = []
    for work in session.scalars(stmt.order_by(WorkRow.id)):
        work.state = WorkState.WITHDRAWN
        work.message = message
        work.updated_at = now
        ids.append(work.id)
    return ids
