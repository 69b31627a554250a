"""The events a cluster's status reports add to a job, at most a fixed number per job.

Why a cap: each report is bounded (``STATUS_MAX_EVENTS``), but a cluster may send reports
without end, and every restart or warning it reports is a row in the job's history that
every watcher of the job replays: an agent that kept reporting restarts of one Work grew
that job's history without bound. Past the cap the events are counted, not stored: the caller
still moves the restart count and the job's message, and the job gets one ``Warning``
saying further events are not recorded, so the tenant knows its history is incomplete.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, load_only

from federation.domain.states import RESTARTED_EVENT, WARNING_EVENT
from federation.store.clusters import check_epoch
from federation.store.errors import NotFound
from federation.store.lifecycle import add_event
from federation.store.models import ClusterRow, JobEventRow, JobRow

REPORTED_EVENT_TYPES = (RESTARTED_EVENT, WARNING_EVENT)


def check_reporter(session: Session, cluster: str, epoch: int) -> None:
    """Refuse (``StaleEpoch``) a report from anything but ``cluster``'s current agent, the
    cluster row read-locked so no hello commits until the events are written (lock order:
    cluster, then job). Only the epoch columns are loaded: the row holds the last snapshot."""
    row = session.scalars(select(ClusterRow).options(load_only(ClusterRow.name, ClusterRow.epoch, ClusterRow.lost))
                          .where(ClusterRow.name == cluster).with_for_update(read=True)).one_or_none()
    if row is None:
        raise NotFound("cluster", cluster)
    check_epoch(row, epoch)


def _stored(session: Session, job: str, limit: int) -> int:
    """How many reported events ``job`` holds, counting no further than ``limit``."""
    rows = (select(JobEventRow.id).where(JobEventRow.job == job, JobEventRow.type.in_(REPORTED_EVENT_TYPES))
            .limit(limit).subquery())
    return int(session.scalar(select(func.count()).select_from(rows)) or 0)


def add_reported_events(session: Session, row: JobRow, events: Sequence[tuple[str, str]], now: datetime, *,
                        max_events: int, notice: str) -> int:
    """Append ``events`` (type, message) to the locked ``row`` while the job holds fewer
    than ``max_events`` reported events; the first time one is left out, append ``notice``
    as a ``Warning`` (it makes the count ``max_events + 1``, so it is appended once).
    Returns how many events were left out."""
    stored = _stored(session, row.name, max_events + 1)
    kept = events[:max(0, max_events - stored)]
    for type_, message in kept:
        add_event(session, row, type_, message, now)
    dropped = len(events) - len(kept)
    if dropped and stored + len(kept) == max_events:
        add_event(session, row, WARNING_EVENT, notice, now)
    return dropped
