"""Works: the versioned "run this job here" records propagation sends to agents.

Each new Work for a job gets the next version (unique per job), and by default the
job's older active works are withdrawn in the same transaction, because a gang runs in
exactly one cluster: there is never a moment where two versions are both meant to run.
Agents acknowledge by id; status writes may carry the agent's epoch and are refused with
``StaleEpoch`` when a newer registration exists (a deposed agent cannot report on work).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from federation.domain.plans import PodAssignment
from federation.domain.states import ACTIVE_WORK_STATES, GROWN_EVENT, WORK_TRANSITIONS, WorkState
from federation.domain.works import grown_payload, payload_generation
from federation.store.clusters import check_epoch
from federation.store.engine import Database
from federation.store.errors import Conflict, NotFound
from federation.store.lifecycle import add_event, lock_job, withdraw_works
from federation.store.models import ClusterRow, WorkRow
from federation.store.records import WorkRecord


def work_record(row: WorkRow) -> WorkRecord:
    return WorkRecord(id=row.id, job=row.job, cluster=row.cluster, version=row.version, state=row.state,
                      message=row.message, payload=dict(row.payload), created_at=row.created_at,
                      updated_at=row.updated_at)


def _locked_work(session: Session, work_id: int, epoch: int | None) -> WorkRow:
    """The Work row locked for update, after checking the reporting agent's epoch.

    Lock order everywhere: cluster, then job, then work — so the cluster row (read lock)
    comes first when an epoch is checked.
    """
    cluster_name = session.scalar(select(WorkRow.cluster).where(WorkRow.id == work_id))
    if cluster_name is None:
        raise NotFound("work", str(work_id))
    if epoch is not None:
        cluster = session.scalars(
            select(ClusterRow).where(ClusterRow.name == cluster_name).with_for_update(read=True)
        ).one()
        check_epoch(cluster, epoch)
    return session.scalars(select(WorkRow).where(WorkRow.id == work_id).with_for_update()).one()


def add_work(session: Session, job: str, cluster: str, payload: Mapping[str, Any], now: datetime, *,
             supersede: bool = True) -> WorkRow:
    """Insert the job's next Work version for ``cluster`` in the caller's transaction.

    The caller holds the job row's lock (it serialises version numbering per job): the
    planning round's ``record_round`` writes a placement's Work with it, beside the job
    row's placement and the round's decisions.
    """
    if session.get(ClusterRow, cluster) is None:
        raise NotFound("cluster", cluster)
    if supersede:
        withdraw_works(session, now, jobs=[job], message="superseded")
    latest = session.scalar(select(func.max(WorkRow.version)).where(WorkRow.job == job)) or 0
    row = WorkRow(job=job, cluster=cluster, version=int(latest) + 1, state=WorkState.PENDING, message="",
                  payload=dict(payload), created_at=now, updated_at=now)
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:  # pragma: no cover - the job lock prevents it
        raise Conflict(f"work version for job {job!r} taken concurrently; retry", race=True) from exc
    return row


class WorkRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, job: str, cluster: str, payload: Mapping[str, Any], *, supersede: bool = True) -> WorkRecord:
        """The job's next Work version for ``cluster``; older active works are withdrawn first."""
        now = self._db.now()
        with self._db.write() as session:
            lock_job(session, job)  # serialises version numbering per job
            return work_record(add_work(session, job, cluster, payload, now, supersede=supersede))

    def get(self, work_id: int) -> WorkRecord:
        with self._db.read() as session:
            row = session.get(WorkRow, work_id)
            if row is None:
                raise NotFound("work", str(work_id))
            return work_record(row)

    def update_status(self, work_id: int, state: str, *, message: str = "", epoch: int | None = None) -> WorkRecord:
        """Record what the agent reports; the same state again is a no-op (acks repeat).

        A move the work table does not allow (e.g. running after withdrawn) is a
        ``Conflict``: the report is stale and the agent should drop that work.
        """
        now = self._db.now()
        with self._db.write() as session:
            row = _locked_work(session, work_id, epoch)
            if state == row.state:
                if message and message != row.message:
                    row.message, row.updated_at = message, now
                return work_record(row)
            if state not in WORK_TRANSITIONS.get(row.state, frozenset()):
                raise Conflict(f"work {work_id} (job {row.job!r}) is {row.state}; cannot become {state}")
            row.state = state
            row.message = message
            row.updated_at = now
            return work_record(row)

    def grow(self, job: str, cluster: str, hypernode: str, added: Sequence[PodAssignment]) -> WorkRecord:
        """Add pods to the job's active Work: same version, next generation.

        A running elastic job grows inside the cluster and HyperNode it runs in; its running
        pods keep their names and nodes, so the version (which the agent labels its pods
        with) stays, and the generation tells the agent to bind the added pods only
        (``propagation.works.grown_payload``). ``Conflict`` when the job has no active Work
        there any more (cancelled, re-planned or finished while the round ran) or a pod is
        already in it: the growth is stale and the next round decides again.
        """
        now = self._db.now()
        with self._db.write() as session:
            job_row = lock_job(session, job)
            row = session.scalars(select(WorkRow).where(
                WorkRow.job == job, WorkRow.state.in_(list(ACTIVE_WORK_STATES))).with_for_update()).one_or_none()
            if row is None or row.cluster != cluster or row.payload.get("hypernode") != hypernode:
                raise Conflict(f"job {job!r} has no active work in {cluster}/{hypernode} to grow")
            have = {(str(t), int(i)) for t, i, _ in row.payload.get("pods", ())}
            if not added or any((a.task, a.index) in have for a in added):
                raise Conflict(f"work {row.id} (job {job!r}) already runs a pod of the growth")
            row.payload = grown_payload(row.payload, added)
            row.updated_at = now
            add_event(session, job_row, GROWN_EVENT, f"grew by {len(added)} pod(s) in {cluster}/{hypernode} "
                      f"(work {row.id} version {row.version} generation {payload_generation(row.payload)})", now)
            return work_record(row)

    def record_pods(self, work_id: int, pods: Sequence[PodAssignment], *, epoch: int | None = None,
                    generation: int = 0) -> WorkRecord:
        """Replace the pod → node assignment the Work records with where the agent actually
        bound the pods, in one transaction (epoch-checked like ``update_status``).

        Why: the agent may re-pack a gang inside its HyperNode or replace a pod on another
        node (RestartPod, node lost). The Work's payload is the job's recorded placement —
        what ``fedctl explain`` shows and what the next planning round reads for the running
        job — so it must follow the pods, not keep the planned nodes. The version is not
        bumped: the Work's meaning (cluster, HyperNode) is unchanged and the agent must not
        see a new Work for it. ``updated_at`` is, so a snapshot received before this report
        is not taken to reflect the new binding. Only an active Work can change, and only
        from a report of its newest ``generation`` (``Conflict`` otherwise: the report is
        stale — about the pod set before a growth). Such a report also settles the growth:
        its pods are no longer held as ``growing``.
        """
        now = self._db.now()
        with self._db.write() as session:
            row = _locked_work(session, work_id, epoch)
            if row.state not in ACTIVE_WORK_STATES:
                raise Conflict(f"work {work_id} (job {row.job!r}) is {row.state}; its pods are no longer recorded")
            if generation < payload_generation(row.payload):
                raise Conflict(f"work {work_id} (job {row.job!r}) is at generation "
                               f"{payload_generation(row.payload)}; a report of generation {generation} is stale")
            payload = {k: v for k, v in row.payload.items() if k != "growing"}
            row.payload = {**payload, "pods": [[p.task, p.index, p.node] for p in pods]}
            row.updated_at = now
            return work_record(row)

    def list(
        self,
        *,
        cluster: str | None = None,
        job: str | None = None,
        states: Collection[str] | None = None,
    ) -> builtins.list[WorkRecord]:
        stmt = select(WorkRow).order_by(WorkRow.id)
        if cluster is not None:
            stmt = stmt.where(WorkRow.cluster == cluster)
        if job is not None:
            stmt = stmt.where(WorkRow.job == job)
        if states is not None:
            stmt = stmt.where(WorkRow.state.in_(list(states)))
        with self._db.read() as session:
            return [work_record(r) for r in session.scalars(stmt)]

    def active(self, cluster: str) -> builtins.list[WorkRecord]:
        """What ``cluster`` should be running now (sent in full when its agent reconnects)."""
        return self.list(cluster=cluster, states=ACTIVE_WORK_STATES)

    def latest(self, job: str) -> WorkRecord | None:
        stmt = select(WorkRow).where(WorkRow.job == job).order_by(WorkRow.version.desc()).limit(1)
        with self._db.read() as session:
            row = session.scalars(stmt).one_or_none()
            return None if row is None else work_record(row)
