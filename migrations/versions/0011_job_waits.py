"""Jobs: the names each job waits for with ``after`` (``job_waits``), so the TTL sweep keeps them.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29

The sweep (federation/store/job_expiry.py) must not delete a finished job that an
unfinished job waits for (federation/store/job_waits.py); this table lets it find those
with an index instead of decoding specs. Submission writes the rows from now on; the
upgrade writes them for every job already stored, from the ``after`` list of its spec
(the codec leaves out ``namespace`` when it is ``default``). Downgrade drops the table:
the sweep of the release before it does not read it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BACKFILL = {
    "postgresql": (
        "INSERT INTO job_waits (job, dependency, namespace) "
        "SELECT DISTINCT jobs.name, waited.value, COALESCE(jobs.spec ->> 'namespace', 'default') "
        "FROM jobs CROSS JOIN LATERAL jsonb_array_elements_text("
        "CASE WHEN jsonb_typeof(jobs.spec -> 'after') = 'array' THEN jobs.spec -> 'after' ELSE '[]' END) AS waited"
    ),
    "sqlite": (
        "INSERT INTO job_waits (job, dependency, namespace) "
        "SELECT DISTINCT jobs.name, waited.value, COALESCE(json_extract(jobs.spec, '$.namespace'), 'default') "
        "FROM jobs, json_each(jobs.spec, '$.after') AS waited"
    ),
}


def upgrade() -> None:
    op.create_table(
        "job_waits",
        sa.Column("job", sa.String(length=63), nullable=False),
        sa.Column("dependency", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.ForeignKeyConstraint(["job"], ["jobs.name"], name=op.f("fk_job_waits_job_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job", "dependency", name=op.f("pk_job_waits")),
    )
    op.create_index(op.f("ix_job_waits_dependency"), "job_waits", ["dependency"])
    op.execute(_BACKFILL[op.get_bind().dialect.name])


def downgrade() -> None:
    op.drop_index(op.f("ix_job_waits_dependency"), table_name="job_waits")
    op.drop_table("job_waits")
