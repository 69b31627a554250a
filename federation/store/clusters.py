"""Member clusters as their agents report them, with epoch fencing and failover.

Fencing: every agent hello carries an epoch (incremented per agent process / leader
term). A higher epoch replaces the registration; an equal one is the same agent
reconnecting; a lower one is a stale leader and gets ``accepted=False`` (fenced). Every
later write from an agent (heartbeat, snapshot, work status) names its epoch and is
refused with ``StaleEpoch`` unless it is the current one, in the same transaction as the
write, so a deposed agent cannot slip a write in between a check and an update.

A lost cluster (silent past its grace period) must register again before its writes are
accepted: ``mark_lost`` requeues its jobs and withdraws its works atomically, so when the
agent returns it is told what to remove before it is given anything new.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import Text, cast, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Taint
from federation.domain.resources import GPU, Resources
from federation.domain.states import ACTIVE_STATES, JobState, WorkState
from federation.store.codec import from_json, snapshot_from_json, snapshot_to_json, to_json
from federation.store.engine import Database
from federation.store.errors import Conflict, NotFound, StaleEpoch
from federation.store.lifecycle import lock_jobs, move, withdraw_works
from federation.store.models import ClusterRow, JobRow, WorkRow
from federation.store.records import ClusterLoss, ClusterRecord, Registration, SnapshotSummary


def _summary(row: ClusterRow) -> SnapshotSummary | None:
    if row.snapshot_at is None:
        return None
    return SnapshotSummary(
        taken_at=row.snapshot_at,
        nodes=row.nodes,
        ready_nodes=row.ready_nodes,
        hypernodes=row.hypernodes,
        max_tier=row.max_tier,
        allocatable=Resources({k: int(v) for k, v in row.allocatable.items()}),
        free=Resources({k: int(v) for k, v in row.free.items()}),
    )


def cluster_record(row: ClusterRow, active_jobs: int = 0) -> ClusterRecord:
    return ClusterRecord(
        name=row.name,
        epoch=row.epoch,
        agent_id=row.agent_id,
        labels={str(k): str(v) for k, v in row.labels.items()},
        taints=tuple(from_json(Taint, t) for t in row.taints),
        healthy=row.healthy,
        lost=row.lost,
        registered_at=row.registered_at,
        last_heartbeat=row.last_heartbeat,
        summary=_summary(row),
        tree_error=row.tree_error,
        active_jobs=active_jobs,
        admin_taints=tuple(from_json(Taint, t) for t in (row.admin_taints or [])),
    )


def _lock(session: Session, name: str) -> ClusterRow:
    row = session.scalars(select(ClusterRow).where(ClusterRow.name == name).with_for_update()).one_or_none()
    if row is None:
        raise NotFound("cluster", name)
    return row


def check_epoch(row: ClusterRow, epoch: int) -> None:
    """Refuse a write from anything but the current, non-lost registration."""
    if epoch < row.epoch or row.lost:
        raise StaleEpoch(row.name, epoch, row.epoch)
    if epoch > row.epoch:
        raise Conflict(f"cluster {row.name!r}: epoch {epoch} was never registered (current {row.epoch}); "
                       "send a hello first")


class SnapshotCache:
    """Decoded cluster snapshots by cluster, each valid for one digest of its stored JSON.

    Bounded: at most ``limit`` clusters, least recently read dropped first (a round reads
    every cluster, so only clusters gone from the store age out). Thread-safe: rounds and
    other readers load in worker threads. Two threads missing at once both decode; the
    result is the same, so either may be kept.
    """

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        self._entries: OrderedDict[str, tuple[str, ClusterSnapshot]] = OrderedDict()
        self._lock = threading.Lock()
        self.decoded = 0  # payloads decoded (a miss); for tests and metrics

    def get(self, name: str, raw: str) -> ClusterSnapshot | None:
        """The snapshot the JSON text ``raw`` of cluster ``name`` holds (None for JSON null)."""
        digest = hashlib.sha256(raw.encode()).hexdigest()
        with self._lock:
            hit = self._entries.get(name)
            if hit is not None and hit[0] == digest:
                self._entries.move_to_end(name)
                return hit[1]
        payload = json.loads(raw)
        if payload is None:
            return None
        snapshot = snapshot_from_json(payload)
        with self._lock:
            self.decoded += 1
            self._entries[name] = (digest, snapshot)
            self._entries.move_to_end(name)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)
        return snapshot


class ClusterRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._decoded = SnapshotCache()

    def register(
        self,
        name: str,
        epoch: int,
        *,
        agent_id: str = "",
        labels: Mapping[str, str] | None = None,
        taints: tuple[Taint, ...] = (),
    ) -> Registration:
        """An agent hello: accept epoch >= current (clearing lost), fence a lower one."""
        now = self._db.now()
        with self._db.write() as session:
            row = session.scalars(select(ClusterRow).where(ClusterRow.name == name).with_for_update()).one_or_none()
            if row is None:
                row = ClusterRow(
                    name=name, epoch=epoch, agent_id=agent_id, labels=dict(labels or {}),
                    taints=[to_json(t) for t in taints], admin_taints=[], healthy=True, lost=False, registered_at=now,
                    last_heartbeat=now, nodes=0, ready_nodes=0, hypernodes=0, max_tier=0, allocatable={}, free={},
                    gpus_allocatable=0, gpus_free=0,
                )
                session.add(row)
                try:
                    session.flush()
                except IntegrityError as exc:
                    raise Conflict(f"cluster {name!r} registered concurrently; retry", race=True) from exc
                return Registration(cluster_record(row), accepted=True)
            if epoch < row.epoch:
                return Registration(cluster_record(row, _active_jobs(session, name)), accepted=False,
                                    previous_epoch=row.epoch)
            previous = row.epoch
            row.epoch = epoch
            row.agent_id = agent_id
            if labels is not None:
                row.labels = dict(labels)
            row.taints = [to_json(t) for t in taints]
            row.healthy, row.lost = True, False
            row.registered_at = row.last_heartbeat = now
            return Registration(cluster_record(row, _active_jobs(session, name)), accepted=True,
                                previous_epoch=previous)

    def set_admin_taints(self, name: str, taints: tuple[Taint, ...]) -> ClusterRecord:
        """Replace the taints an admin set on ``name`` (kept across agent snapshots)."""
        with self._db.write() as session:
            row = _lock(session, name)
            row.admin_taints = [to_json(t) for t in taints]
            return cluster_record(row, _active_jobs(session, name))

    def heartbeat(self, name: str, epoch: int) -> datetime:
        """Record that the cluster's current agent was heard from now; the time recorded.

        One UPDATE guarded by the epoch and ``lost`` (what ``check_epoch`` checks), so the
        common case loads no row: a cluster's row holds its whole last snapshot (megabytes
        of JSON for a 15,000-node cluster), and every agent sends a heartbeat every few
        seconds (50 idle agents' heartbeats were most of the idle server's CPU, issue 10).
        Only when the UPDATE matches nothing is the row locked and read, to refuse with the
        reason (StaleEpoch, Conflict, NotFound) or, if a registration committed meanwhile
        made the epoch current, to record the heartbeat after all.
        """
        now = self._db.now()
        with self._db.write() as session:
            result = session.execute(
                update(ClusterRow)
                .where(ClusterRow.name == name, ClusterRow.epoch == epoch, ClusterRow.lost.is_(False))
                .values(last_heartbeat=now)
                .execution_options(synchronize_session=False))
            if not getattr(result, "rowcount", 0):  # a CursorResult; Session.execute is typed as Result
                row = _lock(session, name)
                check_epoch(row, epoch)
                row.last_heartbeat = now
        return now

    def record_snapshot(self, epoch: int, snapshot: ClusterSnapshot) -> ClusterRecord:
        """Keep the latest valid snapshot (whole, for the planner) and its summary columns."""
        now = self._db.now()
        free = snapshot.free
        allocatable = snapshot.allocatable
        tree = snapshot.tree
        with self._db.write() as session:
            row = _lock(session, snapshot.name)
            check_epoch(row, epoch)
            row.last_snapshot = snapshot_to_json(snapshot)
            row.snapshot_at = now
            row.last_heartbeat = now
            row.healthy = snapshot.healthy
            row.labels = dict(snapshot.labels)
            row.taints = [to_json(t) for t in snapshot.taints]
            row.nodes = len(snapshot.nodes)
            row.ready_nodes = sum(1 for n in snapshot.nodes if n.usable)
            row.hypernodes = len(snapshot.hypernodes)
            row.max_tier = tree.max_tier if tree.domains else 0
            row.allocatable = dict(allocatable.amounts)
            row.free = dict(free.amounts)
            row.gpus_allocatable = allocatable.get(GPU)
            row.gpus_free = free.get(GPU)
            row.tree_error = None
            return cluster_record(row, _active_jobs(session, row.name))

    def record_tree_error(self, name: str, epoch: int, error: str) -> ClusterRecord:
        """A snapshot was refused for its HyperNode tree: keep the previous one, show why."""
        with self._db.write() as session:
            row = _lock(session, name)
            check_epoch(row, epoch)
            row.tree_error = error
            row.last_heartbeat = self._db.now()
            return cluster_record(row, _active_jobs(session, name))

    def get(self, name: str, *, queues: Collection[str] | None = None) -> ClusterRecord:
        """The cluster; ``active_jobs`` counts only jobs of ``queues`` when given (a tenant's)."""
        with self._db.read() as session:
            row = session.get(ClusterRow, name)
            if row is None:
                raise NotFound("cluster", name)
            return cluster_record(row, _active_jobs(session, name, queues))

    def list(self, *, queues: Collection[str] | None = None) -> builtins.list[ClusterRecord]:
        """Every cluster; ``active_jobs`` counts only jobs of ``queues`` when given (a tenant's)."""
        with self._db.read() as session:
            stmt = (select(JobRow.cluster, func.count()).where(JobRow.state.in_(list(ACTIVE_STATES)))
                    .group_by(JobRow.cluster))
            if queues is not None:
                stmt = stmt.where(JobRow.queue.in_(list(queues)))
            counts = {cluster: int(count) for cluster, count in session.execute(stmt)}
            # Not the snapshot JSON: a record never reads it, and decoding a 20,000-node one
            # cost 0.25 s of every planning round and every listing.
            rows = session.scalars(select(ClusterRow).options(defer(ClusterRow.last_snapshot))
                                   .order_by(ClusterRow.name))
            return [cluster_record(r, counts.get(r.name, 0)) for r in rows]

    def snapshots(self, *, include_lost: bool = False) -> builtins.list[ClusterSnapshot]:
        """The latest snapshot of every cluster (not lost ones unless asked), by name.

        Every planning round calls this, and decoding a snapshot validates and resolves
        its HyperNode tree (a 20,000-node cluster: a large fraction of a second), while
        most clusters' snapshots did not change since the last round. So the stored JSON
        is read as text and only a payload whose digest is new is decoded; an unchanged
        one is the ``ClusterSnapshot`` decoded before (frozen, so it can be shared)."""
        text = cast(ClusterRow.last_snapshot, Text)
        stmt = select(ClusterRow.name, text).where(ClusterRow.last_snapshot.is_not(None)).order_by(ClusterRow.name)
        if not include_lost:
            stmt = stmt.where(ClusterRow.lost.is_(False))
        with self._db.read() as session:
            rows = [(str(name), raw) for name, raw in session.execute(stmt) if raw is not None]
        decoded = (self._decoded.get(name, raw) for name, raw in rows)
        return [snapshot for snapshot in decoded if snapshot is not None]

    def silent_since(self, cutoff: datetime) -> builtins.list[str]:
        """Clusters not yet lost whose last heartbeat is older than ``cutoff``."""
        stmt = select(ClusterRow.name).where(ClusterRow.lost.is_(False), ClusterRow.last_heartbeat < cutoff)
        with self._db.read() as session:
            return list(session.scalars(stmt.order_by(ClusterRow.name)))

    def mark_lost(self, name: str, reason: str = "", *, unless_heard_within: float | None = None) -> ClusterLoss:
        """Declare a cluster lost: requeue its placed/dispatched/running jobs and withdraw
        its works, all in one transaction (nothing is half-failed-over after a crash).

        ``unless_heard_within`` (seconds) re-checks, under the row lock, that the cluster's
        last recorded heartbeat (any write of its agent, or a new hello) is older than that;
        otherwise nothing changes and ``marked`` is False. Why: the watchdog decides from
        its own memory, and the agent may have been heard from (a re-hello, another replica)
        between that decision and this transaction.
        """
        now = self._db.now()
        why = reason or f"cluster {name} lost"
        with self._db.write() as session:
            row, marked = _fence(session, name, now, unless_heard_within)
            if not marked:
                return ClusterLoss(cluster_record(row), (), (), marked=False)
            names = session.scalars(
                select(JobRow.name).where(JobRow.cluster == name, JobRow.state.in_(list(ACTIVE_STATES)))
            ).all()
            requeued, _ = _requeue(session, now, name, names, why, withdraw=False)
            withdrawn = withdraw_works(session, now, cluster=name, message=why)  # every work there, orphans too
            return ClusterLoss(cluster_record(row), requeued, tuple(withdrawn))

    def mark_unreachable(self, name: str, taint: Taint, *, unless_heard_within: float | None = None) -> ClusterLoss:
        """Declare a silent cluster unreachable: fence its registration (``lost``: its agent
        must say hello again, and is then synced) and put ``taint`` (the service's
        ``cluster.karmada.io/unreachable:NoExecute``) on it, in one transaction. Its jobs
        stay where they are: each leaves when its tolerations run out (``evict``, decided
        by ``propagation.taints``). ``unless_heard_within`` as for ``mark_lost``. The taint
        goes with the next accepted hello (``register`` replaces the agent's taints)."""
        now = self._db.now()
        with self._db.write() as session:
            row, marked = _fence(session, name, now, unless_heard_within)
            if not marked:
                return ClusterLoss(cluster_record(row), (), (), marked=False)
            current = (from_json(Taint, raw) for raw in row.taints)
            kept = [t for t in current if (t.key, t.effect) != (taint.key, taint.effect)]
            row.taints = [to_json(t) for t in (*kept, taint)]
            return ClusterLoss(cluster_record(row, _active_jobs(session, name)), (), ())

    def evict(self, name: str, reasons: Mapping[str, str], *,
              unacknowledged: Mapping[str, int] | None = None) -> ClusterLoss:
        """Requeue the jobs ``reasons`` names that are still active on cluster ``name`` and
        withdraw their works, each with its reason, in one transaction (the taint manager's
        eviction; a job that moved or ended meanwhile is left alone). A job in
        ``unacknowledged`` (a dispatch timeout: job -> its Work) is evicted only while it is
        still ``placed`` and that Work still ``pending``: the agent's report may have landed
        since the round read them, and a Work the agent has is not withdrawn for its silence."""
        now = self._db.now()
        requeued: list[str] = []
        withdrawn: list[int] = []
        with self._db.write() as session:
            row = _lock(session, name)
            for job_name in sorted(reasons):
                work_id = (unacknowledged or {}).get(job_name)
                if work_id is not None and not _still_unacknowledged(session, job_name, work_id):
                    continue
                moved, works = _requeue(session, now, name, [job_name], reasons[job_name])
                requeued += moved
                withdrawn += works
            return ClusterLoss(cluster_record(row), tuple(requeued), tuple(withdrawn))


def _still_unacknowledged(session: Session, job: str, work_id: int) -> bool:
    """Whether ``job`` is still placed and ``work_id`` still pending (both rows locked, in
    the cluster, job, work order every writer takes)."""
    row = lock_jobs(session, [job]).get(job)
    if row is None or row.state != JobState.PLACED:
        return False
    state = session.scalar(select(WorkRow.state).where(WorkRow.id == work_id).with_for_update())
    return state == WorkState.PENDING


def _fence(session: Session, name: str, now: datetime, unless_heard_within: float | None) -> tuple[ClusterRow, bool]:
    """Lock the cluster and mark it lost (its agent must say hello again), unless it was
    heard from within ``unless_heard_within`` seconds; whether it was marked."""
    row = _lock(session, name)
    if (unless_heard_within is not None and not row.lost
            and row.last_heartbeat > now - timedelta(seconds=unless_heard_within)):
        return row, False
    row.lost = True
    row.healthy = False
    return row, True


def _requeue(session: Session, now: datetime, cluster: str, names: Sequence[str], why: str,
             withdraw: bool = True) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Move the active jobs among ``names`` placed on ``cluster`` back to pending and
    (``withdraw``) withdraw their works there."""
    requeued: list[str] = []
    for job_name, job in sorted(lock_jobs(session, names).items()):
        if job.cluster == cluster and job.state in ACTIVE_STATES:
            move(session, job, JobState.PENDING, now, reason=why)
            requeued.append(job_name)
    if not requeued or not withdraw:
        return tuple(requeued), ()
    withdrawn = withdraw_works(session, now, jobs=requeued, cluster=cluster, message=why)
    return tuple(requeued), tuple(withdrawn)


def _active_jobs(session: Session, cluster: str, queues: Collection[str] | None = None) -> int:
    stmt = select(func.count()).select_from(JobRow).where(
        JobRow.cluster == cluster, JobRow.state.in_(list(ACTIVE_STATES))
    )
    if queues is not None:
        stmt = stmt.where(JobRow.queue.in_(list(queues)))
    return int(session.scalar(stmt) or 0)
