"""Each round's counts per queue, so a tenant's ListRounds shows only its own queues'.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

Rounds recorded before this migration have no per-queue counts: tenants do not see them
(admins still see every round with its totals). Deleting a round deletes its counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "placement_round_queues",
        sa.Column("round_id", ID, nullable=False),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("pending_count", sa.Integer(), nullable=False),
        sa.Column("placed_count", sa.Integer(), nullable=False),
        sa.Column("unplaced_count", sa.Integer(), nullable=False),
        sa.Column("preempted_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["round_id"], ["placement_rounds.id"],
                                name=op.f("fk_placement_round_queues_round_id_placement_rounds"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("round_id", "queue", name=op.f("pk_placement_round_queues")),
    )
    op.create_index(op.f("ix_placement_round_queues_queue_round_id"), "placement_round_queues", ["queue", "round_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_placement_round_queues_queue_round_id"), table_name="placement_round_queues")
    op.drop_table("placement_round_queues")
