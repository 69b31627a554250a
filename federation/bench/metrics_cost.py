"""What Prometheus metrics cost the submission path: ``python -m federation.bench.metrics_cost``.

Runs the submission benchmark (``federation.bench.submit``) several times in one session,
alternating a server without ``--metrics-listen`` (no metric is kept at all: the null
instruments) and one with it, while a scraper fetches ``/metrics`` every
``--scrape-interval`` seconds (1 s by default: fifteen times Prometheus' usual rate, so the
scrape-time gauges' queries are not hidden). The order flips every round (off/on, on/off,
...) so drift in the machine's load favours neither side. It prints the median jobs/s,
latency and server CPU per job of each side, their ratio, and the scrapes' count and
duration. Same database, same flags otherwise; every acknowledged job is checked stored.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any

from federation.bench.submit import Report, run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Scraper:
    """Fetch ``url`` every ``interval`` seconds in a thread until stopped."""

    url: str
    interval: float
    durations: list[float] = field(default_factory=list)
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
                self.durations.append(time.perf_counter() - started)
            except OSError:
                self.failures += 1  # before the server listens and after it stopped

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class Side:
    jobs_per_second: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    server_cpu_ms_per_job: list[float] = field(default_factory=list)
    missing: int = 0

    def add(self, report: Report) -> None:
        self.jobs_per_second.append(report.jobs_per_second)
        self.p50_ms.append(report.p50_ms)
        self.p99_ms.append(report.p99_ms)
        self.server_cpu_ms_per_job.append(report.server_cpu_ms_per_job)
        self.missing += report.missing

    def medians(self) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in asdict(self).items() if isinstance(v, list) and v}


def compare(db: str, *, rounds: int, seconds: float, clients: int, concurrency: int, scrape_interval: float,
            control_loop: bool) -> dict[str, Any]:
    off, on = Side(), Side()
    scrapes: list[float] = []
    for i in range(rounds):
        for metrics in ((False, True) if i % 2 == 0 else (True, False)):
            serve_args: list[str] = []
            scraper = None
            if metrics:
                port = _free_port()
                serve_args = ["--metrics-listen", f"127.0.0.1:{port}"]
                scraper = Scraper(f"http://127.0.0.1:{port}/metrics", scrape_interval)
                scraper.start()
            try:
                report = run(db, seconds=seconds, clients=clients, concurrency=concurrency, warmup=2.0,
                             baseline_seconds=0.4, baseline_threads=1, control_loop=control_loop,
                             serve_args=serve_args)
            finally:
                if scraper is not None:
                    scraper.stop()
                    scrapes.extend(scraper.durations)
            (on if metrics else off).add(report)
            print(f"round {i + 1} metrics {'on ' if metrics else 'off'}: {report.jobs_per_second:,.0f} jobs/s, "
                  f"p50 {report.p50_ms:.1f} ms, p99 {report.p99_ms:.1f} ms, "
                  f"server {report.server_cpu_ms_per_job:.3f} CPU ms/job, missing {report.missing}", flush=True)
    m_off, m_on = off.medians(), on.medians()
    return {
        "rounds": rounds, "seconds": seconds, "clients": clients, "concurrency": concurrency,
        "control_loop": control_loop, "scrape_interval_seconds": scrape_interval,
        "off": {**m_off, "runs": asdict(off)}, "on": {**m_on, "runs": asdict(on)},
        "throughput_ratio_on_over_off": m_on["jobs_per_second"] / m_off["jobs_per_second"],
        "server_cpu_ratio_on_over_off": m_on["server_cpu_ms_per_job"] / m_off["server_cpu_ms_per_job"],
        "scrapes": len(scrapes), "scrape_ms_median": 1000 * statistics.median(scrapes) if scrapes else None,
        "scrape_ms_max": 1000 * max(scrapes) if scrapes else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m federation.bench.metrics_cost", description=__doc__.split("\n")[0])
    p.add_argument("--db", required=True, help="SQLAlchemy URL (PostgreSQL at head, or a SQLite file)")
    p.add_argument("--rounds", type=int, default=3, help="pairs of runs (one without metrics, one with)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of each run")
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--scrape-interval", type=float, default=1.0)
    p.add_argument("--control-loop", action="store_true", help="run planning rounds while submitting")
    p.add_argument("--json", dest="json_out")
    args = p.parse_args(argv)
    result = compare(args.db, rounds=args.rounds, seconds=args.seconds, clients=args.clients,
                     concurrency=args.concurrency, scrape_interval=args.scrape_interval,
                     control_loop=args.control_loop)
    print(f"median jobs/s: off {result['off']['jobs_per_second']:,.0f}, on {result['on']['jobs_per_second']:,.0f} "
          f"(on/off {result['throughput_ratio_on_over_off']:.3f}); server CPU ms/job: off "
          f"{result['off']['server_cpu_ms_per_job']:.3f}, on {result['on']['server_cpu_ms_per_job']:.3f} "
          f"(on/off {result['server_cpu_ratio_on_over_off']:.3f}); {result['scrapes']} scrapes, median "
          f"{result['scrape_ms_median'] or 0:.1f} ms, max {result['scrape_ms_max'] or 0:.1f} ms")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0 if result["off"]["runs"]["missing"] == 0 and result["on"]["runs"]["missing"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
