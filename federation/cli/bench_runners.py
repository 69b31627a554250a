"""Arguments of the benchmark runners that drive a real service (``federation/bench/``).

The runners take typed configs (``SubmitConfig``, ``FanoutConfig``, ``MetricsCostConfig``);
this module is their command line — ``python -m federation.bench.submit`` (and ``fanout``,
``metrics_cost``) still work, each module's ``__main__`` guard calling the ``*_main`` here —
so argument parsing stays in ``cli/`` (docs/design/architecture.md).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import asdict

from federation.bench import fanout, metrics_cost, submit
from federation.bench.fanout import FanoutConfig
from federation.bench.metrics_cost import MetricsCostConfig
from federation.bench.submit import SubmitConfig

DB_HELP = "SQLAlchemy URL (PostgreSQL at head, or a SQLite file)"


def _first_line(doc: str | None) -> str:
    return (doc or "").split("\n")[0]


def submit_config(argv: Sequence[str] | None = None) -> tuple[SubmitConfig, str | None]:
    """The submission benchmark's config and ``--json`` path from its arguments."""
    p = argparse.ArgumentParser(prog="python -m federation.bench.submit", description=_first_line(submit.__doc__))
    p.add_argument("--db", required=True, help=DB_HELP)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--clients", type=int, default=2, help="client processes")
    p.add_argument("--concurrency", type=int, default=64, help="in-flight calls per client process")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--baseline-seconds", type=float, default=10.0)
    p.add_argument("--baseline-threads", type=int, default=4)
    p.add_argument("--control-loop", action="store_true", help="run planning rounds while submitting")
    p.add_argument("--batch-size", type=int, default=64, help="the server's group commit: jobs per transaction")
    p.add_argument("--batch-delay-ms", type=float, default=2.0, help="the server's group commit: longest wait")
    p.add_argument("--token", default=os.environ.get("FEDCTL_TOKEN"))
    p.add_argument("--json", dest="json_out", help="also write the report as JSON here")
    a = p.parse_args(argv)
    config = SubmitConfig(a.db, seconds=a.seconds, clients=a.clients, concurrency=a.concurrency,
                          warmup=min(a.warmup, a.seconds / 2), baseline_seconds=a.baseline_seconds,
                          baseline_threads=a.baseline_threads, control_loop=a.control_loop, token=a.token,
                          batch_size=a.batch_size, batch_delay_ms=a.batch_delay_ms)
    return config, a.json_out


def submit_main(argv: Sequence[str] | None = None) -> int:
    config, json_out = submit_config(argv)
    report = submit.run(config)
    print(report.text())
    if json_out:
        with open(json_out, "w", encoding="utf-8") as fh:
            json.dump(asdict(report), fh, indent=2)
    return 0 if report.missing == 0 else 1


def fanout_config(argv: Sequence[str] | None = None) -> tuple[FanoutConfig, str | None]:
    p = argparse.ArgumentParser(prog="python -m federation.bench.fanout", description=_first_line(fanout.__doc__))
    p.add_argument("--db", required=True, help="database URL (migrated), e.g. postgresql+psycopg://...")
    p.add_argument("--watchers", type=int, default=200)
    p.add_argument("--agents", type=int, default=50)
    p.add_argument("--submits", type=int, default=300)
    p.add_argument("--idle-seconds", type=float, default=10.0)
    p.add_argument("--streams-nice", type=int, default=0,
                   help="run the busy phase's stream client processes at this niceness (e.g. 19): the part of "
                        "the busy figures due to the clients' own CPU on this machine")
    p.add_argument("--watch-rpc", choices=fanout.WATCH_RPCS, default="batches",
                   help="the watchers' call: WatchJobBatches (batches), the per-event WatchJobs (events), or a busy "
                        "phase with each (both)")
    p.add_argument("--watch-coalesce-ms", type=float,
                   help="the server's --watch-coalesce-ms (default: the server's default)")
    p.add_argument("--settle-seconds", type=float, default=5.0,
                   help="wait this long after the streams opened before the idle CPU window")
    p.add_argument("--warmup-submits", type=int, default=50, help="untimed submissions before the first phase")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args(argv)
    serve_args = () if a.watch_coalesce_ms is None else ("--watch-coalesce-ms", str(a.watch_coalesce_ms))
    return FanoutConfig(a.db, watchers=a.watchers, agents=a.agents, submits=a.submits,
                        idle_seconds=a.idle_seconds, streams_nice=a.streams_nice, watch_rpc=a.watch_rpc,
                        serve_args=serve_args, warmup_submits=a.warmup_submits,
                        settle_seconds=a.settle_seconds), a.json


def fanout_main(argv: Sequence[str] | None = None) -> int:
    config, json_out = fanout_config(argv)
    text = json.dumps(fanout.run(config), indent=2)
    print(text)
    if json_out:
        with open(json_out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


def metrics_cost_config(argv: Sequence[str] | None = None) -> tuple[MetricsCostConfig, str | None]:
    p = argparse.ArgumentParser(prog="python -m federation.bench.metrics_cost",
                                description=_first_line(metrics_cost.__doc__))
    p.add_argument("--db", required=True, help=DB_HELP)
    p.add_argument("--rounds", type=int, default=3, help="pairs of runs (one without metrics, one with)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of each run")
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--scrape-interval", type=float, default=1.0)
    p.add_argument("--control-loop", action="store_true", help="run planning rounds while submitting")
    p.add_argument("--json", dest="json_out")
    a = p.parse_args(argv)
    return MetricsCostConfig(a.db, rounds=a.rounds, seconds=a.seconds, clients=a.clients, concurrency=a.concurrency,
                             scrape_interval=a.scrape_interval, control_loop=a.control_loop), a.json_out


def metrics_cost_main(argv: Sequence[str] | None = None) -> int:
    config, json_out = metrics_cost_config(argv)
    result = metrics_cost.compare(config)
    print(f"median jobs/s: off {result['off']['jobs_per_second']:,.0f}, on {result['on']['jobs_per_second']:,.0f} "
          f"(on/off {result['throughput_ratio_on_over_off']:.3f}); server CPU ms/job: off "
          f"{result['off']['server_cpu_ms_per_job']:.3f}, on {result['on']['server_cpu_ms_per_job']:.3f} "
          f"(on/off {result['server_cpu_ratio_on_over_off']:.3f}); {result['scrapes']} scrapes, median "
          f"{result['scrape_ms_median'] or 0:.1f} ms, max {result['scrape_ms_max'] or 0:.1f} ms")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0 if result["off"]["runs"]["missing"] == 0 and result["on"]["runs"]["missing"] == 0 else 1
