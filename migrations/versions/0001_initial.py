"""Initial schema: queues, jobs, job events, clusters, works, placement rounds and decisions.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Written to stand alone (no import of the models): a migration is a frozen record of
the schema at its revision, while the models keep changing.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)
JOB_STATES = "state IN ('pending', 'placed', 'dispatched', 'running', 'succeeded', 'failed', 'cancelled')"
WORK_STATES = "state IN ('pending', 'applied', 'running', 'succeeded', 'failed', 'withdrawn')"
OUTCOMES = "outcome IN ('placed', 'unplaced', 'preempted')"


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("agent_id", sa.String(253), nullable=False),
        sa.Column("labels", JSON, nullable=False),
        sa.Column("taints", JSON, nullable=False),
        sa.Column("healthy", sa.Boolean(), nullable=False),
        sa.Column("lost", sa.Boolean(), nullable=False),
        sa.Column("registered_at", TS, nullable=False),
        sa.Column("last_heartbeat", TS, nullable=False),
        sa.Column("last_snapshot", JSON, nullable=True),
        sa.Column("snapshot_at", TS, nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("ready_nodes", sa.Integer(), nullable=False),
        sa.Column("hypernodes", sa.Integer(), nullable=False),
        sa.Column("max_tier", sa.Integer(), nullable=False),
        sa.Column("allocatable", JSON, nullable=False),
        sa.Column("free", JSON, nullable=False),
        sa.Column("gpus_allocatable", sa.BigInteger(), nullable=False),
        sa.Column("gpus_free", sa.BigInteger(), nullable=False),
        sa.Column("tree_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_clusters")),
    )
    op.create_table(
        "placement_rounds",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=False),
        sa.Column("trigger", sa.String(64), nullable=False),
        sa.Column("policy", sa.String(64), nullable=False),
        sa.Column("solver_status", sa.String(32), nullable=False),
        sa.Column("objective", sa.Float(), nullable=False),
        sa.Column("bound", sa.Float(), nullable=False),
        sa.Column("input_digest", sa.String(64), nullable=False),
        sa.Column("pending_count", sa.Integer(), nullable=False),
        sa.Column("placed_count", sa.Integer(), nullable=False),
        sa.Column("unplaced_count", sa.Integer(), nullable=False),
        sa.Column("preempted_count", sa.Integer(), nullable=False),
        sa.Column("solve_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placement_rounds")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "queues",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("capability", JSON, nullable=True),
        sa.Column("guarantee", JSON, nullable=False),
        sa.Column("deserved", JSON, nullable=True),
        sa.Column("reclaimable", sa.Boolean(), nullable=False),
        sa.Column("parent", sa.String(63), nullable=True),
        sa.Column("owners", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["parent"], ["queues.name"], name=op.f("fk_queues_parent_queues"),
                                ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_queues")),
    )
    op.create_index(op.f("ix_queues_parent"), "queues", ["parent"])
    op.create_table(
        "jobs",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("tenant", sa.String(253), nullable=False),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("spec_digest", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("unschedulable", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("cluster", sa.String(253), nullable=True),
        sa.Column("hypernode", sa.String(253), nullable=True),
        sa.Column("tier", sa.Integer(), nullable=True),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.CheckConstraint(JOB_STATES, name=op.f("ck_jobs_state")),
        sa.ForeignKeyConstraint(["queue"], ["queues.name"], name=op.f("fk_jobs_queue_queues"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_cluster_state"), "jobs", ["cluster", "state"])
    op.create_index(op.f("ix_jobs_created_at_name"), "jobs", ["created_at", "name"])
    op.create_index(op.f("ix_jobs_queue_state"), "jobs", ["queue", "state"])
    op.create_index(op.f("ix_jobs_state_created_at_name"), "jobs", ["state", "created_at", "name"])
    op.create_table(
        "placement_decisions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("round_id", ID, nullable=False),
        sa.Column("job", sa.String(63), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("cluster", sa.String(253), nullable=True),
        sa.Column("hypernode", sa.String(253), nullable=True),
        sa.Column("tier", sa.Integer(), nullable=True),
        sa.Column("pods", JSON, nullable=False),
        sa.Column("score_terms", JSON, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("constraint", sa.String(32), nullable=False),
        sa.Column("closest_cluster", sa.String(253), nullable=True),
        sa.Column("preemptor", sa.String(63), nullable=True),
        sa.CheckConstraint(OUTCOMES, name=op.f("ck_placement_decisions_outcome")),
        sa.ForeignKeyConstraint(["round_id"], ["placement_rounds.id"],
                                name=op.f("fk_placement_decisions_round_id_placement_rounds"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placement_decisions")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_placement_decisions_job_id"), "placement_decisions", ["job", "id"])
    op.create_index(op.f("ix_placement_decisions_round_id"), "placement_decisions", ["round_id"])
    op.create_table(
        "job_events",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job", sa.String(63), nullable=False),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("time", TS, nullable=False),
        sa.ForeignKeyConstraint(["job"], ["jobs.name"], name=op.f("fk_job_events_job_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_events")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_job_events_job_id"), "job_events", ["job", "id"])
    op.create_index(op.f("ix_job_events_queue_id"), "job_events", ["queue", "id"])
    op.create_table(
        "works",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job", sa.String(63), nullable=False),
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint(WORK_STATES, name=op.f("ck_works_state")),
        sa.ForeignKeyConstraint(["cluster"], ["clusters.name"], name=op.f("fk_works_cluster_clusters"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job"], ["jobs.name"], name=op.f("fk_works_job_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_works")),
        sa.UniqueConstraint("job", "version", name=op.f("uq_works_job_version")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_works_cluster_state"), "works", ["cluster", "state"])


def downgrade() -> None:
    # Dropping a table drops its indexes and constraints; children go before parents.
    for table in ("works", "job_events", "placement_decisions", "jobs", "queues", "placement_rounds", "clusters"):
        op.drop_table(table)
