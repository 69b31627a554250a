"""Integration fixtures: a real PostgreSQL server and fresh databases on both dialects.

Fixtures:
- ``postgres_server`` (session): a throwaway server started with ``hack/postgres.sh``
  (as the ``postgres`` user when we are root); stopped and deleted at session end.
- ``pg_url`` (session): its SQLAlchemy URL (``postgresql+psycopg://...``).
- ``scratch_postgres``: a server of the test's own (for tests that stop it).
- ``db_url``: parametrised ``sqlite`` / ``postgres``; a fresh EMPTY database per test.
- ``migrated_url``: like ``db_url`` but already at the head migration (copied from a
  template migrated once per session, so each test pays a file copy / CREATE DATABASE).
- ``store``: a ``Store`` over ``migrated_url``; ``pg_store``: the PostgreSQL one only.
- ``clock``: a manual clock (``clock.advance(seconds)``) that ``store`` uses.

If PostgreSQL cannot be started the fixtures FAIL with the reason: a missing database
must never turn into silently skipped tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from federation.store import Store
from federation.store import migrate as migrations

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "postgres.sh"


@dataclass
class PostgresServer:
    """A running throwaway server; ``stop``/``start`` keep its data and port."""

    directory: Path
    url: str
    _env: dict[str, str] = field(default_factory=dict, repr=False)

    def _run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), command], env=self._env, capture_output=True, text=True, timeout=300)

    def start(self) -> None:
        proc = self._run("start")
        if proc.returncode != 0:
            pytest.fail(f"PostgreSQL could not be started by {SCRIPT}:\n{proc.stderr}", pytrace=False)
        self.url = proc.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        self._run("stop")

    def purge(self) -> None:
        self._run("purge")
        shutil.rmtree(self.directory, ignore_errors=True)

    def database_url(self, name: str) -> str:
        return make_url(self.url).set(database=name).render_as_string(hide_password=False)


def start_postgres() -> PostgresServer:
    """Start a fresh server in a new temporary directory (fails the test if impossible)."""
    directory = Path(tempfile.mkdtemp(prefix="federation-pg-"))
    os.chmod(directory, 0o755)
    server = PostgresServer(directory, "", {**os.environ, "PGTEST_DIR": str(directory)})
    server.start()
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.purge()


@pytest.fixture
def scratch_postgres() -> Iterator[PostgresServer]:
    """A server of the test's own, for tests that stop and restart it."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.purge()


@pytest.fixture(scope="session")
def pg_url(postgres_server: PostgresServer) -> str:
    return postgres_server.url


@pytest.fixture(scope="session")
def pg_admin(pg_url: str) -> Iterator[Engine]:
    # No pooling: tests stop and restart the server, and a pooled admin connection
    # would then be dead at the next CREATE/DROP DATABASE.
    engine = create_engine(pg_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def pg_template(postgres_server: PostgresServer, pg_admin: Engine) -> str:
    """A database migrated to head once; tests get copies of it."""
    name = "federation_template"
    with pg_admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name} TEMPLATE template0"))
    migrations.upgrade(postgres_server.database_url(name))
    return name


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "federation.db"
    migrations.upgrade(f"sqlite:///{path}")
    return path


def _fresh_pg(server: PostgresServer, admin: Engine, template: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:16]}"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name} TEMPLATE {template}"))
    try:
        yield server.database_url(name)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database on each dialect."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'federation.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    yield from _fresh_pg(server, request.getfixturevalue("pg_admin"), "template0")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database at the head migration on each dialect."""
    if request.param == "sqlite":
        path = tmp_path / "federation.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    yield from _fresh_pg(server, request.getfixturevalue("pg_admin"), request.getfixturevalue("pg_template"))


class ManualClock:
    """A clock tests move by hand; starts at a fixed instant, ticks 1 ms per reading so
    successive writes get distinct, ordered timestamps."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(migrated_url: str, clock: ManualClock) -> Iterator[Store]:
    s = Store(migrated_url, clock=clock)
    try:
        yield s
    finally:
        s.dispose()


@pytest.fixture
def pg_store(
    postgres_server: PostgresServer, pg_admin: Engine, pg_template: str, clock: ManualClock
) -> Iterator[Store]:
    """A migrated PostgreSQL store (for behaviour only PostgreSQL has: concurrency gaps)."""
    for url in _fresh_pg(postgres_server, pg_admin, pg_template):
        s = Store(url, clock=clock)
        try:
            yield s
        finally:
            s.dispose()
