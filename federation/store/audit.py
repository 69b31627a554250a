"""The planning audit: every round, every decision, and the job changes they cause.

``record_round`` writes the round, its decisions and the resulting job state changes in
ONE transaction. Why: the audit must never disagree with what happened. If the decisions
were written separately from the job changes, a crash in between would leave either
placed jobs with no recorded reason or an audit of placements that never took effect,
and "why is my job there?" would get a wrong answer. With one transaction a failure
anywhere (a vanished job, an illegal transition, the database going away) leaves nothing
written, and the round can simply be planned again.

An ``unplaced`` decision that repeats the job's latest recorded one (same reason,
constraint and closest cluster) is not written again: the audit records what changed,
and a steady backlog of thousands of waiting jobs would otherwise add a row per job per
round. Placed and preempted decisions are always written.

A job that changed after the planner read it (cancelled mid-round, say) is not a
failure: updates carry the version the planner saw and stale ones are skipped and
reported, and so are placements into the room of a skipped victim that still runs
(``_stale``). A skipped job's decision is not written: it did not take effect, and
``fedctl explain`` must not show it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from federation.domain.plans import PodAssignment
from federation.domain.states import ACTIVE_STATES, JobState, pending_event
from federation.store import paging
from federation.store.audit_retention import PruneBatch, Pruning, prune_batch, pruning
from federation.store.engine import Database
from federation.store.errors import NotFound
from federation.store.lifecycle import add_event, lock_jobs, move, touch, withdraw_works
from federation.store.models import OUTCOMES, DecisionRow, JobRow, RoundQueueRow, RoundRow, WorkRow
from federation.store.records import Decision, DecisionRecord, JobUpdate, Page, RoundRecord, RoundResult
from federation.store.works import add_work, work_record

_ROUND_FIELDS = (
    "started_at", "ended_at", "trigger", "policy", "solver_status", "objective", "bound", "input_digest",
    "pending_count", "placed_count", "unplaced_count", "preempted_count", "solve_seconds",
)


def round_of(row: RoundRow) -> RoundRecord:
    return RoundRecord(id=row.id, **{f: getattr(row, f) for f in _ROUND_FIELDS})


def decision_of(row: DecisionRow) -> Decision:
    return Decision(
        job=row.job,
        outcome=row.outcome,
        cluster=row.cluster,
        hypernode=row.hypernode,
        tier=row.tier,
        pods=tuple(PodAssignment(str(t), int(i), str(n)) for t, i, n in row.pods),
        score_terms={str(k): float(v) for k, v in row.score_terms.items()},
        reason=row.reason,
        constraint=row.constraint,
        closest_cluster=row.closest_cluster,
        preemptor=row.preemptor,
    )


def _decision_row(round_id: int, d: Decision, job_created_at: datetime | None) -> DecisionRow:
    if d.outcome not in OUTCOMES:
        raise ValueError(f"decision for {d.job!r}: outcome must be one of {', '.join(OUTCOMES)}, got {d.outcome!r}")
    return DecisionRow(
        round_id=round_id, job=d.job, outcome=d.outcome, cluster=d.cluster, hypernode=d.hypernode, tier=d.tier,
        pods=[[p.task, p.index, p.node] for p in d.pods],
        score_terms={k: float(v) for k, v in d.score_terms.items()},
        reason=d.reason, constraint=d.constraint, closest_cluster=d.closest_cluster, preemptor=d.preemptor,
        job_created_at=job_created_at,
    )


def _created_at(session: Session, names: Iterable[str], chunk: int = 500) -> dict[str, datetime]:
    """When each named job that exists was created: which job of its name a decision is about.

    Read without row locks: a round's decisions name every pending job, and locking (and
    loading) all of them each round would cost far more than the few it changes.
    """
    ordered = sorted(set(names))
    found: dict[str, datetime] = {}
    for start in range(0, len(ordered), chunk):
        stmt = select(JobRow.name, JobRow.created_at).where(JobRow.name.in_(ordered[start:start + chunk]))
        found.update((name, at) for name, at in session.execute(stmt))
    return found


def _repeated_unplaced(session: Session, decisions: Sequence[Decision], born: dict[str, datetime],
                       chunk: int = 500) -> set[str]:
    """Jobs whose ``unplaced`` decision repeats their latest recorded decision (index
    (job, id); chunked so the IN lists stay within every driver's parameter limit). A
    decision about an earlier job of the same name is no repeat."""
    unplaced = {d.job: d for d in decisions if d.outcome == "unplaced"}
    names = sorted(unplaced)
    same: set[str] = set()
    for start in range(0, len(names), chunk):
        latest = (select(func.max(DecisionRow.id)).where(DecisionRow.job.in_(names[start:start + chunk]))
                  .group_by(DecisionRow.job))
        for row in session.scalars(select(DecisionRow).where(DecisionRow.id.in_(latest))):
            d = unplaced[row.job]
            if row.job not in born or row.job_created_at != born[row.job]:
                continue
            if row.outcome == "unplaced" and (row.reason, row.constraint, row.closest_cluster or "") == (
                    d.reason, d.constraint, d.closest_cluster or ""):
                same.add(row.job)
    return same


def _stale(updates: Sequence[JobUpdate], rows: dict[str, JobRow]) -> set[str]:
    """The jobs whose updates this round must skip, read before any of its changes.

    A job that changed since the planner read it is stale. So is a placement into a
    cluster where a victim of the round's preemptions was stale but still holds its room
    (its agent reported it running while the solver ran, say): the planner counted that
    room free, so placing there would put two gangs on the same GPUs. The next round
    plans both again from what then runs.
    """
    stale = {u.job for u in updates
             if u.expected_version is not None and rows[u.job].version != u.expected_version}
    held = {rows[u.job].cluster for u in updates
            if u.job in stale and u.state == JobState.PENDING and rows[u.job].state in ACTIVE_STATES}
    stale |= {u.job for u in updates if u.state == JobState.PLACED and u.cluster in held}
    return stale


class AuditRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record_round(
        self,
        round: RoundRecord,
        decisions: Sequence[Decision],
        job_updates: Sequence[JobUpdate] = (),
    ) -> RoundResult:
        """Write the round, its decisions and its job changes atomically (module doc).

        Raises (and writes nothing) on an unknown job, a transition the state machine
        refuses for an update without ``expected_version``, a placement without its Work
        (``JobUpdate.work``) or a Work for an unknown cluster.
        """
        now = self._db.now()
        applied: list[str] = []
        skipped: list[str] = []
        requeued: list[str] = []
        created: list[WorkRow] = []
        for update in job_updates:
            if update.state == JobState.PLACED and update.work is None:
                raise ValueError(f"job update for {update.job!r}: a placement must carry its Work")
        with self._db.write() as session:
            round_row = RoundRow(**{f: getattr(round, f) for f in _ROUND_FIELDS})
            session.add(round_row)
            session.flush()
            session.add_all([RoundQueueRow(round_id=round_row.id, queue=q.queue, pending_count=q.pending,
                                           placed_count=q.placed, unplaced_count=q.unplaced,
                                           preempted_count=q.preempted) for q in round.queue_counts])
            rows = lock_jobs(session, (u.job for u in job_updates))
            for update in job_updates:
                if update.job not in rows:
                    raise NotFound("job", update.job)
            stale = _stale(job_updates, rows)
            born = _created_at(session, (d.job for d in decisions if d.job not in rows))
            born.update((name, row.created_at) for name, row in rows.items())
            repeated = _repeated_unplaced(session, decisions, born)
            session.add_all([_decision_row(round_row.id, d, born.get(d.job))
                             for d in decisions
                             if d.job not in stale and (d.outcome != "unplaced" or d.job not in repeated)])
            for update in job_updates:
                row = rows[update.job]
                if update.job in stale:
                    skipped.append(update.job)
                    continue
                if update.state is None:
                    if row.reason != update.reason or row.unschedulable != update.unschedulable:
                        row.reason, row.unschedulable = update.reason, update.unschedulable
                        touch(row, now)
                        add_event(session, row, update.event or pending_event(update.unschedulable),
                                  update.reason, now)
                else:
                    move(session, row, update.state, now, reason=update.reason, cluster=update.cluster,
                         hypernode=update.hypernode, tier=update.tier, event=update.event)
                    if update.state == JobState.PENDING:
                        requeued.append(update.job)
                    elif update.state == JobState.PLACED and update.cluster and update.work is not None:
                        created.append(add_work(session, update.job, update.cluster, update.work, now))
                applied.append(update.job)
            withdrawn = withdraw_works(session, now, jobs=requeued, message="preempted") if requeued else []
            return RoundResult(round_row.id, tuple(applied), tuple(skipped), tuple(withdrawn),
                               tuple(work_record(w) for w in created))

    def job_audit(self, job: str, *, limit: int = 200, created_at: datetime | None = None) -> list[DecisionRecord]:
        """The job's decisions, oldest round first (the newest ``limit`` of them).

        ``created_at`` (the job's): only the decisions about that job, not about an earlier
        job of the same name (names are unique only among jobs that exist, and the audit
        outlives them); None: every decision recorded under the name.
        """
        stmt = (
            select(DecisionRow, RoundRow).join(RoundRow, RoundRow.id == DecisionRow.round_id)
            .where(DecisionRow.job == job).order_by(DecisionRow.id.desc()).limit(limit)
        )
        if created_at is not None:
            stmt = stmt.where(DecisionRow.job_created_at == created_at)
        with self._db.read() as session:
            rows = [(d, r) for d, r in session.execute(stmt)]
        return [DecisionRecord(d.id, round_of(r), decision_of(d)) for d, r in reversed(rows)]

    def latest_decision(self, job: str, *, created_at: datetime | None = None) -> DecisionRecord | None:
        found = self.job_audit(job, limit=1, created_at=created_at)
        return found[0] if found else None

    def get_round(self, round_id: int) -> RoundRecord:
        with self._db.read() as session:
            row = session.get(RoundRow, round_id)
            if row is None:
                raise NotFound("round", str(round_id))
            return round_of(row)

    def decisions(self, round_id: int) -> list[Decision]:
        stmt = select(DecisionRow).where(DecisionRow.round_id == round_id).order_by(DecisionRow.id)
        with self._db.read() as session:
            return [decision_of(r) for r in session.scalars(stmt)]

    def list_rounds(self, *, page_size: int | None = None, page_token: str = "",
                    queues: Collection[str] | None = None) -> Page[RoundRecord]:
        """Rounds, newest first, one page at a time.

        ``queues`` (a tenant's): only rounds that counted a job of those queues, with the
        counts summed over those queues alone, never the round's totals. ``None``: every
        round with its totals (admins).
        """
        size = paging.page_size(page_size)
        before = _int(paging.decode("rounds", page_token, 1)[0]) if page_token else None
        if queues is None:
            stmt = select(RoundRow).order_by(RoundRow.id.desc()).limit(size + 1)
            if before is not None:
                stmt = stmt.where(RoundRow.id < before)
            with self._db.read() as session:
                rows = [round_of(r) for r in session.scalars(stmt)]
        else:
            rows = self._rounds_of(sorted(queues), size + 1, before)
        items = tuple(rows[:size])
        return Page(items, paging.encode("rounds", items[-1].id) if len(rows) > size else "")

    def _rounds_of(self, queues: list[str], limit: int, before: int | None) -> list[RoundRecord]:
        q = RoundQueueRow
        sums = (select(q.round_id, func.sum(q.pending_count), func.sum(q.placed_count), func.sum(q.unplaced_count),
                       func.sum(q.preempted_count))
                .where(q.queue.in_(queues)).group_by(q.round_id).order_by(q.round_id.desc()).limit(limit))
        if before is not None:
            sums = sums.where(q.round_id < before)
        if not queues:
            return []
        with self._db.read() as session:
            counted = {int(rid): tuple(int(n or 0) for n in ns) for rid, *ns in session.execute(sums)}
            rounds = session.scalars(select(RoundRow).where(RoundRow.id.in_(list(counted)))
                                     .order_by(RoundRow.id.desc()))
            return [dataclasses.replace(round_of(r), pending_count=counted[r.id][0], placed_count=counted[r.id][1],
                                        unplaced_count=counted[r.id][2], preempted_count=counted[r.id][3])
                    for r in rounds]

    def prune_batch(self, cutoff: datetime, batch: int, after: int = 0) -> PruneBatch:
        """Retention: one bounded batch of rounds that ended before ``cutoff`` (``audit_retention``)."""
        return prune_batch(self._db, cutoff, batch, after)

    def pruning(self) -> Pruning | None:
        """How far retention has pruned the audit; None when it never has."""
        return pruning(self._db)


def _int(value: Any) -> int:
    """The round id of a rounds token; ``paging.decode_id`` range-checks it (1e30, Infinity
    must be a malformed token, not an OverflowError from the driver)."""
    return paging.decode_id(value)
