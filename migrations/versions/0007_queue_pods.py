"""Queues say where their pods may go: namespaces, a default namespace, a Pod Security level.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

Existing queues get the safe defaults: no listed namespaces (only ``default``), the
``baseline`` Pod Security Standard, and no system namespaces (docs/design/limits.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.add_column(sa.Column("namespaces", JSON, nullable=False, server_default=sa.text("'[]'")))
        batch.add_column(sa.Column("default_namespace", sa.String(63), nullable=False,
                                   server_default="default"))
        batch.add_column(sa.Column("pod_security", sa.String(16), nullable=False, server_default="baseline"))
        batch.add_column(sa.Column("allow_system_namespaces", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.drop_column("allow_system_namespaces")
        batch.drop_column("pod_security")
        batch.drop_column("default_namespace")
        batch.drop_column("namespaces")
