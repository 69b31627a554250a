"""Audit retention: delete old planning rounds in bounded batches, never the latest
decision of a live job, and remember how far pruning went (``audit_pruning``).

Why these rules:

- **Bounded batches.** One transaction deletes at most ``batch`` rounds (and their
  decisions), so a first prune of a year of history never holds locks for minutes or
  builds one enormous transaction; the caller paces the batches.
- **The latest decision of a live job is kept.** A pending, placed, dispatched or running
  job's latest decision is what ``fedctl explain`` shows, what the next round compares an
  ``unplaced`` decision against so a steady backlog writes nothing (``record_round``). No
  control step reads it to act (the works table is the live placement). Its round
  row is kept with it (a decision is shown with its round). Jobs that finished, and jobs
  that no longer exist, keep nothing: retention means what it says for them.
- **A watermark, not silence.** ``audit_pruning`` records the cutoff and totals, updated in
  the same transaction as each batch, so ``fedctl audit`` can say that older rounds were
  pruned, and every replica sees the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, delete, select
from sqlalchemy.orm import Session, aliased

from federation.domain.states import JOB_STATES, TERMINAL_STATES
from federation.store.engine import Database
from federation.store.models import AuditPruningRow, DecisionRow, JobRow, RoundRow

LIVE_STATES = tuple(s for s in JOB_STATES if s not in TERMINAL_STATES)
MAX_BATCH = 5_000


@dataclass(frozen=True)
class PruneBatch:
    """One batch: rounds and decisions deleted, rounds kept for a live job's latest decision,
    and the last round id examined (the next batch starts after it)."""

    rounds: int
    decisions: int
    kept_rounds: int
    last_round_id: int

    @property
    def examined(self) -> int:
        return self.rounds + self.kept_rounds


@dataclass(frozen=True)
class Pruning:
    """How far retention has pruned (None from ``pruning()`` when it never has)."""

    pruned_before: datetime
    pruned_at: datetime
    rounds_pruned: int
    decisions_pruned: int


def _protected(session: Session, round_ids: list[int]) -> list[tuple[int, int]]:
    """(decision id, round id) of the decisions in ``round_ids`` that are the latest decision
    of a live job (index (job, id) answers the 'newer decision?' probe); a decision about an
    earlier job of the same name is not the live job's."""
    newer = aliased(DecisionRow)
    latest = ~select(newer.id).where(newer.job == DecisionRow.job, newer.id > DecisionRow.id).exists()
    stmt = (select(DecisionRow.id, DecisionRow.round_id)
            .join(JobRow, and_(JobRow.name == DecisionRow.job, JobRow.created_at == DecisionRow.job_created_at))
            .where(DecisionRow.round_id.in_(round_ids), JobRow.state.in_(LIVE_STATES), latest))
    return [(int(d), int(r)) for d, r in session.execute(stmt)]


def prune_batch(db: Database, cutoff: datetime, batch: int, after: int = 0) -> PruneBatch:
    """Prune up to ``batch`` rounds that ended before ``cutoff`` with id > ``after``, in one transaction."""
    if not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"batch must be within 1..{MAX_BATCH}, got {batch}")
    now = db.now()
    with db.write() as session:
        ids = list(session.scalars(select(RoundRow.id).where(RoundRow.ended_at < cutoff, RoundRow.id > after)
                                   .order_by(RoundRow.id).limit(batch)))
        if not ids:
            return PruneBatch(0, 0, 0, after)
        protected = _protected(session, ids)
        keep_decisions = [d for d, _ in protected]
        keep_rounds = sorted({r for _, r in protected})
        doomed = [i for i in ids if i not in set(keep_rounds)]
        decisions = delete(DecisionRow).where(DecisionRow.round_id.in_(ids))
        if keep_decisions:
            decisions = decisions.where(DecisionRow.id.not_in(keep_decisions))
        deleted_decisions = int(getattr(session.execute(decisions), "rowcount", 0) or 0)
        deleted_rounds = 0
        if doomed:
            deleted_rounds = int(getattr(session.execute(delete(RoundRow).where(RoundRow.id.in_(doomed))),
                                         "rowcount", 0) or 0)
        if deleted_rounds or deleted_decisions:
            _advance(session, cutoff, now, deleted_rounds, deleted_decisions)
        return PruneBatch(deleted_rounds, deleted_decisions, len(keep_rounds), ids[-1])


def _advance(session: Session, cutoff: datetime, now: datetime, rounds: int, decisions: int) -> None:
    row = session.get(AuditPruningRow, 1, with_for_update=True)
    if row is None:
        session.add(AuditPruningRow(id=1, pruned_before=cutoff, pruned_at=now, rounds_pruned=rounds,
                                    decisions_pruned=decisions))
        return
    row.pruned_before = max(row.pruned_before, cutoff)
    row.pruned_at = now
    row.rounds_pruned += rounds
    row.decisions_pruned += decisions


def pruning(db: Database) -> Pruning | None:
    with db.read() as session:
        row = session.get(AuditPruningRow, 1)
        if row is None:
            return None
        return Pruning(row.pruned_before, row.pruned_at, row.rounds_pruned, row.decisions_pruned)
