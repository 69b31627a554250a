"""Objects applied once and used by many jobs: propagation policies (with the claims that
bind jobs to them) and priority classes; taints admins set on clusters.

Revision ID: 0004_objects
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_objects"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("admin_taints", JSON, nullable=False, server_default="[]"))
    op.create_table(
        "propagation_policies",
        sa.Column("ref", sa.String(600), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("document", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("ref", name=op.f("pk_propagation_policies")),
        sa.UniqueConstraint("kind", "namespace", "name", name=op.f("uq_propagation_policies_kind_namespace_name")),
    )
    op.create_table(
        "policy_claims",
        sa.Column("job", sa.String(63), nullable=False),
        sa.Column("policy", sa.String(600), nullable=False),
        sa.Column("claimed_at", TS, nullable=False),
        sa.ForeignKeyConstraint(["job"], ["jobs.name"], name=op.f("fk_policy_claims_job_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job", name=op.f("pk_policy_claims")),
    )
    op.create_index(op.f("ix_policy_claims_policy"), "policy_claims", ["policy"])
    op.create_table(
        "priority_classes",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("global_default", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("preemption_policy", sa.String(32), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_priority_classes")),
    )


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("admin_taints")
    op.drop_table("priority_classes")
    op.drop_index(op.f("ix_policy_claims_policy"), table_name="policy_claims")
    op.drop_table("policy_claims")
    op.drop_table("propagation_policies")
