"""Each planning decision names which job of its name it is about (``job_created_at``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

Job names are unique only among the jobs that exist: once a queue is deleted with its
finished jobs, another job (of another tenant, say) may take a name again, while the
audit keeps the first job's decisions. A job's audit, its explanation and the "same
decision again?" check read only the decisions of that job. Decisions recorded before
this migration are taken to be about the job of that name that exists now if their round
ended after that job was created; a round that ended before could not have read it, so its
decision is about an earlier job of the name (another tenant's, maybe) and stays NULL, as
do the decisions of a job that no longer exists.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("placement_decisions") as batch:
        batch.add_column(sa.Column("job_created_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE placement_decisions SET job_created_at = "
        "(SELECT jobs.created_at FROM jobs JOIN placement_rounds ON placement_rounds.id = placement_decisions.round_id "
        "WHERE jobs.name = placement_decisions.job AND placement_rounds.ended_at >= jobs.created_at)"
    )


def downgrade() -> None:
    with op.batch_alter_table("placement_decisions") as batch:
        batch.drop_column("job_created_at")
