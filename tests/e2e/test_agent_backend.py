"""The Kubernetes adapter (agents/k8s) against real kube-apiservers: reads, writes, the
Protocol's error mapping, the watch feeding change events, and the relist after 410."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import (
    KWOK_TOLERATION,
    Tree,
    backend_for,
    eventually,
    hypernode,
    unique,
)
from kubernetes_asyncio.client import ApiClient

from agents.backend import AlreadyExists, BindingRejected, NotFound
from agents.core.apply import read_snapshot
from agents.core.records import LABEL_JOB, LABEL_WORK_VERSION, ConfigMapManifest, PodManifest
from agents.k8s.convert import pod_record
from agents.k8s.informer import Informer
from federation.domain.errors import InvalidInput
from federation.domain.resources import Resources

pytestmark = pytest.mark.e2e


def manifest(name: str, job: str, gpus: int = 2) -> PodManifest:
    return PodManifest(name=name, namespace="default", labels={LABEL_JOB: job, LABEL_WORK_VERSION: "1"},
                       requests=Resources.of(gpu=gpus, cpu=500), tolerations=(KWOK_TOLERATION,))


async def test_nodes_and_hypernodes_make_a_snapshot(control_plane: ControlPlane) -> None:
    backend = await backend_for(control_plane, "east")
    try:
        with Tree(control_plane, "east") as tree:
            async def seen() -> bool:
                names = {h.name for h in await backend.list_hypernodes()}
                return {tree.leaf_a, tree.leaf_b, tree.spine} <= names

            await eventually("HyperNodes in the cache", seen)
            nodes = {n.name: n for n in await backend.list_nodes()}
            for name in tree.nodes:
                assert nodes[name].ready and nodes[name].allocatable.gpus == 8
                assert any(t.key == "kwok.x-k8s.io/node" for t in nodes[name].taints)
            result = await read_snapshot(backend)
            assert result.snapshot is not None, result.error
            domains = result.snapshot.tree.domains
            assert domains[tree.leaf_a].nodes == frozenset(tree.nodes[:2])
            assert domains[tree.spine].tier == 2 and domains[tree.spine].nodes == frozenset(tree.nodes)
    finally:
        await backend.close()


async def test_unreadable_hypernode_is_reported_not_half_used(control_plane: ControlPlane) -> None:
    backend = await backend_for(control_plane, "west")
    name = unique("bad")
    try:
        bad = hypernode(name, 1, nodes=["west-gpu-0"])
        bad["spec"]["members"] = [{"type": "Node", "selector": {"labelMatch": {
            "matchExpressions": [{"key": "rack", "operator": "Exists"}]}}}]
        control_plane.apply_hypernodes("west", [bad])

        async def refused() -> str:
            try:
                await backend.list_hypernodes()
            except InvalidInput as exc:
                return str(exc)
            return ""

        reason = await eventually("the bad HyperNode refused", refused)
        assert f"hyperNodes[{name}]" in reason and "matchExpressions" in reason
        result = await read_snapshot(backend)
        assert result.snapshot is None and "invalid HyperNode tree" in result.error
    finally:
        control_plane.request("west", "DELETE", f"/apis/topology.volcano.sh/v1alpha1/hypernodes/{name}")
        await backend.close()


async def test_create_bind_delete_and_the_error_mapping(control_plane: ControlPlane) -> None:
    backend = await backend_for(control_plane, "east")
    job = unique("adapter")
    a, b = f"{job}-a", f"{job}-b"
    try:
        created = await backend.create_pod(manifest(a, job))
        assert created.node is None and created.requests == Resources.of(gpu=2, cpu=500)
        again = await backend.create_pod(manifest(a, job))  # same identity: idempotent
        assert again.name == a
        other = PodManifest(name=a, namespace="default", labels={LABEL_JOB: "someone-else"})
        with pytest.raises(AlreadyExists):
            await backend.create_pod(other)

        with pytest.raises(BindingRejected, match="does not exist"):
            await backend.bind_pod("default", a, "no-such-node")
        with pytest.raises(NotFound):
            await backend.bind_pod("default", f"{job}-missing", "east-gpu-0")
        await backend.bind_pod("default", a, "east-gpu-0")
        await backend.bind_pod("default", a, "east-gpu-0")  # already there: idempotent
        with pytest.raises(BindingRejected, match="already bound"):
            await backend.bind_pod("default", a, "east-gpu-1")

        big = manifest(b, job, gpus=8)
        await backend.create_pod(big)
        with pytest.raises(BindingRejected, match="no room"):
            await backend.bind_pod("default", b, "east-gpu-0")  # 2 of 8 GPUs already taken

        async def running() -> bool:
            pods = {p.name: p for p in await backend.list_pods({LABEL_JOB: job})}
            return pods[a].phase == "Running" and pods[a].node == "east-gpu-0"

        await eventually("kwok runs the bound pod", running)

        cm = ConfigMapManifest(f"{job}-hosts", "default", {LABEL_JOB: job}, {"federation.io/spec-hash": "1"},
                               {"worker.host": "x"})
        await backend.create_config_map(cm)
        await backend.create_config_map(cm)  # same spec hash: idempotent
        assert [c.data for c in await backend.list_config_maps({LABEL_JOB: job})] == [{"worker.host": "x"}]

        assert await backend.delete_pod("default", a) is True
        assert await backend.delete_pod("default", b) is True
        assert await backend.delete_config_map("default", cm.name) is True
        assert await backend.delete_config_map("default", cm.name) is False

        async def gone() -> bool:
            return not await backend.list_pods({LABEL_JOB: job})

        await eventually("pods deleted (kwok finalises the bound one)", gone)
        assert await backend.delete_pod("default", a) is False
    finally:
        for name in (a, b):
            await backend.delete_pod("default", name)
        await backend.close()


async def test_changes_by_others_arrive_as_events(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    from kubernetes_asyncio import client

    backend = await backend_for(control_plane, "west")
    name = unique("outside")
    events = backend.watch()
    try:
        await client.CoreV1Api(kube_clients["west"]).create_namespaced_pod("default", {  # type: ignore[arg-type]  # a dict body is sent as is; the generated signature names V1Pod only
            "metadata": {"name": name, "labels": {"app": "other"}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}],
                     "nodeName": "west-gpu-1", "tolerations": [{"operator": "Exists"}]},
        })

        async def next_event() -> Any:
            while True:
                event = await events.__anext__()
                if event.kind == "Pod" and getattr(event.object, "name", "") == name:
                    return event

        event = await asyncio.wait_for(next_event(), 15)
        assert event.type == "ADDED" and event.object.node == "west-gpu-1"
        pods = await backend.list_pods({"app": "other"})
        assert [p.name for p in pods] == [name]  # pods of other schedulers count for free room
    finally:
        await events.aclose()  # type: ignore[attr-defined]  # an async generator, typed as AsyncIterator
        await client.CoreV1Api(kube_clients["west"]).delete_namespaced_pod(name, "default", grace_period_seconds=0)
        await backend.close()


async def test_expired_resource_version_relists_and_reports_the_gap(controlplane_bin_dir: Path) -> None:
    """A watch from a compacted resourceVersion answers 410 Gone; the informer relists,
    and what changed meanwhile is emitted as events. Its own apiserver serves watches
    from etcd (``--watch-cache=false``), where compaction makes old versions 410; the watch
    cache instead replays current state for a version older than its window."""
    from controlplane import ControlPlane

    from agents.k8s.api import call, client_from_kubeconfig, core_api
    from agents.telemetry import WATCH_RECONNECTS

    with ControlPlane(controlplane_bin_dir, ["gone"], kwok=False,
                      apiserver_args=["--watch-cache=false"]) as cp:
        api = await client_from_kubeconfig(str(cp.kubeconfig("gone")))
        core = core_api(api)
        seen: list[tuple[str, str]] = []
        informer = Informer("pods", core.list_pod_for_all_namespaces, pod_record,
                            lambda kind, key, value: seen.append((kind, key[1])), watch_seconds=30)
        task: asyncio.Task[None] | None = None
        try:
            await informer.relist()
            old_rv, before = informer.resource_version, informer.lists
            name = unique("gap")
            await call(core.create_namespaced_pod("default", {
                "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                _preload_content=False))
            await call(core.create_namespaced_config_map("default", {"metadata": {"name": unique("later")}},
                                                         _preload_content=False))  # a newer revision
            _compact_etcd(cp)  # as the apiserver's periodic compaction does: the pod's event is gone
            informer.resource_version = old_rv  # the watch resumes from before the gap: compacted now
            expired = WATCH_RECONNECTS["expired"]
            task = asyncio.create_task(informer.run())
            await eventually("relist after 410", lambda: _async(informer.relists_after_gone >= 1
                                                                and informer.lists > before), 20)
            assert WATCH_RECONNECTS["expired"] > expired  # federation_agent_watch_reconnects_total{reason="expired"}
            await eventually("the pod created in the gap", lambda: _async(("ADDED", name) in seen), 20)
            assert informer.get(("default", name)) is not None
        finally:
            if task is not None:
                task.cancel()
            await api.close()


async def _async(value: bool) -> bool:
    return value


def _compact_etcd(control_plane: ControlPlane) -> None:
    """Compact the shared etcd to its current revision through its HTTP gateway."""
    import base64
    import json
    import urllib.request

    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        req = urllib.request.Request(control_plane.etcd_url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer: dict[str, object] = json.loads(resp.read())
            return answer

    header = post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
    post("/v3/kv/compaction", {"revision": str(header["revision"]), "physical": True})  # type: ignore[index]  # etcd's JSON answer, typed object
