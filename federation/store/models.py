"""SQLAlchemy models: the federation's durable state, identical on SQLite and PostgreSQL.

The Alembic migrations in ``migrations/versions`` create exactly this schema; a test
compares the two (autogenerate must find no difference), so a model change without a
migration fails CI.

Choices and why:
- Names are primary keys (queues, jobs, clusters): they are unique across the
  federation by contract, every API addresses objects by name, and a natural key lets
  an idempotent submit be a single ``INSERT ... ON CONFLICT DO NOTHING``.
- Whole domain objects the store never queries inside (job spec, cluster snapshot) are
  JSON (JSONB on PostgreSQL); the fields it filters or sorts on are real columns.
- Times are timezone-aware UTC everywhere (``UtcDateTime``), so SQLite (which has no
  time zones) and PostgreSQL return the same values.
- ``job_events`` ids are the resumable WatchJobs cursor; ``sqlite_autoincrement`` stops
  SQLite from reusing the id of a deleted last row, which would break resumption.
- Audit rows (rounds, decisions) do not reference jobs by foreign key: the record of why
  something happened outlives the job.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from federation.domain.states import JOB_STATES, WORK_STATES

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

OUTCOMES = ("placed", "unplaced", "preempted")

# JSON on SQLite, JSONB on PostgreSQL (binary, indexable, no duplicate keys).
Json = JSON().with_variant(JSONB(), "postgresql")
# 64-bit ids on PostgreSQL; SQLite only autoincrements a column declared INTEGER.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both dialects (SQLite stores naive UTC text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use timezone-aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UtcDateTime(), dict[str, Any]: Json, list[Any]: Json}


class QueueRow(Base):
    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    weight: Mapped[int] = mapped_column(Integer, default=1)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    capability: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    guarantee: Mapped[dict[str, Any]] = mapped_column(Json)
    deserved: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    reclaimable: Mapped[bool] = mapped_column(Boolean, default=True)
    parent: Mapped[str | None] = mapped_column(
        String(63), ForeignKey("queues.name", ondelete="RESTRICT"), nullable=True, index=True
    )
    owners: Mapped[list[Any]] = mapped_column(Json)
    topology_wait_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, default=1)
    # Where the queue's pods may go (migration 0007; docs/design/limits.md).
    namespaces: Mapped[list[Any]] = mapped_column(Json, server_default=text("'[]'"))
    default_namespace: Mapped[str] = mapped_column(String(63), server_default="default")
    pod_security: Mapped[str] = mapped_column(String(16), server_default="baseline")
    allow_system_namespaces: Mapped[bool] = mapped_column(Boolean, server_default=false())


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_in("state", JOB_STATES), name="state"),
        Index(None, "created_at", "name"),
        Index(None, "state", "created_at", "name"),
        Index(None, "queue", "state"),
        Index(None, "cluster", "state"),
        Index(None, "expires_at"),
    )

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    queue: Mapped[str] = mapped_column(String(63), ForeignKey("queues.name", ondelete="CASCADE"))
    tenant: Mapped[str] = mapped_column(String(253), default="")
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    spec_digest: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    unschedulable: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str] = mapped_column(Text, default="")
    message: Mapped[str] = mapped_column(Text, default="")
    cluster: Mapped[str | None] = mapped_column(String(253), nullable=True)
    hypernode: Mapped[str | None] = mapped_column(String(253), nullable=True)
    tier: Mapped[int | None] = mapped_column(Integer, nullable=True)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, default=1)
    # When a finished job with ttlSecondsAfterFinished is deleted (migration 0010): set once,
    # as it enters a terminal state; NULL for every other job. A column, not the spec's
    # field, so the leader's sweep is one indexed range read (control/job_ttl.py).
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class JobWaitRow(Base):
    """One name a job waits for with ``after`` (a JobFlow's ``dependsOn``): written with the
    job at submission, gone with it (``ON DELETE CASCADE``; migration 0011).

    Why a table: the TTL sweep (``store.job_expiry``) must not delete a finished job that
    an unfinished job waits for (the round would read the missing name as never
    submitted and hold the waiter for ever), and it must learn that with an indexed
    lookup per expired job instead of decoding every waiting job's spec. The waiter's
    namespace is kept here because the round's tenant rule compares it (``store.job_waits``).
    """

    __tablename__ = "job_waits"
    __table_args__ = (Index(None, "dependency"),)

    job: Mapped[str] = mapped_column(String(63), ForeignKey("jobs.name", ondelete="CASCADE"), primary_key=True)
    dependency: Mapped[str] = mapped_column(String(63), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(63))


class JobEventRow(Base):
    __tablename__ = "job_events"
    __table_args__ = (
        Index(None, "job", "id"),
        Index(None, "queue", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job: Mapped[str] = mapped_column(String(63), ForeignKey("jobs.name", ondelete="CASCADE"))
    queue: Mapped[str] = mapped_column(String(63))
    type: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    time: Mapped[datetime]


class ClusterRow(Base):
    __tablename__ = "clusters"

    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger)
    agent_id: Mapped[str] = mapped_column(String(253), default="")
    labels: Mapped[dict[str, Any]] = mapped_column(Json)
    taints: Mapped[list[Any]] = mapped_column(Json)
    # Taints an admin set (fedctl cluster taint); the agent's snapshots never overwrite them.
    admin_taints: Mapped[list[Any]] = mapped_column(Json, default=list, server_default="[]")
    healthy: Mapped[bool] = mapped_column(Boolean, default=True)
    lost: Mapped[bool] = mapped_column(Boolean, default=False)
    registered_at: Mapped[datetime]
    last_heartbeat: Mapped[datetime]
    last_snapshot: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    snapshot_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    nodes: Mapped[int] = mapped_column(Integer, default=0)
    ready_nodes: Mapped[int] = mapped_column(Integer, default=0)
    hypernodes: Mapped[int] = mapped_column(Integer, default=0)
    max_tier: Mapped[int] = mapped_column(Integer, default=0)
    allocatable: Mapped[dict[str, Any]] = mapped_column(Json)
    free: Mapped[dict[str, Any]] = mapped_column(Json)
    gpus_allocatable: Mapped[int] = mapped_column(BigInteger, default=0)
    gpus_free: Mapped[int] = mapped_column(BigInteger, default=0)
    tree_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class WorkRow(Base):
    __tablename__ = "works"
    __table_args__ = (
        UniqueConstraint("job", "version"),
        CheckConstraint(_in("state", WORK_STATES), name="state"),
        Index(None, "cluster", "state"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job: Mapped[str] = mapped_column(String(63), ForeignKey("jobs.name", ondelete="CASCADE"))
    cluster: Mapped[str] = mapped_column(String(253), ForeignKey("clusters.name", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class RoundRow(Base):
    __tablename__ = "placement_rounds"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime]
    trigger: Mapped[str] = mapped_column(String(64), default="")
    policy: Mapped[str] = mapped_column(String(64), default="")
    solver_status: Mapped[str] = mapped_column(String(32), default="")
    objective: Mapped[float] = mapped_column(Float, default=0.0)
    bound: Mapped[float] = mapped_column(Float, default=0.0)
    input_digest: Mapped[str] = mapped_column(String(64), default="")
    pending_count: Mapped[int] = mapped_column(Integer, default=0)
    placed_count: Mapped[int] = mapped_column(Integer, default=0)
    unplaced_count: Mapped[int] = mapped_column(Integer, default=0)
    preempted_count: Mapped[int] = mapped_column(Integer, default=0)
    solve_seconds: Mapped[float] = mapped_column(Float, default=0.0)


class RoundQueueRow(Base):
    """A round's counts for one queue (records.QueueCounts): what a tenant may see of it."""

    __tablename__ = "placement_round_queues"
    __table_args__ = (Index(None, "queue", "round_id"),)  # a tenant's rounds, newest first

    round_id: Mapped[int] = mapped_column(BigId, ForeignKey("placement_rounds.id", ondelete="CASCADE"),
                                          primary_key=True)
    queue: Mapped[str] = mapped_column(String(63), primary_key=True)
    pending_count: Mapped[int] = mapped_column(Integer, default=0)
    placed_count: Mapped[int] = mapped_column(Integer, default=0)
    unplaced_count: Mapped[int] = mapped_column(Integer, default=0)
    preempted_count: Mapped[int] = mapped_column(Integer, default=0)


class DecisionRow(Base):
    __tablename__ = "placement_decisions"
    __table_args__ = (
        CheckConstraint(_in("outcome", OUTCOMES), name="outcome"),
        Index(None, "job", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    round_id: Mapped[int] = mapped_column(BigId, ForeignKey("placement_rounds.id", ondelete="CASCADE"), index=True)
    job: Mapped[str] = mapped_column(String(63))
    outcome: Mapped[str] = mapped_column(String(16))
    cluster: Mapped[str | None] = mapped_column(String(253), nullable=True)
    hypernode: Mapped[str | None] = mapped_column(String(253), nullable=True)
    tier: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pods: Mapped[list[Any]] = mapped_column(Json)
    score_terms: Mapped[dict[str, Any]] = mapped_column(Json)
    reason: Mapped[str] = mapped_column(Text, default="")
    constraint: Mapped[str] = mapped_column(String(32), default="")
    closest_cluster: Mapped[str | None] = mapped_column(String(253), nullable=True)
    preemptor: Mapped[str | None] = mapped_column(String(63), nullable=True)
    # Which job of that name the decision is about (its created_at): a name is unique only
    # among jobs that exist, and the audit outlives them. NULL: the job was not found.
    job_created_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class AuditPruningRow(Base):
    """One row (id 1): how far ``--audit-retention`` has pruned the audit, so ``fedctl audit``
    can say that a job's older decisions are gone rather than let them look never made."""

    __tablename__ = "audit_pruning"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pruned_before: Mapped[datetime]  # rounds that ended before this are pruned (but for kept decisions)
    pruned_at: Mapped[datetime]
    rounds_pruned: Mapped[int] = mapped_column(BigInteger, default=0)
    decisions_pruned: Mapped[int] = mapped_column(BigInteger, default=0)


class PolicyRow(Base):
    """A Karmada (Cluster)PropagationPolicy; ``document`` is the Karmada object as applied
    (re-validated into a domain ``PolicyObject`` on read), the columns what is looked up."""

    __tablename__ = "propagation_policies"
    __table_args__ = (UniqueConstraint("kind", "namespace", "name"),)

    ref: Mapped[str] = mapped_column(String(600), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    namespace: Mapped[str] = mapped_column(String(253), default="")
    name: Mapped[str] = mapped_column(String(253))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    document: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, default=1)


class PolicyClaimRow(Base):
    """Which policy a job was last governed by (Karmada's claim): a running job keeps it."""

    __tablename__ = "policy_claims"

    job: Mapped[str] = mapped_column(String(63), ForeignKey("jobs.name", ondelete="CASCADE"), primary_key=True)
    policy: Mapped[str] = mapped_column(String(600), index=True)
    claimed_at: Mapped[datetime]


class PriorityClassRow(Base):
    __tablename__ = "priority_classes"

    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    value: Mapped[int] = mapped_column(Integer)
    global_default: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str] = mapped_column(Text, default="")
    preemption_policy: Mapped[str] = mapped_column(String(32), default="PreemptLowerPriority")
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class LeaseRow(Base):
    """The central's leader lease (docs/design/standby.md): one row per lease name.

    ``epoch`` grows by one at every acquisition and fences the leader's writes; times are
    the database's own clock, so replicas never compare their clocks with each other.
    """

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    holder: Mapped[str] = mapped_column(String(253), default="")
    epoch: Mapped[int] = mapped_column(BigInteger)
    acquired_at: Mapped[datetime]
    renewed_at: Mapped[datetime]
    expires_at: Mapped[datetime]
