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

PostgreSQL: a pool sized for the service, a liveness check at checkout so a connection
the server dropped (restart, failover, ``pg_terminate_backend``) is replaced instead of
failing a call, and lock/idle timeouts so a stuck transaction cannot hold rows forever.

Why not SQLAlchemy's ``pool_pre_ping``: it sends ``SELECT 1`` before every transaction,
doubling the round trips of the submit hot path (21 % of the server's CPU under load,
issue 2). A server that drops a connection (terminated backend, shutdown, restart)
first sends an error and closes the socket, so the socket is readable while the
connection sits in the pool: a zero-timeout ``select`` at checkout sees that for free.
Only a connection idle longer than ``ping_idle_seconds`` (default 5 s), which may have
been cut silently (a NAT or firewall timeout, a failover), pays a real ping.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

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
    ping_idle_seconds: float = 5.0,
    echo: bool = False,
) -> Engine:
    """An engine configured for the store (see the module docstring for why).

    ``foreign_keys=False`` is for SQLite schema migrations only: Alembic's batch mode
    recreates tables, and enforcing foreign keys while it does would cascade deletes.
    ``pre_ping`` checks a connection's liveness at checkout (module docstring: a free
    socket check, plus a real ping after ``ping_idle_seconds`` idle); ``pre_ping=False``
    skips even that, at the price of one failed call (``Unavailable``) after the server
    drops connections.
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
    postgres = parsed.get_backend_name() == "postgresql"
    engine = create_engine(
        parsed,
        echo=echo,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=pre_ping and not postgres,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args=connect_args,
    )
    if pre_ping and postgres:
        _liveness_checks(engine, ping_idle_seconds)
    return engine


_RETURNED_AT = "federation_returned_at"


def _liveness_checks(engine: Engine, idle_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
    """Check pooled PostgreSQL connections at checkout (see the module docstring)."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = clock()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned_at = record.info.get(_RETURNED_AT)
        if returned_at is not None:  # None: connected just now, nothing to check
            check_alive(dbapi_connection, idle=clock() - returned_at, idle_seconds=idle_seconds)


def check_alive(dbapi_connection: Any, *, idle: float, idle_seconds: float) -> None:
    """Raise ``DisconnectionError`` (the pool then reconnects) if a pooled connection is dead.

    A pooled connection has no query outstanding, so any readable input means the server
    spoke first: almost always a FATAL error before closing (termination, shutdown).
    The ping after a long idle uses libpq directly, so it does not open a transaction.
    """
    if dbapi_connection.closed or _readable(dbapi_connection.fileno()):
        raise sa_exc.DisconnectionError("the server closed the pooled connection")
    if idle > idle_seconds:
        try:
            status = dbapi_connection.pgconn.exec_(b"SELECT 1").status
        except Exception as exc:
            raise sa_exc.DisconnectionError(f"ping failed: {exc}") from exc
        if status != _TUPLES_OK:
            raise sa_exc.DisconnectionError(f"ping failed (libpq result status {status})")


_TUPLES_OK = 2  # libpq's PGRES_TUPLES_OK (psycopg.pq.ExecStatus.TUPLES_OK)


def _readable(fd: int) -> bool:
    try:
        ready, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return True  # a socket we cannot poll is no socket to use
    return bool(ready)


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


class WriteFence(Protocol):
    """Checked at the start of every write; raises to refuse it (``leases.LeaseFence``).

    ``conn`` is the write's own transaction (None for a single autocommit statement), so
    a check made through it holds for as long as the transaction does.
    """

    def check(self, conn: Connection | None) -> None: ...


class Database:
    """An engine plus the two kinds of short transaction the repositories use.

    ``fence`` (None by default) guards every write: a replica started with leader
    election installs one so that only the leader's writes commit.
    """

    fence: WriteFence | None = None

    def __init__(self, engine: Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock
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
            if self.fence is not None:
                self.fence.check(session.connection())
            yield session

    @contextlib.contextmanager
    def core_write(self) -> Iterator[Connection]:
        """A Core connection in a write transaction: the hot paths skip the ORM session."""
        with translated(), self._writer.begin() as conn:
            if self.fence is not None:
                self.fence.check(conn)
            yield conn

    @contextlib.contextmanager
    def core_statement(self) -> Iterator[Connection]:
        """A Core connection in autocommit mode (one statement, one round trip); a write."""
        if self.fence is not None:
            self.fence.check(None)
        with translated(), self._autocommit_engine.connect() as conn:
            yield conn

    def ping(self) -> None:
        with translated(), self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))


def url_password(url: str) -> str | None:
    """The password of a database URL as SQLAlchemy reads it (None if none, or unparsable),
    for masking in logs: a pattern cannot see where a raw one ends."""
    try:
        password = make_url(url).password
    except (sa_exc.ArgumentError, ValueError):
        return None
    return str(password) if password is not None else None
