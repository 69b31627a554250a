"""Jobs: when a finished job is deleted under its ``ttlSecondsAfterFinished`` (``expires_at``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29

Set as the job enters a terminal state (succeeded, failed, cancelled) when its spec has a
TTL; the leader deletes the jobs whose time has passed (federation/control/job_ttl.py).
No job stored before this migration can have a TTL (the field was refused), so every
existing row stays NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index(batch.f("ix_jobs_expires_at"), ["expires_at"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index(batch.f("ix_jobs_expires_at"))
        batch.drop_column("expires_at")
