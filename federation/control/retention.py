"""``--audit-retention``: prune the planning audit in the background, in bounded batches.

The audit gains a round per planning round with pending work and a decision per placed
or changed job; without retention it grows forever (issue 14). A pass runs every
``interval_seconds``: it deletes rounds that ended more than ``retention_seconds`` ago,
``batch`` rounds per store transaction (``store.audit.prune_batch``, which keeps the
latest decision of every live job), pausing between batches so other writers (rounds,
submissions) get the database in between, and never on the event loop. A failed batch
is logged and retried at the next pass; a pass is idempotent, so several replicas
pruning at once only repeat each other's deletes (the rows are gone or locked).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from federation.control.leader_task import LeaderTask
from federation.metrics.instruments import NO_METRICS, ServiceMetrics

log = logging.getLogger(__name__)

DEFAULT_BATCH = 500
MAX_INTERVAL_SECONDS = 600.0


def default_interval(retention_seconds: float) -> float:
    """Prune ten times per retention period, at most every 10 minutes, at least every second."""
    return min(MAX_INTERVAL_SECONDS, max(1.0, retention_seconds / 10))


@dataclass(frozen=True)
class PassResult:
    rounds: int = 0
    decisions: int = 0
    kept_rounds: int = 0
    batches: int = 0


class AuditRetention:
    def __init__(self, store: Any, retention_seconds: float, *, interval_seconds: float | None = None,
                 batch: int = DEFAULT_BATCH, pause_seconds: float = 0.05,
                 metrics: ServiceMetrics = NO_METRICS) -> None:
        if retention_seconds <= 0:
            raise ValueError(f"retention must be positive, got {retention_seconds}")
        self._store = store
        self._retention = timedelta(seconds=retention_seconds)
        self._interval = interval_seconds if interval_seconds is not None else default_interval(retention_seconds)
        self._batch = batch
        self._pause = pause_seconds
        self._metrics = metrics
        self._task = LeaderTask("audit-retention", "audit retention: pass", self._pass, self._interval)

    async def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _pass(self) -> float:
        await self.prune_now()
        return self._interval

    async def prune_now(self) -> PassResult:
        """One pass: every round that ended before now - retention, batch by batch."""
        cutoff = self._store.db.now() - self._retention
        after, total = 0, PassResult()
        while True:
            batch = await asyncio.to_thread(self._store.audit.prune_batch, cutoff, self._batch, after)
            if batch.examined == 0:
                break
            total = PassResult(total.rounds + batch.rounds, total.decisions + batch.decisions,
                               total.kept_rounds + batch.kept_rounds, total.batches + 1)
            self._metrics.audit_pruned(batch.rounds, batch.decisions)
            after = batch.last_round_id
            if batch.examined < self._batch:
                break
            await asyncio.sleep(self._pause)
        if total.rounds or total.decisions:
            log.info("audit retention: pruned %d round(s) and %d decision(s) that ended before %s in %d batch(es); "
                     "kept %d round(s) holding live jobs' latest decisions", total.rounds, total.decisions,
                     cutoff.isoformat(timespec="seconds"), total.batches, total.kept_rounds)
        return total
