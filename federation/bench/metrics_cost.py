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

import socket
import statistics
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any

from federation.bench.submit import Report, SubmitConfig, run


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


@dataclass(frozen=True)
class MetricsCostConfig:
    """Pairs of submission runs without and with ``--metrics-listen`` (built by
    ``federation/cli/bench_runners.py``), the endpoint scraped every ``scrape_interval``."""

    db: str
    rounds: int = 3
    seconds: float = 30.0
    clients: int = 2
    concurrency: int = 32
    scrape_interval: float = 1.0
    control_loop: bool = False


def compare(config: MetricsCostConfig) -> dict[str, Any]:
    db, rounds, seconds, clients = config.db, config.rounds, config.seconds, config.clients
    concurrency, scrape_interval, control_loop = config.concurrency, config.scrape_interval, config.control_loop
    off, on = Side(), Side()
    scrapes: list[float] = []
    for i in range(rounds):
        for metrics in ((False, True) if i % 2 == 0 else (True, False)):
            serve_args: tuple[str, ...] = ()
            scraper = None
            if metrics:
                port = _free_port()
                serve_args = ("--metrics-listen", f"127.0.0.1:{port}")
                scraper = Scraper(f"http://127.0.0.1:{port}/metrics", scrape_interval)
                scraper.start()
            try:
                report = run(SubmitConfig(db, seconds=seconds, clients=clients, concurrency=concurrency, warmup=2.0,
                                          baseline_seconds=0.4, baseline_threads=1, control_loop=control_loop,
                                          serve_args=serve_args))
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


if __name__ == "__main__":  # ``python -m federation.bench.metrics_cost`` (docs/benchmarks.md): cli/ parses
    from federation.cli.bench_runners import metrics_cost_main

    raise SystemExit(metrics_cost_main())
