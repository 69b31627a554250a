"""Takeover time of a standby central (issue 14's measurement, not an assertion): two
``federation serve --leader-election`` processes on real PostgreSQL, the leader SIGKILLed
10 times per lease (5 s and 15 s); the time from the kill until the standby's gRPC health
says SERVING, polled every 0.1 s. Run: ``.venv/bin/python -m pytest -m perf -s
tests/perf/test_takeover.py``; figures go to docs/benchmarks.md.

The rig is tests/integration/standbykit.py (no agents and no submissions here: the lease,
not the load, decides the takeover time; the integration test covers takeover under load).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from federation.store import migrate as migrations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from standbykit import federation, summary

pytestmark = [pytest.mark.perf, pytest.mark.postgres]
KILLS = 10
_CONFTEST = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:  # the integration conftest's PostgresServer, loaded by path
    spec = importlib.util.spec_from_file_location("integration_conftest_takeover", _CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    pg = module.start_postgres()
    try:
        yield pg
    finally:
        pg.purge()


@pytest.fixture
def db(server: Any) -> Iterator[str]:
    name = f"takeover_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        url = server.database_url(name)
        migrations.upgrade(url)
        yield url
    finally:
        admin.dispose()


@pytest.mark.parametrize("lease", [5.0, 15.0])
async def test_takeover_time(lease: float, db: str, tmp_path: Path) -> None:
    async with federation(db, tmp_path, lease, agents=False) as rig:
        for _ in range(KILLS):
            await rig.kill_leader()
        seconds = [t.seconds for t in rig.takeovers]
    line = f"takeover, lease {lease:g}s, {KILLS} SIGKILLs: {summary(seconds)}; lost leases: {rig.exits}"
    print(line)
    out = Path(__file__).resolve().parents[2] / ".benchmarks" / f"takeover-{lease:g}s.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"lease_seconds": lease, "kills": KILLS, "seconds": seconds, "lost": rig.exits}))
