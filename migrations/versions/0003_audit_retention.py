"""Audit retention: the audit_pruning watermark (how far --audit-retention has pruned).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "audit_pruning",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pruned_before", TS, nullable=False),
        sa.Column("pruned_at", TS, nullable=False),
        sa.Column("rounds_pruned", sa.BigInteger(), nullable=False),
        sa.Column("decisions_pruned", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_pruning")),
    )


def downgrade() -> None:
    op.drop_table("audit_pruning")
