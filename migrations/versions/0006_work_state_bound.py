"""Work state ``running`` is renamed ``bound``: it has always meant "the gang is bound to
nodes" (its pods hold room), whether or not they have started (issue 9, one state
vocabulary: ``federation.domain.states.WorkState``).

Existing rows are carried: every ``running`` work becomes ``bound`` (and back on
downgrade). The CHECK constraint is replaced around the update; SQLite rebuilds the table
(batch mode), keeping AUTOINCREMENT so work ids are never reused.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "state IN ('pending', 'applied', 'running', 'succeeded', 'failed', 'withdrawn')"
NEW = "state IN ('pending', 'applied', 'bound', 'succeeded', 'failed', 'withdrawn')"


def _rename(before: str, after: str, check: str) -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    # SQLite's rebuild copies the rows into a new table, whose AUTOINCREMENT high-water
    # mark would be the highest id still present: an id of a deleted work could come back.
    seq = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'works'")).scalar() if sqlite else None
    with op.batch_alter_table("works", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_constraint(op.f("ck_works_state"), type_="check")
    works = sa.table("works", sa.column("state", sa.String(16)))
    op.execute(works.update().where(works.c.state == before).values(state=after))
    with op.batch_alter_table("works", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.create_check_constraint(op.f("ck_works_state"), sa.text(check))
    if seq is not None:
        op.execute(sa.text("UPDATE sqlite_sequence SET seq = MAX(seq, :seq) WHERE name = 'works'").bindparams(seq=seq))


def upgrade() -> None:
    _rename("running", "bound", NEW)


def downgrade() -> None:
    _rename("bound", "running", OLD)
