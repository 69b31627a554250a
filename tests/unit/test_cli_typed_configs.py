"""The CLI builds the typed configs the demo and the benchmark runners take: every flag
lands in a field (none silently dropped), and ``python -m federation.bench.*`` still runs
through the parsers in ``federation/cli/bench_runners.py``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from federation.bench.fanout import FanoutConfig
from federation.bench.metrics_cost import MetricsCostConfig
from federation.bench.submit import SubmitConfig
from federation.cli.bench_runners import fanout_config, metrics_cost_config, submit_config
from federation.cli.main import _demo_options, _parser
from federation.demo.main import DemoOptions


def test_demo_flags_become_demo_options_policy_flags_included() -> None:
    args = _parser().parse_args(["demo", "--scenario", "s.yaml", "--speed", "7", "--out", "o", "--plain", "--hold",
                                 "--max-wall-seconds", "9", "--agent-grace-seconds", "1.5", "--preemption-grace",
                                 "60", "--topology-wait", "30", "--reserve-after", "never",
                                 "--hold-gangs-after", "120"])
    options = _demo_options(args)
    assert (options.scenario, options.speed, options.out, options.plain, options.hold) == ("s.yaml", 7.0, "o",
                                                                                          True, True)
    assert (options.max_wall_seconds, options.agent_grace_seconds) == (9.0, 1.5)
    limits = options.limits
    assert limits.time_limit_seconds == DemoOptions().limits.time_limit_seconds == 0.5
    assert (limits.preemption_grace_seconds, limits.topology_wait_seconds, limits.reserve_after_seconds,
            limits.gang_hold_after_seconds) == (60.0, 30.0, None, 120.0)


def test_demo_defaults_are_the_options_defaults() -> None:
    assert _demo_options(_parser().parse_args(["demo"])) == DemoOptions()


def test_bench_runner_flags_become_typed_configs() -> None:
    config, out = submit_config(["--db", "sqlite:///x.db", "--seconds", "4", "--warmup", "3", "--clients", "3",
                                 "--control-loop", "--batch-size", "8", "--json", "r.json", "--token", "t"])
    assert out == "r.json"
    assert config == SubmitConfig("sqlite:///x.db", seconds=4.0, clients=3, warmup=2.0, control_loop=True,
                                  batch_size=8, token="t")  # warm-up capped at half the run
    assert fanout_config(["--db", "d", "--watchers", "5", "--idle-seconds", "2"]) == (
        FanoutConfig("d", watchers=5, idle_seconds=2.0), None)
    argv = ["--db", "d", "--watch-rpc", "both", "--watch-coalesce-ms", "200", "--warmup-submits", "0"]
    assert fanout_config(argv) == (
        FanoutConfig("d", watch_rpc="both", serve_args=("--watch-coalesce-ms", "200.0"), warmup_submits=0), None)
    with pytest.raises(ValueError, match="watch_rpc"):
        FanoutConfig("d", watch_rpc="sometimes")
    assert metrics_cost_config(["--db", "d", "--rounds", "1", "--scrape-interval", "0.5", "--json", "m.json"]) == (
        MetricsCostConfig("d", rounds=1, scrape_interval=0.5), "m.json")


@pytest.mark.parametrize("runner", ["submit", "fanout", "metrics_cost"])
def test_python_dash_m_runs_the_cli_parser(runner: str) -> None:
    done = subprocess.run([sys.executable, "-m", f"federation.bench.{runner}", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"python -m federation.bench.{runner}" in done.stdout and "--db" in done.stdout
