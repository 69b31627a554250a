"""Small aggregate reads for the metrics endpoint: job counts and cluster GPU totals.

Why a repository of its own: a Prometheus scrape must cost a couple of indexed GROUP BY
queries, not a listing. ``ClusterRepository.list`` loads every cluster's last snapshot
(node lists as JSON); these read only the summary columns the agent hub already keeps up
to date with each snapshot (``gpus_free``, ``gpus_allocatable``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from federation.store.engine import Database
from federation.store.models import ClusterRow, JobRow


@dataclass(frozen=True)
class ClusterGauge:
    """One cluster as the metrics see it; ``up`` = registered, not lost and healthy."""

    name: str
    up: bool
    reporting: bool  # a valid snapshot has been received (GPU figures are meaningful)
    gpus_free: int
    gpus_allocatable: int


class StatsRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def job_counts(self) -> dict[tuple[str, str], int]:
        """(queue, state) -> jobs; one GROUP BY over the (queue, state) index."""
        stmt = select(JobRow.queue, JobRow.state, func.count()).group_by(JobRow.queue, JobRow.state)
        with self._db.read() as session:
            return {(str(q), str(s)): int(n) for q, s, n in session.execute(stmt)}

    def clusters(self) -> list[ClusterGauge]:
        stmt = select(ClusterRow.name, ClusterRow.healthy, ClusterRow.lost, ClusterRow.snapshot_at,
                      ClusterRow.gpus_free, ClusterRow.gpus_allocatable).order_by(ClusterRow.name)
        with self._db.read() as session:
            return [ClusterGauge(str(name), bool(healthy) and not lost, snapshot_at is not None,
                                 int(free or 0), int(alloc or 0))
                    for name, healthy, lost, snapshot_at, free, alloc in session.execute(stmt)]
