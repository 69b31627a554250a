"""Agent benchmarks (issue 4), reported in docs/benchmarks.md under
"Agent on real Kubernetes (issue 4)".

    .venv/bin/python -m pytest tests/perf/test_agent_perf.py -m perf -s

1. Work received -> every pod of a 64-pod gang bound, on a real kube-apiserver (its own
   control plane: one etcd, one apiserver, kwok, 16 fake 8-GPU nodes), median of
   several runs; beside it the apiserver's own cost for the same objects: 64 raw pod
   creates + 64 raw binds, sequential and concurrent, from the same client library.
2. Snapshot build (pure builder: 1,000 node records, 4,000 pods, a 3-tier HyperNode tree)
   and encode to proto bytes; baseline: ``json.dumps`` of the same node list.

Figures are printed (and written to ``$AGENT_PERF_JSON`` when set); nothing asserts
wall-clock limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

E2E = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(E2E))

from controlplane import ControlPlane, build_binaries  # noqa: E402 - after sys.path gains tests/e2e
from fixtures_federation import KWOK_TOLERATION, WorkDriver, backend_for, cleanup, gpu_job, work_for  # noqa: E402 - after sys.path gains tests/e2e

from agents.core.records import LABEL_JOB, NodeRecord, PodRecord  # noqa: E402 - after sys.path gains tests/e2e
from agents.core.snapshot import build_snapshot  # noqa: E402 - after sys.path gains tests/e2e
from agents.k8s.api import call  # noqa: E402 - after sys.path gains tests/e2e
from agents.k8s.convert import binding_body  # noqa: E402 - after sys.path gains tests/e2e
from federation.domain.nodes import Taint  # noqa: E402 - after sys.path gains tests/e2e
from federation.domain.resources import Resources  # noqa: E402 - after sys.path gains tests/e2e
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector  # noqa: E402 - after sys.path gains tests/e2e
from federation.wire.clusters import snapshot_to_proto  # noqa: E402 - after sys.path gains tests/e2e

pytestmark = pytest.mark.perf

NODES, GPUS, GANG = 16, 8, 64
RUNS = int(os.environ.get("AGENT_PERF_RUNS", "5"))
RESULTS: dict[str, Any] = {}


def _record(key: str, value: Any) -> None:
    RESULTS[key] = value
    if os.environ.get("AGENT_PERF_JSON"):
        Path(os.environ["AGENT_PERF_JSON"]).write_text(json.dumps(RESULTS, indent=2, sort_keys=True))
    print(f"{key}: {value}")


def _ms(samples: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples) * 1000, 1), "min_ms": round(min(samples) * 1000, 1),
            "max_ms": round(max(samples) * 1000, 1), "runs": len(samples)}


@pytest.fixture(scope="module")
def perf_plane() -> Iterator[ControlPlane]:
    cp = ControlPlane(build_binaries(), ["perf"])
    try:
        cp.start()
        cp.create_gpu_nodes("perf", [f"perf-gpu-{i:02d}" for i in range(NODES)], gpus=GPUS)
        cp.apply_hypernodes("perf", [{"metadata": {"name": "pod-all"}, "spec": {"tier": 1, "members": [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^perf-gpu-.*"}}}]}}])
        yield cp
    finally:
        cp.stop()


async def test_work_to_gang_bound_64_pods(perf_plane: ControlPlane) -> None:
    backend = await backend_for(perf_plane, "perf")
    samples: list[float] = []
    passes: list[int] = []
    try:
        for _ in range(RUNS):
            job = gpu_job(f"perf-{uuid.uuid4().hex[:6]}", (("worker", GANG, 2),), plugins=(("env", ()), ("svc", ())))
            work = work_for(job, "perf", "pod-all")
            started = time.perf_counter()
            driver = WorkDriver(backend, work, debounce=0.0).start()  # "Work received"
            while True:
                pods = await backend.list_pods({LABEL_JOB: job.name})
                if len(pods) == GANG and all(p.node for p in pods):
                    break
                assert time.perf_counter() - started < 120, (len(pods), driver.errors[-3:])
                await asyncio.sleep(0.005)
            samples.append(time.perf_counter() - started)
            print(f"run {len(samples)}: {samples[-1]:.2f}s", flush=True)
            passes.append(len(driver.reports))
            await driver.stop()
            assert not driver.errors, driver.errors
            await cleanup(backend, job.name, timeout=120)
    finally:
        await backend.close()
    _record("gang64_work_to_bound", {**_ms(samples), "passes": passes})


async def test_apiserver_create_and_bind_baseline(perf_plane: ControlPlane) -> None:
    backend = await backend_for(perf_plane, "perf")
    core = backend._core
    results: dict[str, list[float]] = {"sequential_create": [], "sequential_bind": [], "concurrent_create": [],
                                       "concurrent_bind": []}

    def body(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"perf": "raw"}}, "spec": {
            "schedulerName": "federation-scheduler",
            "tolerations": [{"key": KWOK_TOLERATION.key, "operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "2"},
                                                                      "limits": {"nvidia.com/gpu": "2"}}}]}}

    async def create(name: str) -> None:
        await call(core.create_namespaced_pod("default", body(name), _preload_content=False))

    async def bind(name: str, node: str) -> None:
        await call(core.create_namespaced_pod_binding(name, "default", binding_body(name, node),
                                                      _preload_content=False))

    try:
        for _ in range(RUNS):
            for mode in ("sequential", "concurrent"):
                tag = uuid.uuid4().hex[:6]
                names = [f"raw-{tag}-{i}" for i in range(GANG)]
                nodes = [f"perf-gpu-{i % NODES:02d}" for i in range(GANG)]
                t0 = time.perf_counter()
                if mode == "sequential":
                    for n in names:
                        await create(n)
                else:
                    await asyncio.gather(*(create(n) for n in names))
                t1 = time.perf_counter()
                if mode == "sequential":
                    for n, node in zip(names, nodes, strict=True):
                        await bind(n, node)
                else:
                    await asyncio.gather(*(bind(n, node) for n, node in zip(names, nodes, strict=True)))
                t2 = time.perf_counter()
                results[f"{mode}_create"].append(t1 - t0)
                results[f"{mode}_bind"].append(t2 - t1)
                await asyncio.gather(*(backend.delete_pod("default", n) for n in names))
                for _ in range(600):
                    if not await backend.list_pods({"perf": "raw"}):
                        break
                    await asyncio.sleep(0.1)
    finally:
        await backend.close()
    _record("gang64_raw_apiserver", {k: _ms(v) for k, v in results.items()})


Cluster = tuple[list[NodeRecord], list[PodRecord], list[HyperNodeSpec]]


def _cluster(n_nodes: int = 1000, pods_per_node: int = 4) -> Cluster:
    nodes = [
        NodeRecord(
            name=f"node-{i:04d}",
            allocatable=Resources.parse({"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}),
            labels={"kubernetes.io/hostname": f"node-{i:04d}", "topology/leaf": f"leaf-{i // 8}",
                    "topology/spine": f"spine-{i // 64}", "nvidia.com/gpu.product": "H100"},
            taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"),),
        )
        for i in range(n_nodes)
    ]
    pods = [
        PodRecord(name=f"p-{i}-{k}", namespace="default", node=f"node-{i:04d}", phase="Running",
                  requests=Resources.parse({"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}),
                  labels={LABEL_JOB: f"job-{i // 4}"})
        for i in range(n_nodes) for k in range(pods_per_node)
    ]
    leaves = [HyperNodeSpec(f"leaf-{j}", 1, tuple(HyperNodeMember("Node", MemberSelector(exact_name=f"node-{i:04d}"))
                                                  for i in range(j * 8, min(n_nodes, j * 8 + 8))))
              for j in range((n_nodes + 7) // 8)]
    spines = [HyperNodeSpec(f"spine-{s}", 2, tuple(HyperNodeMember("HyperNode", MemberSelector(exact_name=f"leaf-{j}"))
                                                   for j in range(s * 8, min(len(leaves), s * 8 + 8))))
              for s in range((len(leaves) + 7) // 8)]
    top = [HyperNodeSpec("fabric", 3, tuple(HyperNodeMember("HyperNode", MemberSelector(exact_name=s.name))
                                            for s in spines))]
    return nodes, pods, [*leaves, *spines, *top]


def test_snapshot_build_and_encode_1000_nodes() -> None:
    nodes, pods, hypernodes = _cluster()
    build: list[float] = []
    encode: list[float] = []
    baseline: list[float] = []
    size = 0
    for _ in range(7):
        t0 = time.perf_counter()
        result = build_snapshot("big", nodes, pods, hypernodes, now=time.time())
        t1 = time.perf_counter()
        assert result.snapshot is not None, result.error
        data = snapshot_to_proto(result.snapshot).SerializeToString()
        t2 = time.perf_counter()
        build.append(t1 - t0)
        encode.append(t2 - t1)
        size = len(data)
        t3 = time.perf_counter()
        json.dumps([{"name": n.name, "allocatable": n.allocatable.to_quantities(), "labels": dict(n.labels),
                     "taints": [t.__dict__ for t in n.taints], "ready": n.ready} for n in nodes])
        baseline.append(time.perf_counter() - t3)
    assert result.snapshot is not None and len(result.snapshot.tree.domains) >= 125 + 16 + 1
    _record("snapshot_1000_nodes", {"build": _ms(build), "encode": _ms(encode), "proto_bytes": size,
                                    "json_dumps_nodes_baseline": _ms(baseline), "pods": len(pods),
                                    "hypernodes": len(hypernodes)})


@pytest.mark.parametrize(("nodes", "jobs"), [(2_000, 50), (2_000, 200), (20_000, 20)])
async def test_steady_pass_over_many_jobs(nodes: int, jobs: int) -> None:
    """3. One reconcile pass over ``jobs`` running 4-pod jobs on a fake cluster of ``nodes``
    8-GPU nodes with a label-discovered 2-tier tree, nothing to do: CPU per pass with the
    cluster read once and shared (the runtime's ``ClusterViews``), against the baseline of
    a fresh read per job (``views=None``), in the same process."""
    from agents.core.controller import JobController
    from agents.core.view import ClusterViews
    from agents.fake.cluster import FakeCluster

    keys = ("topology/spine", "topology/leaf")
    records = [NodeRecord(f"n{i:05d}", Resources.of(gpu=GPUS, cpu=64_000),
                          labels={keys[1]: f"l{i // 8}", keys[0]: f"s{i // 64}"}) for i in range(nodes)]
    cluster = FakeCluster("c1", records)

    def controllers(views: ClusterViews | None) -> list[JobController]:
        out = []
        for j in range(jobs):
            job = gpu_job(f"j{j:04d}", (("worker", 4, GPUS),))
            pods = [("worker", k, f"n{j * 8 + k:05d}") for k in range(4)]
            out.append(JobController(work_for(job, "c1", f"t1-l{j}", pods=pods), label_keys=keys, views=views))
        return out

    shared, fresh = controllers(ClusterViews()), controllers(None)
    for now in (0.0, 1.0):  # bind every gang, then see it run
        for ctl in shared:
            await ctl.sync(cluster, now, None)
    for ctl in fresh:
        await ctl.sync(cluster, 1.0, None)
    samples: dict[str, list[float]] = {"shared": [], "fresh": []}
    for r in range(3):  # interleaved, so both see the same host load
        for name, ctls in (("shared", shared), ("fresh", fresh)):
            t0 = time.process_time()
            for ctl in ctls:
                report = await ctl.sync(cluster, 2.0 + r, None)
                assert not report.error and report.phase == "Running", report
            samples[name].append(time.process_time() - t0)
    shared_ms, fresh_ms = _ms(samples["shared"]), _ms(samples["fresh"])
    _record(f"steady_pass_{nodes}_nodes_{jobs}_jobs", {
        "shared_view_cpu": shared_ms, "read_per_job_cpu": fresh_ms,
        "ratio_shared_to_per_job": round(shared_ms["median_ms"] / fresh_ms["median_ms"], 4)})


@pytest.mark.parametrize(("nodes", "jobs"), [(2_000, 200), (20_000, 20)])
async def test_pass_over_many_jobs_on_a_busy_cluster(nodes: int, jobs: int) -> None:
    """3b. As 3, but a pod of another scheduler changes status between every two jobs (a
    busy cluster). Inside a pass (``ClusterViews.one_pass``) the view is kept across such
    changes while younger than twice its build time; the baseline, in the same process,
    is the same views outside a pass, where every change rebuilds it."""
    from agents.core.controller import JobController
    from agents.core.view import ClusterViews
    from agents.fake.cluster import FakeCluster

    keys = ("topology/spine", "topology/leaf")
    records = [NodeRecord(f"n{i:05d}", Resources.of(gpu=GPUS, cpu=64_000),
                          labels={keys[1]: f"l{i // 8}", keys[0]: f"s{i // 64}"}) for i in range(nodes)]
    cluster = FakeCluster("c1", records)
    cluster.occupy("theirs", f"n{nodes - 1:05d}", Resources.of(gpu=1))
    views = ClusterViews()
    ctls = []
    for j in range(jobs):
        job = gpu_job(f"j{j:04d}", (("worker", 4, GPUS),))
        pods = [("worker", k, f"n{j * 8 + k:05d}") for k in range(4)]
        ctls.append(JobController(work_for(job, "c1", f"t1-l{j}", pods=pods), label_keys=keys, views=views))
    for now in (0.0, 1.0):
        for ctl in ctls:
            await ctl.sync(cluster, now, None)
    samples: dict[str, list[float]] = {"in_pass": [], "every_change": []}
    builds: dict[str, list[int]] = {"in_pass": [], "every_change": []}
    for r in range(3):
        for name in ("in_pass", "every_change"):
            before, t0 = views.builds, time.process_time()
            with views.one_pass(cluster) if name == "in_pass" else contextlib.nullcontext():
                for ctl in ctls:
                    cluster.restart_container("theirs", namespace="other")  # others' change
                    report = await ctl.sync(cluster, 2.0 + r, None)
                    assert not report.error and report.phase == "Running", report
            samples[name].append(time.process_time() - t0)
            builds[name].append(views.builds - before)
    in_pass, every = _ms(samples["in_pass"]), _ms(samples["every_change"])
    _record(f"busy_pass_{nodes}_nodes_{jobs}_jobs", {
        "in_pass_cpu": in_pass, "rebuild_on_every_change_cpu": every,
        "builds_in_pass": builds["in_pass"], "builds_on_every_change": builds["every_change"],
        "ratio": round(in_pass["median_ms"] / every["median_ms"], 4)})


# ---------------------------------------------------------------------------------------
# 4. The agent's event loop on a large cluster (20,000 nodes, 80,000 pods): how long the
#    loop is held (a task sleeping 10 ms records its overshoot) while the snapshot is
#    built, an informer relists or takes a burst of watch events, and a pass runs over
#    1,000 jobs. "before" is the code of commit BEFORE_LOOP_FIX, loaded from git into this
#    process; "after" is the code in the tree. The Lease is lost when the loop is held
#    past the renew deadline (10 s by default).

BEFORE_LOOP_FIX = "038e77f"
BIG_NODES, BIG_PODS, BIG_JOBS = 20_000, 80_000, 1_000
LOOP_KEYS = ("topology/spine", "topology/leaf")


def _module_at(commit: str, path: str) -> Any:
    """The module ``path`` as it was at ``commit`` (read with ``git show``), imported
    under a private name beside the current one."""
    import importlib.util
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[2]
    source = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    name = "before_" + path.removesuffix(".py").replace("/", "_")
    target = Path(tempfile.mkdtemp()) / f"{name}.py"
    target.write_text(source)
    spec = importlib.util.spec_from_file_location(name, target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class LoopLag:
    """A task that sleeps 10 ms over and over and records how late it wakes."""

    def __init__(self, period: float = 0.01) -> None:
        self.period = period
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _probe(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.period)
            self.samples.append(time.perf_counter() - t0 - self.period)

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._probe())
        await asyncio.sleep(0)
        self._started = time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._started
        await asyncio.sleep(self.period * 2)  # the probe wakes once more after the work ends
        assert self._task is not None
        self._task.cancel()

    def figures(self) -> dict[str, float]:
        ordered = sorted(self.samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
        return {"max_ms": round(max(ordered, default=0.0) * 1000, 1), "p99_ms": round(p99 * 1000, 1),
                "wakeups": len(ordered), "wall_s": round(self.wall, 2)}


def _big_cluster() -> Any:
    from agents.fake.cluster import FakeCluster

    records = [NodeRecord(f"n{i:05d}", Resources.of(gpu=GPUS, cpu=64_000),
                          labels={LOOP_KEYS[1]: f"l{i // 8}", LOOP_KEYS[0]: f"s{i // 64}"}) for i in range(BIG_NODES)]
    cluster = FakeCluster("c1", records)
    return cluster


def _fill(cluster: Any, pods: int) -> None:
    """Other schedulers' pods, one GPU each, spread over every node."""
    for k in range(pods):
        cluster.occupy(f"o{k:05d}", f"n{k % BIG_NODES:05d}", Resources.of(gpu=1, cpu=1000))


async def test_loop_lag_while_the_snapshot_is_built_20000_nodes() -> None:
    from agents.core.view import ClusterViews
    from agents.runtime import snapshot_key
    from agents.runtime_snapshots import encode_snapshot

    before = _module_at(BEFORE_LOOP_FIX, "agents/runtime_snapshots.py")
    cluster = _big_cluster()
    _fill(cluster, BIG_PODS)
    figures: dict[str, Any] = {}
    for r in range(2):
        async with LoopLag() as lag:  # the old _snapshots: read, build, encode and key on the loop
            msg, _ = await before.snapshot_message(cluster, now=1.0, label_keys=LOOP_KEYS, labels={"region": "x"})
            stamp = type(msg)()
            stamp.CopyFrom(msg)
            stamp.ClearField("taken_at")
            old_key = stamp.SerializeToString(deterministic=True)
        figures[f"before_{r}"] = lag.figures()
        views = ClusterViews()
        async with LoopLag() as lag:  # AgentRuntime._snapshot now
            view = await views.get(cluster, LOOP_KEYS)
            new, _ = await encode_snapshot(view, "c1", now=1.0, labels={"region": "x"})
            assert new is not None
            key = await asyncio.to_thread(snapshot_key, new)
        figures[f"after_{r}"] = lag.figures()
        assert new == msg and key == old_key
        async with LoopLag() as lag:  # right after a pass: the view at this revision is the pass's
            view = await views.get(cluster, LOOP_KEYS)
            new, _ = await encode_snapshot(view, "c1", now=1.0, labels={"region": "x"})
            assert new is not None
            await asyncio.to_thread(snapshot_key, new)
        figures[f"after_view_reused_{r}"] = lag.figures()
    _record("loop_lag_snapshot_20000_nodes_80000_pods", figures)


class _Answer:
    """What ``call``/``stream`` read from a generated method called with ``_preload_content=False``."""

    status = 200

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.content = self

    async def read(self) -> bytes:
        return self.body

    async def iter_any(self) -> Any:
        # A burst already buffered: aiohttp hands over what it holds, at most about its
        # 64 KiB read buffer at a time, without suspending while data is there.
        for start in range(0, len(self.body), 65_536):
            yield self.body[start:start + 65_536]

    def release(self) -> None:
        return None

    def close(self) -> None:
        return None


def _pod_json(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"p{i:06d}", "namespace": f"ns{i % 50}", "resourceVersion": str(1000 + i),
                         "labels": {"app": f"a{i % 300}", "pod-template-hash": "5d8f9c"},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": f"n{i % BIG_NODES:05d}", "containers": [
                {"name": "main", "resources": {"requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z", "containerStatuses": [
                {"restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}]}}


def _node_json(i: int) -> dict[str, Any]:
    labels = {f"example.com/label-{k}": f"value-{k}-{i % 7}" for k in range(98)}
    labels.update({LOOP_KEYS[1]: f"l{i // 8}", LOOP_KEYS[0]: f"s{i // 64}"})
    return {"metadata": {"name": f"n{i:05d}", "resourceVersion": str(1000 + i), "labels": labels},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _list_pages(make: Any, count: int, page: int = 500) -> list[bytes]:
    pages = []
    for start in range(0, count, page):
        meta = {"resourceVersion": str(10 ** 7)} | ({"continue": str(start + page)} if start + page < count else {})
        pages.append(json.dumps({"items": [make(i) for i in range(start, min(count, start + page))],
                                 "metadata": meta}).encode())
    return pages


async def test_loop_lag_while_an_informer_lists_and_watches() -> None:
    from agents.k8s.convert import node_record, pod_record
    from agents.k8s.informer import Informer

    before = _module_at(BEFORE_LOOP_FIX, "agents/k8s/informer.py")
    figures: dict[str, Any] = {}
    for kind, make, convert, count in (("pods", _pod_json, pod_record, 100_000),
                                       ("nodes", _node_json, node_record, BIG_NODES)):
        pages = _list_pages(make, count)
        burst = b"".join(json.dumps({"type": "MODIFIED", "object": make(i) | {"metadata": {
            **make(i)["metadata"], "resourceVersion": str(2 * 10 ** 7 + i)}}}).encode() + b"\n"
            for i in range(min(count, 20_000)))

        def list_fn(*, pages: list[bytes] = pages, burst: bytes = burst, **kwargs: Any) -> Any:
            async def answer() -> _Answer:
                if kwargs.get("watch"):
                    return _Answer(burst)
                return _Answer(pages[int(kwargs.get("_continue") or 0) // 500])
            return answer()

        for label, cls in (("before", before.Informer), ("after", Informer)):
            events: list[tuple[str, Any]] = []

            def notify(type_: str, key: Any, _value: Any, events: list[tuple[str, Any]] = events) -> None:
                events.append((type_, key))

            inf = cls(kind, list_fn, convert, notify)
            async with LoopLag() as lag:
                await inf.relist()
            figures[f"{kind}_relist_{count}_{label}"] = lag.figures()
            assert len(inf) == count and len(events) == count
            async with LoopLag() as lag:
                await inf.watch_once()
            figures[f"{kind}_watch_burst_20000_{label}"] = lag.figures()
            assert inf.events == min(count, 20_000)
            del inf, events
    _record("loop_lag_informer", figures)


async def test_loop_lag_while_a_pass_runs_over_1000_jobs() -> None:
    """A pass after a change from outside (the view is rebuilt) over 1,000 running 4-pod
    jobs, with the orphan sweep, on 20,000 nodes holding 80,000 pods."""
    from agents.core.render import render
    from agents.runtime import AgentRuntime, RuntimeConfig

    before_runtime = _module_at(BEFORE_LOOP_FIX, "agents/runtime.py")
    before_view = _module_at(BEFORE_LOOP_FIX, "agents/core/view.py")
    cluster = _big_cluster()
    works = []
    for j in range(BIG_JOBS):
        job = gpu_job(f"j{j:04d}", (("worker", 4, 1),), plugins=())
        pods = [("worker", k, f"n{(j * 4 + k) % BIG_NODES:05d}") for k in range(4)]
        work = work_for(job, "c1", f"t1-l{(j * 4) // 8}", pods=pods)
        works.append(work)
        rendered = render(work)
        await cluster.create_service(rendered.service)
        for manifest, (_, _, node) in zip(rendered.pods, pods, strict=True):
            await cluster.create_pod(manifest)
            await cluster.bind_pod(manifest.namespace, manifest.name, node)
    _fill(cluster, BIG_PODS - 4 * BIG_JOBS)
    config = RuntimeConfig(cluster="c1", server="127.0.0.1:1", label_keys=LOOP_KEYS)
    runtimes = {"before": before_runtime.AgentRuntime(cluster, config), "after": AgentRuntime(cluster, config)}
    runtimes["before"].jobs.views = before_view.ClusterViews()  # the old inline view, for the old runtime
    for rt in runtimes.values():
        for work in works:
            rt.jobs.accept(work)
        rt._synced = True
        await rt._pass()  # the first pass of each job reads its checkpoint and saves one
    figures: dict[str, Any] = {}
    for r in range(2):
        for label, rt in runtimes.items():
            cluster.occupy(f"theirs-{label}-{r}", f"n{BIG_NODES - 1:05d}", Resources.of(gpu=1))
            async with LoopLag() as lag:
                await rt._pass()
            figures[f"{label}_{r}"] = lag.figures()
    assert all(len(cluster.pods({LABEL_JOB: w.name})) == 4 for w in works)
    _record("loop_lag_pass_1000_jobs_20000_nodes", figures)


# ---------------------------------------------------------------------------------------
# 5. A pass in which every job writes: 200 newly placed 4-pod jobs on 4,000 nodes, each
#    job's pass creating and binding its pods. Each job must see the room the job before
#    it took; "before" (the view of commit BEFORE_FOLLOW, loaded from git) rebuilt the
#    whole view for that, once per job; "after" brings the view forward by the agent's own
#    writes. Interleaved in one process; CPU of the process (every thread), wall time, the
#    loop's lag, and how many views were built.

BEFORE_FOLLOW = "421f095"
WRITING_NODES, WRITING_JOBS = 4_000, 200


def _writing_pass_inputs() -> tuple[list[NodeRecord], list[Any]]:
    """The nodes and the 200 newly placed jobs of the writing pass (sections 5 and 6)."""
    records = [NodeRecord(f"n{i:05d}", Resources.of(gpu=GPUS, cpu=64_000),
                          labels={LOOP_KEYS[1]: f"l{i // 8}", LOOP_KEYS[0]: f"s{i // 64}"})
               for i in range(WRITING_NODES)]
    works = []
    for j in range(WRITING_JOBS):
        job = gpu_job(f"j{j:04d}", (("worker", 4, 1),), plugins=())
        pods = [("worker", k, f"n{(j * 4 + k) % WRITING_NODES:05d}") for k in range(4)]
        works.append(work_for(job, "c1", f"t1-l{(j * 4) // 8}", pods=pods))
    return records, works


async def _writing_pass(cluster: Any, works: list[Any], others: int, views: Any = None) -> dict[str, Any]:
    """One ``AgentRuntime._pass()`` over ``works`` on ``cluster`` (filled with ``others``
    pods of other schedulers first); CPU of the process, wall time, loop lag, views built,
    and CPython's full collections during the pass (each holds the loop; they fall in
    whichever pass crosses the threshold, so the heap is collected before each pass)."""
    import gc

    from agents.runtime import AgentRuntime, RuntimeConfig

    for k in range(others):  # other schedulers' pods, one GPU each
        cluster.occupy(f"o{k:05d}", f"n{k % WRITING_NODES:05d}", Resources.of(gpu=1, cpu=1000))
    rt = AgentRuntime(cluster, RuntimeConfig(cluster="c1", server="127.0.0.1:1", label_keys=LOOP_KEYS))
    if views is not None:
        rt.jobs.views = views
    for w in works:
        rt.jobs.accept(w)
    rt._synced = True
    full: list[float] = []
    began: list[float] = []

    def timed(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                began.append(time.perf_counter())
            elif began:
                full.append(round((time.perf_counter() - began.pop()) * 1000, 1))

    gc.collect()
    gc.callbacks.append(timed)
    cpu = time.process_time()
    try:
        async with LoopLag() as lag:
            await rt._pass()
    finally:
        gc.callbacks.remove(timed)
    figures = {**lag.figures(), "cpu_s": round(time.process_time() - cpu, 2), "views_built": rt.jobs.views.builds,
               "views_followed": getattr(rt.jobs.views, "followed", 0), "full_gc_ms": full}
    assert cluster.bind_count == 4 * WRITING_JOBS
    assert all(cluster.pod(f"{w.name}-worker-{k}").node == p.node
               for w in works for k, p in enumerate(w.placement.pods))
    return figures


def _ratios(figures: dict[str, Any], runs: int) -> None:
    for key in ("cpu_s", "wall_s", "max_ms"):
        figures[f"ratio_{key}"] = round(statistics.median(figures[f"after_{r}"][key] for r in range(runs))
                                        / statistics.median(figures[f"before_{r}"][key] for r in range(runs)), 4)


@pytest.mark.parametrize("others", [0, 16_000])
async def test_pass_where_every_job_writes(others: int) -> None:
    from agents.fake.cluster import FakeCluster

    before_view = _module_at(BEFORE_FOLLOW, "agents/core/view.py")
    records, works = _writing_pass_inputs()
    figures: dict[str, Any] = {}
    for r in range(2):
        for label in ("before", "after"):
            views = before_view.ClusterViews() if label == "before" else None  # the old view (same API)
            figures[f"{label}_{r}"] = await _writing_pass(FakeCluster("c1", records), works, others, views)
    _ratios(figures, 2)
    _record(f"writing_pass_{WRITING_NODES}_nodes_{WRITING_JOBS}_jobs_{others}_others", figures)


# ---------------------------------------------------------------------------------------
# 6. The same pass with the backend's pod index (agents/pod_index.py): "before" is the fake
#    cluster of commit BEFORE_INDEX (loaded from git), which scanned every pod for each
#    writing job's re-read of its pods (``list_pods`` by job label) and for each bind's room
#    check; "after" reads both off the index. Everything else is the code in the tree.
#    Interleaved in one process. Then the Kubernetes backend's two reads on their own, at
#    20,000 nodes and 80,000 pods in its informer: ``_check_room`` (before every Binding)
#    and ``list_pods`` by job label, the backend of BEFORE_INDEX against the current one.

BEFORE_INDEX = "968c34c"


@pytest.mark.parametrize("others", [0, 16_000])
async def test_pass_where_every_job_writes_with_the_pod_index(others: int) -> None:
    from agents.fake.cluster import FakeCluster

    before = _module_at(BEFORE_INDEX, "agents/fake/cluster.py")
    records, works = _writing_pass_inputs()
    figures: dict[str, Any] = {}
    runs = 3
    for r in range(runs):
        for label, cluster_type in (("before", before.FakeCluster), ("after", FakeCluster)):
            figures[f"{label}_{r}"] = await _writing_pass(cluster_type("c1", records), works, others)
    _ratios(figures, runs)
    _record(f"writing_pass_pod_index_{WRITING_NODES}_nodes_{WRITING_JOBS}_jobs_{others}_others", figures)


async def test_kubernetes_backend_room_check_and_job_read_80000_pods() -> None:
    from kubernetes_asyncio.client import ApiClient

    from agents.core.records import PodManifest
    from agents.k8s.backend import KubernetesBackend
    from agents.k8s.convert import pod_body

    before = _module_at(BEFORE_INDEX, "agents/k8s/backend.py")
    figures: dict[str, Any] = {}
    async with ApiClient() as api:
        backends = {"before": before.KubernetesBackend(api, "c1", owns_client=False),
                    "after": KubernetesBackend(api, "c1", owns_client=False)}
        jobs = [f"j{j:04d}" for j in range(WRITING_JOBS)]
        for backend in backends.values():
            backend._ready.set()  # the caches are filled by hand here, as the watch would
            for i in range(BIG_NODES):
                backend.nodes._apply("ADDED", _node_json(i))
            for i in range(BIG_PODS):
                backend.pods._apply("ADDED", _pod_json(i))
            for j, job in enumerate(jobs):  # each job's 4 pods, created, not yet bound
                for k in range(4):
                    body = pod_body(PodManifest(f"{job}-worker-{k}", "default", labels={LABEL_JOB: job},
                                                requests=Resources.of(gpu=1, cpu=1000)))
                    body["metadata"]["resourceVersion"] = str(10 ** 7 + 4 * j + k)
                    backend.pods._apply("ADDED", {"kind": "Pod", **body})
        for r in range(3):
            for label, backend in backends.items():
                cpu = time.process_time()
                for j, job in enumerate(jobs):
                    for k in range(4):
                        pod = backend.pods.get(("default", f"{job}-worker-{k}"))
                        backend._check_room(pod, pod.name, f"n{(4 * j + k) % BIG_NODES:05d}")
                checks = time.process_time() - cpu
                cpu = time.process_time()
                read = [await backend.list_pods({LABEL_JOB: job}) for job in jobs]
                reads = time.process_time() - cpu
                assert all(len(pods) == 4 for pods in read)
                figures[f"{label}_{r}"] = {"check_room_ms_each": round(checks * 1000 / (4 * len(jobs)), 3),
                                           "job_read_ms_each": round(reads * 1000 / len(jobs), 3)}
        same = [await b.list_pods({LABEL_JOB: jobs[7]}) for b in backends.values()]
        assert same[0] == same[1]
        assert backends["after"].pod_index.used("n00000") == Resources.of(gpu=4, cpu=4000, memory=16 * 2 ** 30)
    for key in ("check_room_ms_each", "job_read_ms_each"):
        figures[f"ratio_{key}"] = round(statistics.median(figures[f"after_{r}"][key] for r in range(3))
                                        / statistics.median(figures[f"before_{r}"][key] for r in range(3)), 5)
    _record("kubernetes_backend_reads_20000_nodes_80000_pods", figures)


async def test_loop_lag_of_a_view_build_80000_pods() -> None:
    """The view's reads at 20,000 nodes and 80,000 pods: the view of BEFORE_FOLLOW read the
    pods sorted, on the loop; now they are read unordered and each job's few are sorted in
    the worker thread. Longest loop stall and wall time of one full build, interleaved."""
    from agents.core.view import read_view

    before_view = _module_at(BEFORE_FOLLOW, "agents/core/view.py")
    cluster = _big_cluster()
    _fill(cluster, BIG_PODS)
    figures: dict[str, Any] = {}
    for r in range(5):
        for label, read in (("before", before_view.read_view), ("after", read_view)):
            async with LoopLag() as lag:
                view = await read(cluster, LOOP_KEYS)
            figures[f"{label}_{r}"] = lag.figures()
            assert len(view.nodes) == BIG_NODES
        t0 = time.process_time()
        await cluster.list_pods({})
        t1 = time.process_time()
        await cluster.list_pods({}, ordered=False)
        figures[f"list_pods_{r}"] = {"ordered_ms": round((t1 - t0) * 1000, 1),
                                     "unordered_ms": round((time.process_time() - t1) * 1000, 1)}
    _record("loop_lag_view_build_20000_nodes_80000_pods", figures)
