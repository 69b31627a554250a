"""Queues: an optional default topology wait for their jobs (issue 11, topology intent).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.add_column(sa.Column("topology_wait_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.drop_column("topology_wait_seconds")
