"""Watch fan-out (issue 10): a short run of ``federation.bench.fanout`` on SQLite.

The figures for docs/benchmarks.md come from the full run (200 watchers, 50 agents, on
PostgreSQL; command there). This asserts correctness only — every submission reaches
every watcher — never a latency: the machine is shared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from federation.bench.fanout import FanoutConfig, run

pytestmark = pytest.mark.perf


def test_every_submission_reaches_every_watcher(tmp_path: Path) -> None:
    result = run(FanoutConfig(f"sqlite:///{tmp_path / 'fan.db'}", watchers=10, agents=3, submits=20, idle_seconds=1.0))
    for config in ("quiet", "busy"):
        figures = result[config]
        assert figures["deliveries"] == figures["submits"] * figures["watchers"], figures
        # the server's own histograms were read for the submission window
        assert figures["server_submit_p50_ms"] > 0 and figures["server_cpu_ms_per_submit"] > 0, figures
