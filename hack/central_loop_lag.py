"""Event-loop lag of the central service under a large fleet, RPC by RPC.

    .venv/bin/python hack/central_loop_lag.py [--clusters 100] [--nodes 100] [--jobs 10000]
        [--seconds 8] [--only ListJobs,GetQueue] [--json OUT]

Builds the fleet in one SQLite file (queues owned by ten tenants, ``--clusters`` clusters
of ``--nodes`` 8-GPU nodes recorded as their agents would, ``--jobs`` jobs with a small
pod template), starts the real ``build_server`` (grpc.aio, control loop on) on 127.0.0.1
port 0, lets the planning rounds place what fits, then hammers one RPC at a time from a
separate process (so the client's own CPU is not on the server's loop) while a task on
the server's loop sleeps 10 ms again and again and records how late it wakes. Lateness
is time the loop spent running something else: synchronous work on the loop.

Figures per phase: calls, median call latency, and the loop's lateness (median, p99,
max). ``idle`` (nothing called) and ``GetJob`` (one row) are the baselines of the same
process. Raw agents (``AgentSession``) stand in for the agents: hello, sync, snapshots,
and one RUNNING status report per Work.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gc
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc

from federation.domain.jobs import Job, Task
from federation.domain.queues import Queue
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.service.auth import Authenticator
from federation.service.server import build_server, open_store
from federation.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    audit_pb2,
    audit_pb2_grpc,
    clusters_pb2,
    clusters_pb2_grpc,
    jobs_pb2,
    jobs_pb2_grpc,
    queues_pb2,
    queues_pb2_grpc,
)
from federation.wire.convert import snapshot_to_proto
from tests.fixtures.instances import tiered_cluster

TENANTS = 10
ADMIN = "tok-admin"
GIB = 1 << 30
TEMPLATE = json.dumps({"spec": {"containers": [{
    "name": "trainer", "image": "registry.example.com/ml/trainer:2024.06.1",
    "command": ["torchrun", "--nnodes=$(WORLD_SIZE)", "train.py", "--config", "/etc/train/config.yaml"],
    "env": [{"name": f"TRAIN_OPTION_{i}", "value": f"value-{i}-" + "x" * 24} for i in range(24)],
    "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "config", "mountPath": "/etc/train"}]}],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
                {"name": "config", "configMap": {"name": "train-config"}}]}}, sort_keys=True, separators=(",", ":"))


def tenant_token(i: int) -> str:
    return f"tok-t{i}"


def cluster_token(name: str) -> str:
    return f"tok-{name}"


def tokens(clusters: int) -> dict[str, Any]:
    return {"tenants": {ADMIN: "ops", **{tenant_token(i): f"t{i}" for i in range(TENANTS)}},
            "admins": ["ops"], "clusters": {f"c{c}": cluster_token(f"c{c}") for c in range(clusters)}}


def job(j: int, rng: random.Random) -> Job:
    pods, gpus = rng.choice(((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8)))
    res = Resources({GPU: gpus, CPU: 8_000 * gpus, MEMORY: 64 * GIB * gpus})
    return Job(f"j{j}", f"q{j % TENANTS}", (Task("worker", pods, res, template_json=TEMPLATE),),
               priority=rng.randrange(3), namespace="default")


def seed(url: str, clusters: int, nodes: int, jobs: int) -> None:
    store = open_store(url, migrate=True)
    for i in range(TENANTS):
        store.queues.create(Queue(f"q{i}", weight=1 + i % 3, owners=(f"t{i}",)))
    for c in range(clusters):
        store.clusters.register(f"c{c}", 1, agent_id=f"agent-c{c}")
        store.clusters.record_snapshot(1, tiered_cluster(f"c{c}", nodes, labels={"zone": f"z{c % 3}"}))
    rng = random.Random(0)
    for start in range(0, jobs, 500):
        store.jobs.submit_many([(job(j, rng), f"t{j % TENANTS}") for j in range(start, min(jobs, start + 500))])
    store.dispose()


# ---------------------------------------------------------------------- the client side (another process)


def _md(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def _calls(address: str, name: str, jobs_count: int) -> Iterator[Callable[[], Any]]:
    ch = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 256 << 20)])
    jobs, queues = jobs_pb2_grpc.JobServiceStub(ch), queues_pb2_grpc.QueueServiceStub(ch)
    clusters, audit = clusters_pb2_grpc.ClusterServiceStub(ch), audit_pb2_grpc.AuditServiceStub(ch)
    t0 = _md(tenant_token(0))
    rng = random.Random(1)
    while True:
        j = f"j{rng.randrange(0, jobs_count, TENANTS)}"  # a job of tenant t0's queue q0
        yield {
            "GetJob": lambda j=j: jobs.GetJob(jobs_pb2.GetJobRequest(name=j), metadata=t0),
            "ListJobs1000": lambda: jobs.ListJobs(jobs_pb2.ListJobsRequest(page_size=1000), metadata=_md(ADMIN)),
            "ListJobsTenant1000": lambda: jobs.ListJobs(jobs_pb2.ListJobsRequest(page_size=1000), metadata=t0),
            "ExplainJob": lambda j=j: jobs.ExplainJob(jobs_pb2.ExplainJobRequest(name=j), metadata=t0),
            "GetQueue": lambda: queues.GetQueue(queues_pb2.GetQueueRequest(name="q0"), metadata=t0),
            "ListQueues": lambda: queues.ListQueues(queues_pb2.ListQueuesRequest(), metadata=t0),
            "ListClusters": lambda: clusters.ListClusters(clusters_pb2.ListClustersRequest(), metadata=t0),
            "ListClustersAdmin": lambda: clusters.ListClusters(clusters_pb2.ListClustersRequest(),
                                                               metadata=_md(ADMIN)),
            "GetJobAudit": lambda j=j: audit.GetJobAudit(audit_pb2.GetJobAuditRequest(job=j), metadata=t0),
            "ListRounds": lambda: audit.ListRounds(audit_pb2.ListRoundsRequest(page_size=1000), metadata=t0),
            "WatchReplay": lambda: _replay(jobs, t0),
        }[name]


def _replay(jobs: Any, md: list[tuple[str, str]]) -> int:
    """Watch q0 from event 0 until 1,000 events arrived (a history replay)."""
    got = 0
    call = jobs.WatchJobBatches(jobs_pb2.WatchJobsRequest(queue="q0", from_event_id=0), metadata=md, timeout=5.0)
    try:
        for batch in call:
            got += len(batch.events)
            if got >= 1000:
                call.cancel()
                break
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
            raise
    return got


def hammer(address: str, name: str, seconds: float, lanes: int, jobs_count: int) -> list[float]:
    """Call ``name`` back to back from ``lanes`` threads for ``seconds``; the latencies (s)."""
    out: list[float] = []
    stop = time.monotonic() + seconds

    def lane() -> None:
        for call in _calls(address, name, jobs_count):
            if time.monotonic() > stop:
                return
            started = time.perf_counter()
            try:
                call()
            except grpc.RpcError as exc:
                print(f"{name}: {exc.code()} {exc.details()}", file=sys.stderr)
                return
            out.append(time.perf_counter() - started)

    with concurrent.futures.ThreadPoolExecutor(lanes) as pool:
        list(pool.map(lambda _: lane(), range(lanes)))
    return out


def agents(address: str, names: list[str], seconds: float, snapshot_nodes: int) -> list[float]:
    """Raw agents: hello, take the sync, then for ``seconds`` report every Work RUNNING and
    send a snapshot, round after round; the seconds between sending a round and its acks."""
    out: list[float] = []
    stop = time.monotonic() + seconds

    def one(cluster: str) -> None:
        ch = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 256 << 20)])
        stub = agent_pb2_grpc.AgentServiceStub(ch)
        import queue as q

        outbox: q.Queue[agent_pb2.AgentMessage | None] = q.Queue()
        outbox.put(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster=cluster, agent_id=f"bench-{cluster}",
                                                                epoch=2)))

        def requests() -> Iterator[agent_pb2.AgentMessage]:
            while (m := outbox.get()) is not None:
                yield m

        stream = stub.Connect(requests(), metadata=_md(cluster_token(cluster)))
        works: list[agent_pb2.Work] = []
        snap = snapshot_to_proto(tiered_cluster(cluster, snapshot_nodes))
        for msg in stream:
            if msg.WhichOneof("body") == "work":
                works.append(msg.work)
            elif msg.WhichOneof("body") == "ack" and msg.ack.what == "sync":
                break
        while time.monotonic() < stop:
            started = time.perf_counter()
            snap.taken_at.GetCurrentTime()
            outbox.put(agent_pb2.AgentMessage(snapshot=snap))
            for w in works:
                outbox.put(agent_pb2.AgentMessage(status=agent_pb2.WorkStatus(
                    work_id=w.work_id, job=w.job, version=w.version, generation=w.generation,
                    phase=agent_pb2.WORK_PHASE_RUNNING,
                    pods=[agent_pb2.PodStatus(task=p.task, index=p.index, node=p.node, phase="Running")
                          for p in w.placement.pods])))
            want = len(works) + 1
            for msg in stream:
                if msg.WhichOneof("body") == "ack" and msg.ack.what in ("status", "snapshot", "status-rejected",
                                                                        "snapshot-rejected"):
                    want -= 1
                    if want == 0:
                        break
            out.append(time.perf_counter() - started)
        outbox.put(None)
        stream.cancel()

    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(one, names))
    return out


# ---------------------------------------------------------------------- the server side (this process)


class LagMeter:
    """Sleeps ``tick`` on the loop again and again; records how late each wake-up was, and
    the pauses of the garbage collector's full (generation 2) collections, in any thread:
    a collection holds the GIL, so it stalls the loop wherever it runs."""

    def __init__(self, tick: float = 0.01) -> None:
        self.tick, self.late = tick, [0.0]
        self._task: asyncio.Task[None] | None = None
        self.gc_pauses: list[tuple[int, float]] = []  # (ticks so far, seconds)
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_pauses.append((len(self.late), time.perf_counter() - self._gc_started))

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.tick)
            self.late.append(time.perf_counter() - started - self.tick)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def mark(self) -> int:
        return len(self.late)

    def since(self, mark: int) -> dict[str, float]:
        xs = sorted(self.late[mark:]) or [0.0]
        pauses = [p for at, p in self.gc_pauses if at >= mark]
        return {"gc2_count": len(pauses), "gc2_max_ms": 1e3 * max(pauses, default=0.0),
                "lag_p50_ms": 1e3 * xs[len(xs) // 2], "lag_p99_ms": 1e3 * xs[min(len(xs) - 1, int(len(xs) * 0.99))],
                "lag_max_ms": 1e3 * xs[-1], "ticks": len(xs)}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="loop-lag-")
    url = f"sqlite:///{tmp}/fleet.db"
    started = time.perf_counter()
    seed(url, args.clusters, args.nodes, args.jobs)
    print(f"seeded in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    store = open_store(url, migrate=False)
    server = await build_server(store, auth=Authenticator.from_mapping(tokens(args.clusters)), control_loop=True,
                                agent_grace_seconds=3600.0, dispatch_timeout_seconds=3600.0,
                                failover_grace_seconds=3600.0)
    address = f"127.0.0.1:{server.port}"
    if args.freeze:
        gc.freeze()
    if args.slow_ms:  # name each callback that holds the loop longer (asyncio's debug mode)
        import logging
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = args.slow_ms / 1e3
    meter = LagMeter()
    meter.start()
    results: dict[str, Any] = {"clusters": args.clusters, "nodes": args.nodes, "jobs": args.jobs}
    rounds = server.rounds
    assert rounds is not None
    mark = meter.mark()
    t = time.perf_counter()
    while time.perf_counter() - t < args.settle and rounds.rounds_run < 1:  # the first round places what fits
        await asyncio.sleep(1.0)
    await asyncio.sleep(5.0)
    results["rounds"] = {"count": rounds.rounds_run, **meter.since(mark)}
    print(f"rounds: {results['rounds']}", file=sys.stderr)
    if args.census:  # what the collector walks in a full collection
        import collections
        objects = gc.get_objects()
        started = time.perf_counter()
        gc.collect()
        print(f"tracked objects {len(objects)}; a full collection took {time.perf_counter() - started:.3f}s",
              file=sys.stderr)
        for kind, n in collections.Counter(type(o).__qualname__ for o in objects).most_common(15):
            print(f"  {n:>9} {kind}", file=sys.stderr)
        sized = sorted(((len(o), type(o).__qualname__) for o in objects if isinstance(o, (list, dict, tuple, set))),
                       reverse=True)
        print(f"  items in containers: {sum(n for n, _ in sized)}; largest: {sized[:12]}", file=sys.stderr)
        for generation in (0, 1, 2):
            started = time.perf_counter()
            gc.collect(generation)
            print(f"  collect({generation}) took {time.perf_counter() - started:.3f}s", file=sys.stderr)
        del objects
    active = len(store.jobs.in_states(("placed", "dispatched", "running")))
    results["active_jobs"] = active
    print(f"active jobs {active}", file=sys.stderr)
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(pool, hammer, address, "GetJob", 0.5, 1, args.jobs)  # warm the worker process
        mark = meter.mark()
        await asyncio.sleep(args.seconds)
        results["idle"] = meter.since(mark)
        print(f"idle {results['idle']}", file=sys.stderr)
        names = args.only.split(",") if args.only else [
            "GetJob", "ListJobs1000", "ListJobsTenant1000", "ExplainJob", "GetQueue", "ListQueues", "ListClusters",
            "ListClustersAdmin", "GetJobAudit", "ListRounds", "WatchReplay", "agents"]
        for name in names:
            mark = meter.mark()
            if name == "agents":
                lat = await loop.run_in_executor(pool, agents, address, [f"c{c}" for c in range(args.agents)],
                                                 args.seconds, args.nodes)
            else:
                lat = await loop.run_in_executor(pool, hammer, address, name, args.seconds, args.lanes, args.jobs)
            results[name] = {"calls": len(lat), "call_p50_ms": 1e3 * statistics.median(lat) if lat else None,
                             **meter.since(mark)}
            print(f"{name} {results[name]}", file=sys.stderr)
    await server.stop(grace=1.0)
    store.dispose()
    return results


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--clusters", type=int, default=100)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--settle", type=float, default=60.0)
    p.add_argument("--lanes", type=int, default=2)
    p.add_argument("--agents", type=int, default=10)
    p.add_argument("--only", default="")
    p.add_argument("--freeze", action="store_true", help="gc.freeze() once the server started (an experiment)")
    p.add_argument("--census", action="store_true", help="count the objects the collector tracks after the rounds")
    p.add_argument("--slow-ms", type=float, default=0.0, help="log callbacks holding the loop this long")
    p.add_argument("--json", default="")
    args = p.parse_args()
    results = asyncio.run(measure(args))
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
