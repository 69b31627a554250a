"""Submission throughput through the client library to ``federation serve`` on PostgreSQL.

A short run (3 s) of ``federation.bench.submit`` — the full 60 s figure is recorded
in docs/benchmarks.md with its command. Asserts correctness only (every acknowledged job
is in the store, no errors, the server drains and exits 0), never a wall-clock rate:
the machine is shared.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import create_engine, text

from federation.bench.submit import SubmitConfig, run
from federation.store import migrate as migrations

pytestmark = pytest.mark.perf
_CONFTEST = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"


def _integration_fixtures() -> ModuleType:
    """The integration suite's PostgreSQL helper (start_postgres), loaded by path."""
    spec = importlib.util.spec_from_file_location("integration_conftest", _CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_db() -> Iterator[str]:
    server = _integration_fixtures().start_postgres()
    name = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        url = server.database_url(name)
        migrations.upgrade(url)
        yield url
    finally:
        admin.dispose()
        server.purge()


def test_every_acknowledged_submission_is_stored(bench_db: str) -> None:
    report = run(SubmitConfig(bench_db, seconds=3, clients=2, concurrency=16, warmup=0.5, baseline_seconds=1))
    print("\n" + report.text())
    assert report.acknowledged > 0 and report.errors == {}
    assert report.missing == 0 and report.found_in_store == report.acknowledged
    assert report.stored_unacknowledged == 0
    assert report.server_exit_code == 0
    assert all(b["jobs"] > 0 for b in report.baseline)


def test_the_metrics_cost_comparison_runs_both_sides_and_scrapes(bench_db: str) -> None:
    """``federation.bench.metrics_cost`` (docs/benchmarks.md, "Cost of metrics"), shortened:
    one run without and one with ``--metrics-listen``, the endpoint scraped meanwhile."""
    from federation.bench.metrics_cost import MetricsCostConfig, compare

    result = compare(MetricsCostConfig(bench_db, rounds=1, seconds=3, clients=1, concurrency=8, scrape_interval=0.5,
                                       control_loop=False))
    assert result["off"]["runs"]["missing"] == 0 and result["on"]["runs"]["missing"] == 0
    assert result["off"]["jobs_per_second"] > 0 and result["on"]["jobs_per_second"] > 0
    assert result["scrapes"] >= 2  # the server with metrics answered /metrics during its run
