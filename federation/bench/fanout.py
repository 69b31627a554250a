"""Watch fan-out benchmark (issue 10, "Measure"): ``python -m federation.bench.fanout --db URL``.

Two configurations against the same ``federation serve`` subprocess build, one after the
other in one run so the ratio is taken under the same machine load:

- **quiet**: one WatchJobs stream (needed to measure delivery), no agent streams;
- **busy**: ``--watchers`` watch streams (default 200) plus ``--agents`` idle agent
  streams (default 50: a hello, then a heartbeat every 5 s, as a real agent does).

The watchers read ``WatchJobBatches`` through ``FederationClient.watch_jobs`` (as fedctl
does); ``--watch-rpc events`` measures the per-event ``WatchJobs`` instead, and ``both``
adds a second busy phase with it (``busy_events``), so the two compare in one run.

Streams run in their own client processes, the submitter in the main one. For each: the
server's idle CPU (fraction of one core over ``--idle-seconds`` with every stream open and
nothing submitted, starting ``--settle-seconds`` after the streams opened: 200 watchers
opening at once each replay the history from event 0, which is not idle), then
``--submits`` SubmitJob calls one at a time (p50/p99 latency), and for every submission
the delay from its acknowledgement to its ``submitted`` event arriving at each watcher
(p50/p99/max over all watchers and jobs).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import re
import socket
import sys
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from federation.bench.submit import _percentile, bench_job, start_server
from federation.bench.submit_cpu import cpu_seconds
from federation.client import FederationClient
from federation.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2, queues_pb2
from federation.wire.convert import job_to_proto


@dataclass
class Figures:
    watchers: int
    agents: int
    submits: int
    submit_p50_ms: float
    submit_p99_ms: float
    delivery_p50_ms: float
    delivery_p99_ms: float
    delivery_max_ms: float
    deliveries: int
    idle_cpu_core_fraction: float
    # Server-side, over the submission window, from the server's own histograms (/metrics,
    # quantiles interpolated inside buckets): SubmitJob from handler start to answer, and
    # the event loop's lag (what a call waits before the server starts on it).
    server_submit_p50_ms: float
    server_submit_p99_ms: float
    loop_lag_p50_ms: float
    loop_lag_p99_ms: float
    submit_window_cpu_core_fraction: float
    # The server's CPU per submission (its whole process: handler, store, rounds, fan-out to
    # every stream): what the streams cost the server, whatever share of the CPU it got.
    server_cpu_ms_per_submit: float


async def _idle_agent(address: str, cluster: str, stop: asyncio.Event) -> None:
    import grpc.aio

    async with grpc.aio.insecure_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        call = stub.Connect()  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
        await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster=cluster, agent_id=cluster, epoch=1)))
        reader = asyncio.ensure_future(_drain(call))
        while not stop.is_set():
            await call.write(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 5.0)
        reader.cancel()
        call.cancel()


async def _drain(call: Any) -> None:
    async for _ in call:
        pass


async def _watch(c: FederationClient, queue: str, arrivals: list[tuple[str, float]], ready: asyncio.Event,
                 batched: bool) -> None:
    ready.set()
    async for ev in c.watch_jobs(0, queue, batched=batched):
        if ev.type == jobs_pb2.JOB_EVENT_TYPE_SUBMITTED:
            arrivals.append((ev.job.id, time.monotonic()))


async def _streams(address: str, queue: str, watchers: int, agents: int, expected: int, seconds: float,
                   batched: bool, started: Any, submitted: Any) -> list[tuple[str, float]]:
    """Open the streams, report readiness, collect arrivals until ``expected``, or until
    ``seconds`` after the submitter says it is done (``submitted``)."""
    arrivals: list[tuple[str, float]] = []
    stop = asyncio.Event()
    channels = [FederationClient(address, timeout=60) for _ in range(max(1, watchers // 50))]
    tasks: list[asyncio.Task[None]] = []
    for i in range(watchers):
        ready = asyncio.Event()
        tasks.append(asyncio.create_task(_watch(channels[i % len(channels)], queue, arrivals, ready, batched)))
        await ready.wait()
    tasks += [asyncio.create_task(_idle_agent(address, f"idle-{queue}-{os.getpid()}-{i}", stop))
              for i in range(agents)]
    await asyncio.sleep(1.0)
    started.set()
    # Until every expected arrival, or ``seconds`` after the submitter is done. A process of
    # agents only (expected 0) stays until the submitter is done: its streams must be open
    # for the whole measurement (before, they closed at once, and the 50 clusters were
    # declared lost in the middle of the submissions).
    deadline = None
    while not (expected and len(arrivals) >= expected):
        if submitted.is_set():
            deadline = deadline or time.monotonic() + seconds
            if not expected or time.monotonic() >= deadline:
                break
        await asyncio.sleep(0.1)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in channels:
        await c.close()
    return arrivals


def _stream_process(args: tuple[str, str, int, int, int, float, bool], started: Any, submitted: Any, out: Any,
                    niceness: int = 0) -> None:
    if niceness:
        os.nice(niceness)  # --streams-nice: how much of the busy figure is the clients' own CPU
    out.send(asyncio.run(_streams(*args, started, submitted)))
    out.close()


async def _submit(address: str, queue: str, submits: int) -> tuple[list[float], dict[str, float]]:
    latencies: list[float] = []
    acked: dict[str, float] = {}
    async with FederationClient(address, timeout=60) as c:
        for i in range(submits):
            spec = job_to_proto(bench_job(f"{queue}-{i}", queue))
            t0 = time.monotonic()
            await c.submit_job(spec)
            acked[spec.name] = time.monotonic()
            latencies.append(acked[spec.name] - t0)
    return latencies, acked


_BUCKET = re.compile(r'^(\w+)_bucket\{le="([^"]+)"\} (\S+)$', re.M)


def scrape(metrics: str) -> dict[str, list[tuple[float, float]]]:
    """Cumulative histogram buckets per family from the server's /metrics (``le`` -> count)."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[float, float]]] = {}
    for name, le, count in _BUCKET.findall(text):
        out.setdefault(name, []).append((float(le), float(count)))
    return out


def histogram_quantile(q: float, before: list[tuple[float, float]], after: list[tuple[float, float]]) -> float:
    """The ``q`` quantile of what was observed between two scrapes, as Prometheus'
    ``histogram_quantile`` does it (linear inside the bucket; the last finite bound if beyond)."""
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1] if counts else 0.0
    if total <= 0:
        return 0.0
    rank, lower, below = q * total, 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * ((rank - below) / (cumulative - below) if cumulative > below else 1.0)
        lower, below = le, cumulative
    return lower


def measure(address: str, pid: int, watchers: int, agents: int, submits: int, idle_seconds: float,
            processes: int = 2, metrics: str = "", streams_nice: int = 0, batched: bool = True,
            settle_seconds: float = 0.0) -> Figures:
    """Streams live in ``processes`` client processes (plus one for the agents), the submitter in
    this one, so a busy watcher process cannot delay the submissions it is measured against.
    Delivery delay compares CLOCK_MONOTONIC readings, which every process on the host shares."""
    queue = f"fan-{uuid.uuid4().hex[:6]}"
    asyncio.run(_create_queue(address, queue))
    ctx = mp.get_context("spawn")
    split = [watchers // processes + (1 if i < watchers % processes else 0) for i in range(processes)]
    jobs = [(w, 0) for w in split if w] + ([(0, agents)] if agents else [])
    procs, pipes, flags = [], [], []
    submitted = ctx.Event()
    for w, a in jobs:
        started, (mine, theirs) = ctx.Event(), ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_stream_process,
                           args=((address, queue, w, a, w * submits, 60.0, batched), started, submitted, theirs,
                                 streams_nice))
        proc.start()
        procs.append(proc)
        pipes.append(mine)
        flags.append(started)
    for flag in flags:
        flag.wait(120)
    time.sleep(settle_seconds)  # let the opening transient pass (module doc)
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(idle_seconds)
    idle = (cpu_seconds(pid) - before) / (time.monotonic() - t0)
    scraped, cpu0, t1 = scrape(metrics), cpu_seconds(pid), time.monotonic()
    latencies, acked = asyncio.run(_submit(address, queue, submits))
    window_cpu_seconds = cpu_seconds(pid) - cpu0
    window_cpu = window_cpu_seconds / (time.monotonic() - t1)
    after = scrape(metrics)
    submitted.set()
    arrivals = [a for pipe in pipes for a in pipe.recv()]
    for proc in procs:
        proc.join(60)
    delays = [max(0.0, at - acked[name]) * 1000 for name, at in arrivals if name in acked]
    return Figures(watchers=watchers, agents=agents, submits=submits,
                   submit_p50_ms=_percentile([x * 1000 for x in latencies], 0.5),
                   submit_p99_ms=_percentile([x * 1000 for x in latencies], 0.99),
                   delivery_p50_ms=_percentile(delays, 0.5), delivery_p99_ms=_percentile(delays, 0.99),
                   delivery_max_ms=max(delays, default=0.0), deliveries=len(delays), idle_cpu_core_fraction=idle,
                   server_submit_p50_ms=1000 * histogram_quantile(0.5, scraped[_SUBMIT], after[_SUBMIT]),
                   server_submit_p99_ms=1000 * histogram_quantile(0.99, scraped[_SUBMIT], after[_SUBMIT]),
                   loop_lag_p50_ms=1000 * histogram_quantile(0.5, scraped[_LAG], after[_LAG]),
                   loop_lag_p99_ms=1000 * histogram_quantile(0.99, scraped[_LAG], after[_LAG]),
                   submit_window_cpu_core_fraction=window_cpu,
                   server_cpu_ms_per_submit=1000 * window_cpu_seconds / max(1, submits))


_SUBMIT, _LAG = "federation_submit_duration_seconds", "federation_event_loop_lag_seconds"


async def _warm_up(address: str, submits: int) -> None:
    if submits > 0:
        queue = f"warm-{uuid.uuid4().hex[:6]}"
        await _create_queue(address, queue)
        await _submit(address, queue, submits)


async def _create_queue(address: str, queue: str) -> None:
    async with FederationClient(address, timeout=60) as admin:
        await admin.create_queue(queues_pb2.Queue(name=queue))


WATCH_RPCS = ("batches", "events", "both")


@dataclass(frozen=True)
class FanoutConfig:
    """One fan-out run (built by ``federation/cli/bench_runners.py``): the busy side's
    watchers and idle agents, the submissions timed on each side, the idle CPU window,
    extra ``federation serve`` flags, and which watch call the watchers use: ``batches``
    (WatchJobBatches, what fedctl and the client library use), ``events`` (the per-event
    WatchJobs) or ``both`` (a busy phase with each, after the one quiet phase)."""

    db: str
    watchers: int = 200
    agents: int = 50
    submits: int = 300
    idle_seconds: float = 10.0
    serve_args: tuple[str, ...] = ()
    streams_nice: int = 0  # niceness of the busy phase's stream client processes (e.g. 19)
    watch_rpc: str = "batches"
    # Untimed submissions before the first phase: without them the quiet phase, measured
    # first, paid the server's warm-up (caches, prepared statements), and a run whose two
    # phases were identical (1 watcher, no agent) measured busy / quiet = 0.5.
    warmup_submits: int = 50
    # Seconds between the streams being open and the idle CPU window (module doc).
    settle_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.watch_rpc not in WATCH_RPCS:
            raise ValueError(f"watch_rpc: one of {', '.join(WATCH_RPCS)}")


def run(config: FanoutConfig) -> dict[str, Any]:
    """Quiet, then busy (per ``watch_rpc``), against one server; ratios are busy over quiet."""
    db, watchers, agents, submits = config.db, config.watchers, config.agents, config.submits
    idle_seconds, serve_args, streams_nice = config.idle_seconds, config.serve_args, config.streams_nice
    metrics = f"127.0.0.1:{_free_port()}"
    load_before = os.getloadavg()[0]
    phases = {"batches": [("busy", True)], "events": [("busy", False)],
              "both": [("busy", True), ("busy_events", False)]}[config.watch_rpc]
    proc, address = start_server(db, True, [*serve_args, "--metrics-listen", metrics])
    try:
        asyncio.run(_warm_up(address, config.warmup_submits))
        quiet = measure(address, proc.pid, 1, 0, submits, idle_seconds, processes=1, metrics=metrics,
                        batched=phases[0][1], settle_seconds=config.settle_seconds)
        busy = {name: measure(address, proc.pid, watchers, agents, submits, idle_seconds, metrics=metrics,
                              streams_nice=streams_nice, batched=batched, settle_seconds=config.settle_seconds)
                for name, batched in phases}
    finally:
        proc.terminate()
        proc.wait(30)
    out: dict[str, Any] = {"quiet": asdict(quiet), **{name: asdict(f) for name, f in busy.items()}}
    for name, f in busy.items():
        suffix = name.removeprefix("busy")
        out[f"submit_p50_ratio{suffix}"] = _ratio(f.submit_p50_ms, quiet.submit_p50_ms)
        out[f"server_submit_p50_ratio{suffix}"] = _ratio(f.server_submit_p50_ms, quiet.server_submit_p50_ms)
    return {**out, "watch_rpc": config.watch_rpc, "serve_args": list(serve_args),
            "load_average": [load_before, os.getloadavg()[0]], "cores": os.cpu_count(),
            "streams_nice": streams_nice}


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":  # ``python -m federation.bench.fanout`` (docs/benchmarks.md): cli/ parses
    from federation.cli.bench_runners import fanout_main

    sys.exit(fanout_main())
