"""Schema migrations callable from code (``federation db upgrade --db URL`` calls these).

The Alembic scripts live in the installed ``migrations`` package; we locate them through
the package rather than a path relative to the working directory, so the same code works
from a checkout, an installed wheel and the container image. Migrations are explicit:
nothing here runs implicitly at service start in production (DESIGN: never implicit).
"""

from __future__ import annotations

import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine, text

from federation.store.engine import Database, make_engine, translated
from federation.store.errors import UnknownRevision


def migrations_dir() -> Path:
    """The directory of the installed ``migrations`` package (env.py, versions/).

    Uses ``__path__`` rather than ``__file__`` so that it also works when an older
    editable install registered ``migrations`` as a namespace package.
    """
    import migrations

    for entry in migrations.__path__:
        if (Path(entry) / "env.py").is_file():
            return Path(entry).resolve()
    raise RuntimeError(f"no Alembic env.py in the migrations package ({list(migrations.__path__)})")


def config(url: str | None = None, connection: Connection | None = None) -> Config:
    """An Alembic config without an ini file (script location from the package)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    cfg.attributes["configure_logger"] = False
    return cfg


# pg_advisory_xact_lock key held by a migration for its whole transaction ("fedmigr").
_MIGRATION_LOCK = 0x6665646D69677200


def _serialised(conn: Connection) -> None:
    """Make a second migration of the same database wait for the first, then find it done.

    Why: two replicas (a migration Job retried while the first run still holds its
    transaction, two services opening one SQLite file) would each read the old revision
    and both run the same DDL; the second failed ("relation already exists", "database is
    locked"). PostgreSQL: an advisory lock taken first in the migration's transaction,
    waited for without the connection's ``lock_timeout`` (a migration may take minutes),
    which then applies again to the DDL. SQLite: the transaction began with ``BEGIN
    IMMEDIATE`` (``Database.core_write``), so the second waits on the busy timeout.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SET LOCAL lock_timeout = 0"))
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        conn.execute(text("SET LOCAL lock_timeout TO DEFAULT"))


# What a revision argument may be: head, heads, base, a revision id (or its prefix), each
# with an optional relative step, or a step alone (+2, -1). Alembic itself met an empty one
# or a branch-label form (0009@head) with a bare ``assert``: an AssertionError, not a
# CommandError, so the command printed a traceback instead of one line.
_REVISION = re.compile(r"[+-][0-9]+|[A-Za-z0-9_]+(?:[+-][0-9]+)?")


def _with_connection(target: str | Engine, action: str, revision: str) -> None:
    if not _REVISION.fullmatch(revision):
        raise UnknownRevision(revision, "not a revision (head, base, a revision id, or a step such as -1 or +2)")
    engine = target if isinstance(target, Engine) else make_engine(target, foreign_keys=False, pool_size=1)
    try:
        with Database(engine).core_write() as conn:
            _serialised(conn)
            cfg = config(connection=conn)
            try:
                if action == "upgrade":
                    command.upgrade(cfg, revision)
                else:
                    command.downgrade(cfg, revision)
            except CommandError as exc:  # alembic's word for a revision it cannot resolve or reach
                raise UnknownRevision(revision, " ".join(str(exc).split())) from None
    finally:
        if not isinstance(target, Engine):
            engine.dispose()


def upgrade(target: str | Engine, revision: str = "head") -> None:
    """Upgrade the database at ``target`` (URL or engine) to ``revision``."""
    _with_connection(target, "upgrade", revision)


def downgrade(target: str | Engine, revision: str) -> None:
    """Downgrade the database at ``target`` to ``revision`` (``base`` drops everything)."""
    _with_connection(target, "downgrade", revision)


def head() -> str:
    """The newest revision shipped with this code."""
    revision = ScriptDirectory.from_config(config()).get_current_head()
    if revision is None:  # pragma: no cover - the package always ships versions
        raise RuntimeError("no migrations found")
    return revision


def current(target: str | Engine) -> str | None:
    """The database's revision (None for an empty database)."""
    engine = target if isinstance(target, Engine) else make_engine(target, pool_size=1)
    try:
        with translated(), engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        if not isinstance(target, Engine):
            engine.dispose()


def is_at_head(target: str | Engine) -> bool:
    """True when the schema is exactly what this code expects."""
    return current(target) == head()
