"""Alembic environment for SQLite and PostgreSQL.

Runs online only (a real connection). The connection comes, in order of preference, from
``config.attributes["connection"]`` (``federation.store.migrate`` passes one), the
``sqlalchemy.url`` main option, ``-x db=URL``, or ``$FEDERATION_DB``. SQLite uses batch
mode (``render_as_batch``) because it cannot ALTER most things in place; batch mode
recreates tables, so migrations on SQLite run with foreign keys off.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from federation.store.engine import DEFAULT_URL, make_engine
from federation.store.models import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    return (
        config.get_main_option("sqlalchemy.url")
        or context.get_x_argument(as_dictionary=True).get("db")
        or os.environ.get("FEDERATION_DB")
        or DEFAULT_URL
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url(), foreign_keys=False, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
