"""Submission throughput benchmark (issue 2, "Measure"): ``python -m federation.bench.submit``.

What it does, in one run:
1. **Baseline** — the store's own ``jobs.submit`` called in this process, no gRPC, for
   ``--baseline-seconds`` (one thread, then ``--baseline-threads`` threads): the rate the
   database path allows one call at a time, so the service's figure can be read as a
   fraction of it; and ``jobs.submit_many`` in batches of ``--batch-size`` on one thread,
   the rate the store allows the service's group commit.
2. **Service** — starts ``federation serve`` as a subprocess on loopback over the same
   database and drives it from ``--clients`` client processes, each keeping
   ``--concurrency`` SubmitJob calls in flight on one channel through
   ``federation.client.FederationClient`` for ``--seconds``. The first ``--warmup``
   seconds are not counted.
3. **Proof** — every acknowledged job name is looked up in the store afterwards; the
   report gives acknowledged, found and missing counts (missing must be 0), plus the
   jobs stored that no client saw acknowledged (calls cut off at the deadline).

Where the time goes: CPU seconds per job of the server, of the client processes and,
when the database runs on this machine, of its backends serving the service, measured
over the counted window; and the server's mean group-commit batch (from its log).

Why client processes: one Python process cannot both generate and serve thousands of
RPCs a second; separate processes let the OS spread client, server and PostgreSQL over
the cores as a real deployment would.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from federation.bench.submit_cpu import CpuMeter, jobs_per_transaction
from federation.domain.jobs import Job, NetworkTopology, Task
from federation.domain.queues import Queue
from federation.domain.resources import Resources


def bench_job(name: str, queue: str) -> Job:
    """A typical small gang: 2 workers x 8 GPUs, kept inside one tier-1 HyperNode."""
    return Job(name=name, queue=queue, priority=10,
               tasks=(Task("worker", 2, Resources.parse({"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"})),),
               network_topology=NetworkTopology("hard", highest_tier_allowed=1))


@dataclass
class Baseline:
    threads: int
    jobs: int
    seconds: float
    batch: int = 1  # jobs per store call (1: jobs.submit, more: jobs.submit_many)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


@dataclass
class WorkerResult:
    acked: list[str] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)  # time.monotonic(), comparable across processes
    latency: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


def baseline(store: Any, queue: str, prefix: str, seconds: float, threads: int, batch: int = 1) -> Baseline:
    """Submit through the store directly (no gRPC) for ``seconds`` with ``threads`` threads.

    ``batch`` > 1 calls ``jobs.submit_many`` with that many jobs per call.
    """
    counter = iter(range(10**9))
    lock = threading.Lock()
    done = [0]
    deadline = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < deadline:
            with lock:
                names = [f"{prefix}{next(counter)}" for _ in range(batch)]
            if batch == 1:
                store.jobs.submit(bench_job(names[0], queue), tenant="bench")
            else:
                store.jobs.submit_many([(bench_job(n, queue), "bench") for n in names])
            with lock:
                done[0] += batch

    start = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(loop) for _ in range(threads)]:
            f.result()
    return Baseline(threads, done[0], time.monotonic() - start, batch)


def _merge(a: Baseline, b: Baseline) -> Baseline:
    return Baseline(a.threads, a.jobs + b.jobs, a.seconds + b.seconds, a.batch)


# ---------------------------------------------------------------------- client processes


async def _drive(address: str, token: str | None, queue: str, prefix: str, start_at: float, stop_at: float,
                 concurrency: int) -> WorkerResult:
    from federation.client import FederationClient, ServiceError
    from federation.wire.convert import job_to_proto

    result = WorkerResult()
    counter = iter(range(10**9))
    async with FederationClient(address, token=token, timeout=30) as client:
        await client.wait_ready(30)
        template = job_to_proto(bench_job("x", queue))

        async def one_lane() -> None:
            while time.monotonic() < stop_at:
                spec = type(template)()
                spec.CopyFrom(template)
                spec.name = f"{prefix}{next(counter)}"
                t0 = time.monotonic()
                try:
                    resp = await client.submit_job(spec)
                except ServiceError as exc:
                    result.errors[exc.code.name] = result.errors.get(exc.code.name, 0) + 1
                    continue
                t1 = time.monotonic()
                result.acked.append(resp.job.id)
                result.done_at.append(t1)
                result.latency.append(t1 - t0)

        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        await asyncio.gather(*(one_lane() for _ in range(concurrency)))
    return result


def _worker(args: tuple[str, str | None, str, str, float, float, int], out: Any) -> None:
    out.send(asdict(asyncio.run(_drive(*args))))
    out.close()


def start_server(db: str, control_loop: bool, extra: list[str],
                 log: Any = subprocess.DEVNULL) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "federation.cli.main", "serve", "--listen", "127.0.0.1:0", "--db", db, *extra]
    if not control_loop:
        argv.append("--no-control-loop")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("federation serving on "):
            return proc, line.split()[-1]
    raise RuntimeError(f"federation serve exited with {proc.wait()} before serving")


@dataclass
class Report:
    db: str
    seconds: float
    clients: int
    concurrency: int
    control_loop: bool
    acknowledged: int
    found_in_store: int
    missing: int
    stored_unacknowledged: int
    errors: dict[str, int]
    jobs_per_second: float
    p50_ms: float
    p99_ms: float
    baseline: list[dict[str, float]]
    service_to_store_ratio: float
    server_cpu_ms_per_job: float  # CPU per job completed in the counted window
    client_cpu_ms_per_job: float
    database_cpu_ms_per_job: float | None  # its backends serving the service; None: not on this machine
    jobs_per_transaction: float | None  # the server's mean group-commit batch (None: not logged)
    server_exit_code: int
    load_average: tuple[float, float]  # 1-minute load before and after: how noisy the machine was
    batch_size: int = 64
    batch_delay_ms: float = 2.0

    def text(self) -> str:
        lines = [
            f"database            {self.db}",
            f"load                {self.clients} client process(es) x {self.concurrency} in-flight calls, "
            f"{self.seconds:.0f} s, control loop {'on' if self.control_loop else 'off'}",
            f"service             {self.jobs_per_second:,.0f} jobs/s   "
            f"p50 {self.p50_ms:.1f} ms   p99 {self.p99_ms:.1f} ms",
        ]
        for b in self.baseline:
            how = f"submit_many x{b['batch']:.0f}" if b.get("batch", 1) > 1 else "submit"
            lines.append(f"store (no gRPC)     {b['rate']:,.0f} jobs/s with {b['threads']:.0f} thread(s), {how}")
        db_cpu = "n/a" if self.database_cpu_ms_per_job is None else f"{self.database_cpu_ms_per_job:.2f}"
        batch = "n/a" if self.jobs_per_transaction is None else f"{self.jobs_per_transaction:.1f}"
        lines += [
            f"service / store     {self.service_to_store_ratio:.2f} (against the best store figure)",
            f"CPU per job         server {self.server_cpu_ms_per_job:.2f} ms (one core's worth caps it at "
            f"{1000 / self.server_cpu_ms_per_job if self.server_cpu_ms_per_job else 0:,.0f} jobs/s), "
            f"clients {self.client_cpu_ms_per_job:.2f} ms, database {db_cpu} ms",
            f"group commit        {batch} jobs per store transaction "
            f"(batch size {self.batch_size}, delay {self.batch_delay_ms:g} ms)",
            f"acknowledged        {self.acknowledged:,}   found in store {self.found_in_store:,}   "
            f"missing {self.missing}   stored but unacknowledged {self.stored_unacknowledged}",
            f"errors              {self.errors or 'none'}   server exit code {self.server_exit_code}",
            f"load average        {self.load_average[0]} before, {self.load_average[1]} after "
            f"({os.cpu_count()} cores)",
        ]
        return "\n".join(lines)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def stored_names(store: Any, queue: str) -> set[str]:
    names: set[str] = set()
    token = ""
    while True:
        page = store.jobs.list(queue=queue, page_size=1000, page_token=token)
        names.update(r.name for r in page.items)
        token = page.next_token
        if not token:
            return names


@dataclass(frozen=True)
class SubmitConfig:
    """One submission benchmark run (built by ``federation/cli/bench_runners.py``).

    ``warmup`` seconds of each run are not measured; ``baseline_*`` size the direct-store
    baseline measured before and after; ``serve_args`` are extra ``federation serve``
    flags; ``batch_*`` the server's group commit."""

    db: str
    seconds: float = 60.0
    clients: int = 2
    concurrency: int = 64
    warmup: float = 2.0
    baseline_seconds: float = 10.0
    baseline_threads: int = 4
    control_loop: bool = False
    token: str | None = None
    serve_args: tuple[str, ...] = ()
    batch_size: int = 64
    batch_delay_ms: float = 2.0


def run(config: SubmitConfig) -> Report:
    from federation.store import Store
    from federation.store import migrate as migrations

    db, seconds, clients, concurrency = config.db, config.seconds, config.clients, config.concurrency
    warmup, control_loop, token = config.warmup, config.control_loop, config.token
    baseline_seconds, baseline_threads = config.baseline_seconds, config.baseline_threads
    batch_size, batch_delay_ms = config.batch_size, config.batch_delay_ms
    if db.startswith("sqlite"):
        migrations.upgrade(db)
    elif not migrations.is_at_head(db):
        raise SystemExit("the database schema is not at head: run `federation db upgrade --db URL` first")
    run_id = uuid.uuid4().hex[:8]
    queue, base_queue = f"bench-{run_id}", f"bench-base-{run_id}"
    store = Store(db)
    serve = [*config.serve_args, "--submit-batch-size", str(batch_size),
             "--submit-batch-delay-ms", str(batch_delay_ms)]
    try:
        store.queues.create(Queue(queue))
        store.queues.create(Queue(base_queue))
        load_before = os.getloadavg()[0]
        # The baseline runs before and after the service run (a quarter of the time each
        # way and thread count) and is averaged, so a noisy neighbour cannot favour one side.
        plans = [(1, 1), (baseline_threads, 1), (1, batch_size)]
        marks = [baseline(store, base_queue, f"b{t}x{b}-{run_id}-", baseline_seconds / 4, t, b) for t, b in plans]
        with tempfile.TemporaryFile("w+") as server_log:
            server, address = start_server(db, control_loop, serve, server_log)
            try:
                ctx = mp.get_context("spawn")
                start_at = time.monotonic() + 3.0  # every client connected before the clock starts
                stop_at = start_at + seconds
                pipes, procs = [], []
                for i in range(clients):
                    recv, send = ctx.Pipe(duplex=False)
                    p = ctx.Process(target=_worker, args=((address, token, queue, f"s{i}-{run_id}-", start_at,
                                                           stop_at, concurrency), send))
                    p.start()
                    pipes.append(recv)
                    procs.append(p)
                meter = CpuMeter(store, server.pid, [p.pid for p in procs if p.pid is not None])
                time.sleep(max(0.0, start_at + warmup - time.monotonic()))
                meter.start()
                time.sleep(max(0.0, stop_at - time.monotonic()))
                cpu = meter.stop()
                results = [WorkerResult(**pipe.recv()) for pipe in pipes]
                for p in procs:
                    p.join()
            finally:
                server.send_signal(signal.SIGTERM)
                exit_code = server.wait(60)
            server_log.seek(0)
            per_transaction = jobs_per_transaction(server_log.read())
        marks = [_merge(m, baseline(store, base_queue, f"c{t}x{b}-{run_id}-", baseline_seconds / 4, t, b))
                 for m, (t, b) in zip(marks, plans, strict=True)]
        load_after = os.getloadavg()[0]
        acked = [n for r in results for n in r.acked]
        window = [(t, lat) for r in results for t, lat in zip(r.done_at, r.latency, strict=True)
                  if start_at + warmup <= t <= stop_at]
        span = max(seconds - warmup, 1e-9)
        stored = stored_names(store, queue)
        errors: dict[str, int] = {}
        for r in results:
            for k, v in r.errors.items():
                errors[k] = errors.get(k, 0) + v
        rate = len(window) / span
        best = max(b.rate for b in marks)
        per_job = 1000 / len(window) if window else 0.0
        return Report(
            db=_redact(db), seconds=seconds, clients=clients, concurrency=concurrency, control_loop=control_loop,
            acknowledged=len(acked), found_in_store=len(stored & set(acked)), missing=len(set(acked) - stored),
            stored_unacknowledged=len(stored - set(acked)), errors=errors, jobs_per_second=rate,
            p50_ms=1000 * statistics.median([lat for _, lat in window]) if window else 0.0,
            p99_ms=1000 * _percentile([lat for _, lat in window], 0.99),
            baseline=[{"threads": b.threads, "batch": b.batch, "jobs": b.jobs, "seconds": b.seconds, "rate": b.rate}
                      for b in marks],
            service_to_store_ratio=rate / best if best else 0.0, server_exit_code=exit_code,
            server_cpu_ms_per_job=cpu.server * per_job, client_cpu_ms_per_job=cpu.clients * per_job,
            database_cpu_ms_per_job=None if cpu.database is None else cpu.database * per_job,
            jobs_per_transaction=per_transaction, load_average=(round(load_before, 1), round(load_after, 1)),
            batch_size=batch_size, batch_delay_ms=batch_delay_ms,
        )
    finally:
        store.dispose()


def _redact(url: str) -> str:
    from federation.service.server import _redact as redact

    return redact(url)


if __name__ == "__main__":  # ``python -m federation.bench.submit`` (docs/benchmarks.md): cli/ parses
    from federation.cli.bench_runners import submit_main

    sys.exit(submit_main())
