"""Submission throughput benchmark (issue 2, "Measure"): ``python -m federation.service.submitbench``.

What it does, in one run:
1. **Baseline** — the store's own ``jobs.submit`` called in this process, no gRPC, for
   ``--baseline-seconds`` (one thread, then ``--baseline-threads`` threads): the rate the
   database path allows, so the service's figure can be read as a fraction of it.
2. **Service** — starts ``federation serve`` as a subprocess on loopback over the same
   database and drives it from ``--clients`` client processes, each keeping
   ``--concurrency`` SubmitJob calls in flight on one channel through
   ``federation.client.FederationClient`` for ``--seconds``. The first ``--warmup``
   seconds are not counted.
3. **Proof** — every acknowledged job name is looked up in the store afterwards; the
   report gives acknowledged, found and missing counts (missing must be 0), plus the
   jobs stored that no client saw acknowledged (calls cut off at the deadline).

Why client processes: one Python process cannot both generate and serve thousands of
RPCs a second; separate processes let the OS spread client, server and PostgreSQL over
the cores as a real deployment would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

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

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


@dataclass
class WorkerResult:
    acked: list[str] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)  # time.monotonic(), comparable across processes
    latency: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


def baseline(store: Any, queue: str, prefix: str, seconds: float, threads: int) -> Baseline:
    """Submit through the store directly (no gRPC) for ``seconds`` with ``threads`` threads."""
    counter = iter(range(10**9))
    lock = threading.Lock()
    done = [0]
    deadline = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < deadline:
            with lock:
                i = next(counter)
            store.jobs.submit(bench_job(f"{prefix}{i}", queue), tenant="bench")
            with lock:
                done[0] += 1

    start = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(loop) for _ in range(threads)]:
            f.result()
    return Baseline(threads, done[0], time.monotonic() - start)


def _merge(a: Baseline, b: Baseline) -> Baseline:
    return Baseline(a.threads, a.jobs + b.jobs, a.seconds + b.seconds)


# ---------------------------------------------------------------------- client processes


async def _drive(address: str, token: str | None, queue: str, prefix: str, start_at: float, stop_at: float,
                 concurrency: int) -> WorkerResult:
    from federation.client import FederationClient, ServiceError
    from federation.service.convert import job_to_proto

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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0.0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(db: str, control_loop: bool, extra: list[str]) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "federation.cli.main", "serve", "--listen", "127.0.0.1:0", "--db", db, *extra]
    if not control_loop:
        argv.append("--no-control-loop")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
    server_cpu_ms_per_job: float
    server_exit_code: int
    load_average: tuple[float, float]  # 1-minute load before and after: how noisy the machine was

    def text(self) -> str:
        lines = [
            f"database            {self.db}",
            f"load                {self.clients} client process(es) x {self.concurrency} in-flight calls, "
            f"{self.seconds:.0f} s, control loop {'on' if self.control_loop else 'off'}",
            f"service             {self.jobs_per_second:,.0f} jobs/s   "
            f"p50 {self.p50_ms:.1f} ms   p99 {self.p99_ms:.1f} ms",
        ]
        for b in self.baseline:
            lines.append(f"store (no gRPC)     {b['rate']:,.0f} jobs/s with {b['threads']:.0f} thread(s)")
        lines += [
            f"service / store     {self.service_to_store_ratio:.2f}   "
            f"server CPU {self.server_cpu_ms_per_job:.2f} ms/job (one core's worth caps it at "
            f"{1000 / self.server_cpu_ms_per_job if self.server_cpu_ms_per_job else 0:,.0f} jobs/s)",
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


def run(db: str, *, seconds: float = 60.0, clients: int = 2, concurrency: int = 64, warmup: float = 2.0,
        baseline_seconds: float = 10.0, baseline_threads: int = 4, control_loop: bool = False,
        token: str | None = None, serve_args: list[str] | None = None) -> Report:
    from federation.store import Store
    from federation.store import migrate as migrations

    if db.startswith("sqlite"):
        migrations.upgrade(db)
    elif not migrations.is_at_head(db):
        raise SystemExit("the database schema is not at head: run `federation db upgrade --db URL` first")
    run_id = uuid.uuid4().hex[:8]
    queue, base_queue = f"bench-{run_id}", f"bench-base-{run_id}"
    store = Store(db)
    try:
        store.queues.create(Queue(queue))
        store.queues.create(Queue(base_queue))
        load_before = os.getloadavg()[0]
        # The baseline runs before and after the service run (a quarter of the time each
        # way and thread count) and is averaged, so a noisy neighbour cannot favour one side.
        marks = [baseline(store, base_queue, f"b1-{run_id}-", baseline_seconds / 4, 1),
                 baseline(store, base_queue, f"bn-{run_id}-", baseline_seconds / 4, baseline_threads)]
        server, address = start_server(db, control_loop, serve_args or [])
        try:
            ctx = mp.get_context("spawn")
            start_at = time.monotonic() + 3.0  # every client connected before the clock starts
            stop_at = start_at + seconds
            pipes, procs = [], []
            for i in range(clients):
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker, args=((address, token, queue, f"s{i}-{run_id}-", start_at, stop_at,
                                                       concurrency), send))
                p.start()
                pipes.append(recv)
                procs.append(p)
            cpu_before = cpu_seconds(server.pid)
            results = [WorkerResult(**pipe.recv()) for pipe in pipes]
            server_cpu = cpu_seconds(server.pid) - cpu_before
            for p in procs:
                p.join()
        finally:
            server.send_signal(signal.SIGTERM)
            exit_code = server.wait(60)
        marks = [_merge(marks[0], baseline(store, base_queue, f"c1-{run_id}-", baseline_seconds / 4, 1)),
                 _merge(marks[1], baseline(store, base_queue, f"cn-{run_id}-", baseline_seconds / 4,
                                           baseline_threads))]
        load_after = os.getloadavg()[0]
        acked = [n for r in results for n in r.acked]
        window = [(t, lat) for r in results for t, lat in zip(r.done_at, r.latency, strict=True)
                  if t >= start_at + warmup]
        span = max(seconds - warmup, 1e-9)
        stored = stored_names(store, queue)
        errors: dict[str, int] = {}
        for r in results:
            for k, v in r.errors.items():
                errors[k] = errors.get(k, 0) + v
        rate = len(window) / span
        best = max(b.rate for b in marks)
        return Report(
            db=_redact(db), seconds=seconds, clients=clients, concurrency=concurrency, control_loop=control_loop,
            acknowledged=len(acked), found_in_store=len(stored & set(acked)), missing=len(set(acked) - stored),
            stored_unacknowledged=len(stored - set(acked)), errors=errors, jobs_per_second=rate,
            p50_ms=1000 * statistics.median([lat for _, lat in window]) if window else 0.0,
            p99_ms=1000 * _percentile([lat for _, lat in window], 0.99),
            baseline=[{"threads": b.threads, "jobs": b.jobs, "seconds": b.seconds, "rate": b.rate} for b in marks],
            service_to_store_ratio=rate / best if best else 0.0, server_exit_code=exit_code,
            server_cpu_ms_per_job=1000 * server_cpu / len(acked) if acked else 0.0,
            load_average=(round(load_before, 1), round(load_after, 1)),
        )
    finally:
        store.dispose()


def _redact(url: str) -> str:
    from federation.service.server import _redact as redact

    return redact(url)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m federation.service.submitbench", description=__doc__.split("\n")[0])
    p.add_argument("--db", required=True, help="SQLAlchemy URL (PostgreSQL at head, or a SQLite file)")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--clients", type=int, default=2, help="client processes")
    p.add_argument("--concurrency", type=int, default=64, help="in-flight calls per client process")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--baseline-seconds", type=float, default=10.0)
    p.add_argument("--baseline-threads", type=int, default=4)
    p.add_argument("--control-loop", action="store_true", help="run planning rounds while submitting")
    p.add_argument("--token", default=os.environ.get("FEDCTL_TOKEN"))
    p.add_argument("--json", dest="json_out", help="also write the report as JSON here")
    args = p.parse_args(argv)
    report = run(args.db, seconds=args.seconds, clients=args.clients, concurrency=args.concurrency,
                 warmup=min(args.warmup, args.seconds / 2), baseline_seconds=args.baseline_seconds,
                 baseline_threads=args.baseline_threads, control_loop=args.control_loop, token=args.token)
    print(report.text())
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(asdict(report), fh, indent=2)
    return 0 if report.missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
