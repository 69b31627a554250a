"""Nothing the agent does holds its event loop for long: the Lease renewals share it, and a
loop held past the renew deadline loses the Lease while this leader still acts
(docs/design/agent.md, "The event loop at scale").

Structure, not wall-clock: the cluster build and the snapshot encoding run in a worker
thread; a relist or a burst of watch events, a pass over many jobs and a burst of change
events give the loop a turn every few objects; and none of that changes what is built,
cached or emitted, nor its order.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from agentkit import LABEL_KEYS, HttpAnswer, fabric, fake, gpu, job, work

import agents.core.view as view_module
import agents.runtime_snapshots as snapshots_module
from agents.core.records import LABEL_JOB, PodRecord
from agents.core.snapshot import build_snapshot, to_nodes
from agents.core.view import ClusterViews
from agents.fake.cluster import FakeCluster
from agents.k8s.informer import CONVERT_BATCH, Informer
from agents.runtime import WATCH_BATCH, AgentRuntime, RuntimeConfig
from agents.runtime_jobs import labelled_pods, orphan_ops
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector
from federation.wire.convert import hypernode_to_proto, node_to_proto, snapshot_to_proto, timestamp_to_proto

CONFIG = RuntimeConfig(cluster="c1", server="127.0.0.1:1", label_keys=LABEL_KEYS, cluster_labels={"region": "eu"})


class Turns:
    """Counts the turns the event loop gives other tasks while some work runs."""

    def __init__(self) -> None:
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.count += 1

    async def __aenter__(self) -> Turns:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # the ticker is running
        self.count = 0
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


# ------------------------------------------------------------------ snapshot and view


def _recording(fn: Callable[..., Any], threads: list[int]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return fn(*args, **kwargs)
    return wrapper


async def test_the_cluster_is_built_and_the_snapshot_encoded_off_the_loop_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    encoded: list[int] = []
    monkeypatch.setattr(view_module, "build_snapshot", _recording(build_snapshot, built))
    monkeypatch.setattr(snapshots_module, "snapshot_to_proto", _recording(snapshot_to_proto, encoded))
    runtime = AgentRuntime(fake(), CONFIG)
    taken = await runtime._snapshot()
    assert taken is not None
    loop_thread = threading.get_ident()
    assert built and encoded
    assert loop_thread not in built and loop_thread not in encoded


async def test_a_snapshot_at_the_revision_of_the_last_pass_reuses_its_view() -> None:
    cluster = fake()
    runtime = AgentRuntime(cluster, CONFIG)
    runtime.jobs.accept(work(job()))
    runtime._synced = True
    await runtime._pass()  # binds (the revision moves), then sweeps orphans with a view read after that
    builds = runtime.jobs.views.builds
    assert await runtime._snapshot() is not None
    assert runtime.jobs.views.builds == builds
    cluster.occupy("theirs", "n05", gpu(1))
    assert await runtime._snapshot() is not None
    assert runtime.jobs.views.builds == builds + 1


def _inline_message(cluster: FakeCluster, specs: list[HyperNodeSpec], now: float) -> Any:
    """The message as the agent built it on the loop before (build, then encode)."""
    nodes, pods = cluster._nodes.values(), cluster.pods()
    result = build_snapshot("c1", sorted(nodes, key=lambda n: n.name), pods, specs, label_keys=LABEL_KEYS, now=now,
                            labels=CONFIG.cluster_labels)
    if result.snapshot is not None:
        return snapshot_to_proto(result.snapshot)
    from federation.v1 import types_pb2
    return types_pb2.ClusterSnapshot(cluster="c1", labels=dict(CONFIG.cluster_labels),
                                     nodes=[node_to_proto(n) for n in to_nodes(list(nodes), pods)],
                                     hyper_nodes=[hypernode_to_proto(h) for h in specs],
                                     taken_at=timestamp_to_proto(now))


EXPLICIT = [HyperNodeSpec("rack-a", 1, (HyperNodeMember("Node", MemberSelector(exact_name="n00")),))]
CLASHING = [HyperNodeSpec("t1-l0", 1, (HyperNodeMember("Node", MemberSelector(exact_name="n00")),))]


@pytest.mark.parametrize("specs", [[], EXPLICIT, CLASHING], ids=["discovered", "explicit-and-discovered",
                                                                  "invalid-tree-still-sent"])
async def test_the_message_is_the_one_the_inline_build_gave(specs: list[HyperNodeSpec]) -> None:
    cluster = FakeCluster("c1", fabric(), specs)
    cluster.occupy("theirs", "n01", gpu(3))
    message, tree = await snapshots_module.snapshot_message(cluster, now=42.5, label_keys=LABEL_KEYS,
                                                            labels=CONFIG.cluster_labels, views=ClusterViews())
    assert message == _inline_message(cluster, specs, 42.5)
    assert (tree is None) == (specs is CLASHING)


async def test_unreadable_hypernodes_send_no_snapshot() -> None:
    cluster = fake()
    cluster.set_hypernode_error("spec.members[0]: bad selector")
    assert await snapshots_module.snapshot_message(cluster, now=1.0, label_keys=LABEL_KEYS) == (None, None)


# ------------------------------------------------------------------ informer


def _pod(i: int, rv: int, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": f"p{i:04d}", "resourceVersion": str(rv)},
            "status": {"phase": phase}}


def _informer(pages: list[list[dict[str, Any]]], burst: list[dict[str, Any]],
              seen: list[tuple[str, tuple[str, str], Any]]) -> Informer[Mapping[str, Any]]:
    bodies = [json.dumps({"items": items, "metadata": {"resourceVersion": "5000"} | (
        {"continue": str(i + 1)} if i + 1 < len(pages) else {})}).encode() for i, items in enumerate(pages)]
    stream = b"".join(json.dumps(event).encode() + b"\n" for event in burst)

    def list_fn(**kwargs: Any) -> Any:
        async def answer() -> HttpAnswer:  # a burst already buffered: one chunk, no suspension
            return HttpAnswer([stream if kwargs.get("watch") else bodies[int(kwargs.get("_continue") or 0)]])
        return answer()

    return Informer("pods", list_fn, lambda obj: obj, lambda t, k, v: seen.append((t, k, v)))


async def test_a_relist_yields_to_the_loop_and_keeps_its_cache_and_events() -> None:
    n = 10 * CONVERT_BATCH
    seen: list[tuple[str, tuple[str, str], Any]] = []
    listed = [_pod(i, 100 + i) for i in range(n)]
    inf = _informer([listed[: n // 2], listed[n // 2:]], [], seen)
    inf._apply("ADDED", _pod(0, 100))  # held at the listed version: no event
    inf._apply("ADDED", _pod(1, 50))  # held older: MODIFIED
    inf._apply("ADDED", _pod(9999, 60))  # gone from the list: DELETED, first
    seen.clear()
    async with Turns() as turns:
        await inf.relist()
    assert turns.count >= n // CONVERT_BATCH - 1
    assert [(t, k[1]) for t, k, _ in seen] == (
        [("DELETED", "p9999"), ("MODIFIED", "p0001")] + [("ADDED", f"p{i:04d}") for i in range(2, n)])
    assert sorted(inf.records(), key=lambda o: o["metadata"]["name"]) == listed
    assert inf.resource_version == "5000" and inf._listed_at == 5000 and inf.synced.is_set()


async def test_a_burst_of_watch_events_yields_to_the_loop_in_order() -> None:
    n = 8 * CONVERT_BATCH
    burst: list[dict[str, Any]] = [{"type": "ADDED", "object": _pod(i, 6000 + i)} for i in range(n)]
    burst += [{"type": "MODIFIED", "object": _pod(i, 7000 + i, "Succeeded")} for i in range(0, n, 2)]
    burst += [{"type": "DELETED", "object": _pod(i, 8000 + i, "Succeeded")} for i in range(0, n, 4)]
    seen: list[tuple[str, tuple[str, str], Any]] = []
    inf = _informer([[]], burst, seen)
    async with Turns() as turns:
        await inf.watch_once()
    assert turns.count >= len(burst) // CONVERT_BATCH - 1
    assert [(t, k[1]) for t, k, _ in seen] == [(e["type"], e["object"]["metadata"]["name"]) for e in burst]
    held = {o["metadata"]["name"]: o["status"]["phase"] for o in inf.records()}
    assert held == {f"p{i:04d}": "Succeeded" if i % 2 == 0 else "Running" for i in range(n) if i % 4}
    assert inf.resource_version == str(8000 + n - 4)


# ------------------------------------------------------------------ passes and change events


class CountingCluster(FakeCluster):
    """The fake, counting the reads of every pod in the cluster."""

    full_pod_lists = 0

    async def list_pods(self, selector: Mapping[str, str], *, ordered: bool = True) -> list[PodRecord]:
        if not selector:
            self.full_pod_lists += 1
        return await super().list_pods(selector, ordered=ordered)


def _one_pod_jobs(cluster: FakeCluster, runtime: AgentRuntime, count: int) -> None:
    for i in range(count):
        runtime.jobs.accept(work(job(f"j{i}", (("worker", 1, 1),)), "t1-l0", [("worker", 0, "n00")]))


async def test_a_pass_gives_the_loop_a_turn_after_every_job() -> None:
    cluster = fake()
    runtime = AgentRuntime(cluster, CONFIG)
    _one_pod_jobs(cluster, runtime, 6)
    runtime._synced = True
    await runtime._pass()  # creates and binds; the next pass has nothing to do and reads nothing anew
    async with Turns() as turns:
        await runtime._pass()
    assert turns.count >= 6


async def test_the_orphan_sweep_reads_the_pass_view_not_every_pod_again() -> None:
    cluster = CountingCluster("c1", fabric())
    runtime = AgentRuntime(cluster, CONFIG)
    _one_pod_jobs(cluster, runtime, 2)
    runtime._synced = True
    await runtime._pass()
    lists = cluster.full_pod_lists
    await runtime._pass()  # nothing changed: the view of the last pass serves the sweep too
    assert cluster.full_pod_lists == lists
    keep = {"j0"}  # j1 is an orphan now: its pod goes, exactly as a full list would decide
    view = await runtime.jobs.views.get(cluster, LABEL_KEYS)
    everything = await cluster.list_pods({})
    assert [p for p in everything if p.labels.get(LABEL_JOB) == "j1"] == labelled_pods(view, keep)
    assert orphan_ops(labelled_pods(view, keep), [], [], keep, []) == orphan_ops(everything, [], [], keep, [])


async def test_a_burst_of_change_events_gives_the_loop_turns() -> None:
    cluster = fake()
    runtime = AgentRuntime(cluster, CONFIG)
    watcher = asyncio.create_task(runtime._watcher())
    await asyncio.sleep(0)  # subscribed
    n = 4 * WATCH_BATCH
    for i in range(n):
        cluster.occupy(f"theirs-{i}", "n00", gpu(0))
    queue = cluster._subscribers[0]
    try:
        async with Turns() as turns:
            while not queue.empty():
                await asyncio.sleep(0)
        assert turns.count >= n // WATCH_BATCH - 1
        assert runtime._dirty.is_set() and runtime._snapshot_dirty.is_set()
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
