"""Engines and short transactions, with database failures turned into store errors.

Every repository call is one short transaction opened here: ``Database.read()`` or
``Database.write()``. Why so strict: the service calls the store from a thread pool, so a
transaction must never span an await, and a call that is one transaction is trivially
atomic and retryable.

SQLite (the embedded default): WAL so readers never block the writer, foreign keys on,
and write transactions start with ``BEGIN IMMEDIATE``. Why: in SQLite a deferred
transaction that reads and then writes can fail at the upgrade to a write lock
(``SQLITE_BUSY``) without waiting; taking the write lock up front makes concurrent
writers queue on the busy timeout instead. Python 3.11's sqlite3 cannot do this itself,
so SQLAlchemy emits BEGIN (the documented recipe).

PostgreSQL: a pool sized for the service, ``pool_pre_ping`` so a connection the server
dropped (restart, failover, ``pg_terminate_backend``) is replaced on the next checkout
instead of failing a call, and lock/idle timeouts so a stuck transaction cannot hold
rows forever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from federation.store.errors import Conflict, StoreError, Unavailable

DEFAULT_URL = "sqlite:///federation.db"
Clock = Callable[[], datetime]
_WRITE = "federation_write"


def utc_now() -> datetime:
    return datetime.now(UTC)


def make_engine(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int = 20,
    foreign_keys: bool = True,
    pre_ping: bool = True,
    echo: bool = False,
) -> Engine:
    """An engine configured for the store (see the module docstring for why).

    ``foreign_keys=False`` is for SQLite schema migrations only: Alembic's batch mode
    recreates tables, and enforcing foreign keys while it does would cascade deletes.
    ``pre_ping=False`` saves one round trip per call on PostgreSQL at the price of one
    failed call (``Unavailable``) after the server drops connections; keep the default
    unless a benchmark shows the ping matters.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        memory = parsed.database in (None, "", ":memory:")
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if memory:  # one shared connection, else every checkout sees a new empty database
            kwargs["poolclass"] = StaticPool
        engine = create_engine(parsed, echo=echo, **kwargs)
        _sqlite_events(engine, wal=not memory, foreign_keys=foreign_keys)
        return engine
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args = {
            "connect_timeout": 5,
            "application_name": "federation",
            "options": "-c lock_timeout=10s -c idle_in_transaction_session_timeout=60s",
        }
    return create_engine(
        parsed,
        echo=echo,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=pre_ping,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args=connect_args,
    )


def _sqlite_events(engine: Engine, *, wal: bool, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (below)
        cursor = dbapi_connection.cursor()
        if wal:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _is_schema_error(exc: sa_exc.DBAPIError) -> bool:
    message = str(exc.orig).lower()
    return "no such table" in message or "no such column" in message


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Turn driver failures into store errors; our own ``StoreError`` passes unchanged.

    Connection loss, refused connections, pool exhaustion, lock timeouts and a locked
    SQLite file all become ``Unavailable`` (retryable); an unhandled constraint violation
    (a race the repository did not anticipate) becomes ``Conflict``.
    """
    try:
        yield
    except StoreError:
        raise
    except sa_exc.IntegrityError as exc:
        raise Conflict(f"constraint violated: {exc.orig}", race=True) from exc
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise Unavailable(f"database connection lost: {exc.orig}") from exc
        if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError) and not _is_schema_error(exc):
            raise Unavailable(f"database unavailable: {exc.orig}") from exc
        raise
    except sa_exc.TimeoutError as exc:
        raise Unavailable(f"database connection pool exhausted: {exc}") from exc


class Database:
    """An engine plus the two kinds of short transaction the repositories use."""

    def __init__(self, engine: Engine, clock: Clock = utc_now, *, settle_seconds: float = 5.0) -> None:
        self.engine = engine
        self.clock = clock
        self.settle_seconds = settle_seconds
        self.dialect = engine.dialect.name
        self._writer = engine.execution_options(**{_WRITE: True})
        self._autocommit_engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._readers = sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)
        self._writers = sessionmaker(bind=self._writer, expire_on_commit=False, autoflush=False)

    @property
    def postgres(self) -> bool:
        return self.dialect == "postgresql"

    def now(self) -> datetime:
        value = self.clock()
        if value.tzinfo is None:
            raise ValueError("the store clock must return timezone-aware datetimes")
        return value.astimezone(UTC)

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only transaction (a consistent snapshot on both dialects)."""
        with translated(), self._readers.begin() as session:
            yield session

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        """A read-write transaction; commits on success, rolls back on any exception."""
        with translated(), self._writers.begin() as session:
            yield session

    @contextlib.contextmanager
    def core_write(self) -> Iterator[Connection]:
        """A Core connection in a write transaction: the hot paths skip the ORM session."""
        with translated(), self._writer.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def core_statement(self) -> Iterator[Connection]:
        """A Core connection in autocommit mode (one statement, one round trip)."""
        with translated(), self._autocommit_engine.connect() as conn:
            yield conn

    def ping(self) -> None:
        with translated(), self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
