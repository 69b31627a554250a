"""The pod index (agents/pod_index.py) always equals a full recount of the pods its
backend holds: the room each node's pods hold (bound and not terminal; a terminating pod
still counts) and each job's pods in (namespace, name) order. A bind is refused for lack
of room exactly when that recount says so.

Property tests (hypothesis), the index compared with a recount after every step:

- the index alone, over random puts (relabels, terminating and terminal pods, pods that
  move between nodes, over-committed nodes) and a relist's ``fresh``/``adopt``;
- the fake cluster, over random own creates, binds and deletes and others' changes;
- the Kubernetes backend, over random own writes answered by an in-memory apiserver,
  watch events (late, stale, unreadable), and relists with an own write landing while
  the list is read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from agentkit import HttpAnswer, fabric, fake, gpu
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents.backend import BackendError, BindingRejected
from agents.core.records import LABEL_JOB, PodManifest, PodRecord
from agents.core.snapshot import used_by_node
from agents.pod_index import PodIndex
from federation.domain.resources import Resources

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PODS = [("default", "p0"), ("default", "p1"), ("default", "p2"), ("team", "p0"), ("team", "p3")]
JOBS = ["a", "b", None]  # None: a pod without the job label
NODES = ["n00", "n01", "n02"]
PHASES = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]


def recount_used(pods: list[PodRecord]) -> dict[str, Resources]:
    """The full count a snapshot makes (agents/core/snapshot.py), without empty entries."""
    return {node: held for node, held in used_by_node(pods).items() if held}


def recount_job(pods: list[PodRecord], job: str) -> list[PodRecord]:
    return sorted((p for p in pods if p.labels.get(LABEL_JOB) == job), key=lambda p: (p.namespace, p.name))


def assert_index_is_recount(index: PodIndex, pods: list[PodRecord]) -> None:
    assert index.used_by_node() == recount_used(pods)
    for node in [*NODES, "gone"]:
        assert index.used(node) == recount_used(pods).get(node, Resources())
    for job in ("a", "b", "c"):
        assert index.job_pods(job) == recount_job(pods, job)


# ------------------------------------------------------------------ the index alone

POD_RECORDS = st.builds(
    lambda job, node, phase, gpus, deleting: PodRecord(
        name="", namespace="", labels={LABEL_JOB: job} if job is not None else {}, node=node, phase=phase,
        requests=Resources.of(gpu=gpus, cpu=gpus * 1000) if gpus >= 0 else Resources(), deleting=deleting),
    st.sampled_from(JOBS), st.sampled_from([None, *NODES, "gone"]), st.sampled_from(PHASES),
    st.sampled_from([-1, 0, 2, 8, 12]), st.booleans())
PUTS = st.lists(st.one_of(st.tuples(st.sampled_from(PODS), st.one_of(st.none(), POD_RECORDS)),
                          st.just("relist")), max_size=30)


@SETTINGS
@given(puts=PUTS)
def test_the_index_equals_a_recount_after_any_puts(puts: list[Any]) -> None:
    index = PodIndex()
    held: dict[tuple[str, str], PodRecord] = {}
    for put in puts:
        pod: PodRecord | None
        if put == "relist":  # what an informer does: a fresh one filled, then adopted at once
            fresh = index.fresh()
            for key, kept in held.items():
                fresh.put(key, kept)
            index.adopt(fresh)
            assert fresh.used_by_node() == {} and fresh.job_pods("a") == []  # left empty, shares nothing
        else:
            key, record = put
            pod = None if record is None else PodRecord(**{**vars(record), "namespace": key[0], "name": key[1]})
            index.put(key, pod)
            if pod is None:
                held.pop(key, None)
            else:
                held[key] = pod
        assert_index_is_recount(index, list(held.values()))


def test_a_terminating_pod_holds_its_room_and_a_terminal_one_none() -> None:
    index = PodIndex()
    index.put(("d", "p"), PodRecord("p", "d", node="n00", phase="Running", requests=gpu(4), deleting=True))
    assert index.used("n00") == gpu(4)
    index.put(("d", "p"), PodRecord("p", "d", node="n00", phase="Failed", requests=gpu(4), deleting=True))
    assert index.used("n00") == Resources() and index.used_by_node() == {}


# ------------------------------------------------------------------ the fake cluster

FAKE_STEPS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.sampled_from(PODS), st.sampled_from(JOBS), st.sampled_from([0, 1, 4, 8])),
    st.tuples(st.just("bind"), st.sampled_from(PODS), st.sampled_from(NODES), st.just(0)),
    # a new pod bound at once, as a pass does: the room check meets full nodes often
    st.tuples(st.just("place"), st.sampled_from(PODS), st.tuples(st.sampled_from(JOBS), st.sampled_from(NODES)),
              st.sampled_from([4, 8])),
    st.tuples(st.just("delete"), st.sampled_from(PODS), st.just(None), st.just(0)),
    st.tuples(st.just("occupy"), st.sampled_from(PODS), st.sampled_from(NODES), st.sampled_from([1, 8, 12])),
    st.tuples(st.sampled_from(["fail", "succeed", "evict", "restart"]), st.sampled_from(PODS), st.just(None),
              st.just(0)),
    st.tuples(st.just("remove-node"), st.sampled_from(NODES), st.just(None), st.just(0)),
    st.tuples(st.just("tick"), st.just(None), st.just(None), st.sampled_from([1, 10])),
), min_size=1, max_size=30)


@SETTINGS
@given(steps=FAKE_STEPS)
def test_the_fake_clusters_index_equals_a_recount(steps: list[tuple[Any, ...]]) -> None:
    asyncio.run(_fake_steps(steps))


async def _fake_steps(steps: list[tuple[Any, ...]]) -> None:
    cluster = fake(fabric()[:3], runtime=5.0)  # n00..n02, 8 GPUs each; bound pods finish after 5 s
    for kind, target, arg, amount in steps:
        pods = await cluster.list_pods({})  # every pod, by a scan: the recount's input
        if kind == "create":
            labels = {LABEL_JOB: arg} if arg is not None else {}
            with _refused_or_done():
                await cluster.create_pod(PodManifest(name=target[1], namespace=target[0], labels=labels,
                                                     requests=gpu(amount)))
        elif kind == "bind":
            await _bind_against_recount(cluster, pods, target, arg, cluster.node(arg))
        elif kind == "place":
            job, node = arg
            with _refused_or_done():
                await cluster.create_pod(PodManifest(name=target[1], namespace=target[0],
                                                     labels={LABEL_JOB: job} if job else {}, requests=gpu(amount)))
            await _bind_against_recount(cluster, await cluster.list_pods({}), target, node, cluster.node(node))
        elif kind == "delete":
            await cluster.delete_pod(*target)
        elif kind == "occupy":
            if cluster.node(arg) is not None:
                cluster.occupy(target[1], arg, gpu(amount), namespace=target[0])
        elif kind == "remove-node":
            if cluster.node(target) is not None:
                cluster.remove_node(target)
        elif kind == "tick":
            cluster.advance(amount)
        else:
            record = cluster.pod(target[1], target[0])
            if record is not None and record.node is not None and (not record.terminal or kind == "restart"):
                if kind == "fail":
                    cluster.fail_pod(target[1], namespace=target[0])
                elif kind == "succeed":
                    cluster.succeed_pod(target[1], namespace=target[0])
                elif kind == "evict":
                    cluster.evict_pod(target[1], namespace=target[0])
                else:
                    cluster.restart_container(target[1], namespace=target[0])
        after = await cluster.list_pods({})
        assert_index_is_recount(cluster.pod_index, after)
        for job in ("a", "b", "c"):
            assert cluster.pods({LABEL_JOB: job}) == recount_job(after, job)
            assert sorted(await cluster.list_pods({LABEL_JOB: job}, ordered=False), key=lambda p: p.name) == \
                sorted(recount_job(after, job), key=lambda p: p.name)
        for name in NODES:
            node = cluster.node(name)
            if node is not None:
                used = recount_used(after).get(name, Resources())
                assert cluster.free(name) == (node.allocatable - used).clamp_min_zero()


async def _bind_against_recount(backend: Any, pods: list[PodRecord], target: tuple[str, str], node: str,
                                host: Any) -> None:
    """Bind, and check the room check's answer is the one a full recount of the node's room
    gives (checked only for an unbound pod the backend holds, on a ready node)."""
    pod = next((p for p in pods if (p.namespace, p.name) == target), None)
    if pod is None or pod.node is not None or host is None or not host.ready:
        with _refused_or_done():
            await backend.bind_pod(target[0], target[1], node)
        return
    fits = pod.requests.fits_in((host.allocatable - recount_used(pods).get(node, Resources())).clamp_min_zero())
    try:
        await backend.bind_pod(target[0], target[1], node)
    except BindingRejected as exc:  # the apiserver may refuse too (bound meanwhile), never for room
        assert ("no room" in exc.reason) == (not fits), exc.reason
        event("bind refused for room")
        return
    except BackendError:  # refused past the room check
        assert fits
        return
    assert fits, "bound although the recount has no room"
    event("bound where the recount has room")


class _refused_or_done:
    """A write the backend may refuse (a name taken): either answer is fine here."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        return kind is not None and issubclass(kind, BackendError)


# ------------------------------------------------------------------ the Kubernetes backend


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a watch or an answer carries it: a copy, not the server's own."""
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    return copied


class _Apiserver:
    """The pods of an apiserver in memory: it answers the backend's own pod writes and
    its list, and hands out the objects a watch would deliver."""

    def __init__(self) -> None:
        self.rv = 100
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.during_list: list[Any] = []  # called while a list is read (an own write landing)

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return obj

    def put(self, key: tuple[str, str], *, job: str | None, node: str | None, phase: str, gpus: str,
            deleting: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"namespace": key[0], "name": key[1], "labels": {LABEL_JOB: job} if job else {}}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-29T00:00:00Z"
        spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}
        if node is not None:
            spec["nodeName"] = node
        obj = self._bump({"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}})
        self.pods[key] = obj
        return _copy(obj)

    def change(self, key: tuple[str, str], **fields: Any) -> dict[str, Any] | None:
        obj = self.pods.get(key)
        if obj is None:
            return None
        if "phase" in fields:
            obj["status"]["phase"] = fields["phase"]
        if "job" in fields:
            obj["metadata"]["labels"] = {LABEL_JOB: fields["job"]} if fields["job"] else {}
        return _copy(self._bump(obj))

    @staticmethod
    def _answer(obj: dict[str, Any], status: int = 200) -> Any:
        async def answer() -> HttpAnswer:
            reply = HttpAnswer([json.dumps(obj).encode()])
            reply.status = status
            return reply
        return answer()

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any], **_: Any) -> Any:
        key = (namespace, body["metadata"]["name"])
        if key in self.pods:
            return self._answer({"kind": "Status", "reason": "AlreadyExists", "message": "exists"}, 409)
        body = _copy(body)
        body["metadata"]["namespace"] = namespace
        body.setdefault("status", {"phase": "Pending"})
        self.pods[key] = self._bump({"kind": "Pod", **body})
        return self._answer(self.pods[key])

    def read_namespaced_pod(self, name: str, namespace: str, **_: Any) -> Any:
        obj = self.pods.get((namespace, name))
        return self._answer(obj) if obj is not None else self._answer({"kind": "Status"}, 404)

    def create_namespaced_pod_binding(self, name: str, namespace: str, body: dict[str, Any], **_: Any) -> Any:
        obj = self.pods.get((namespace, name))
        node = body["target"]["name"]
        if obj is None:
            return self._answer({"kind": "Status", "message": "not found"}, 404)
        if obj["spec"].get("nodeName"):
            bound = obj["spec"]["nodeName"]
            return self._answer({"kind": "Status", "message": f'pod {name} is already assigned to node "{bound}"'},
                                409)
        obj["spec"]["nodeName"] = node
        self._bump(obj)
        return self._answer({"kind": "Status", "status": "Success"}, 201)

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> Any:
        obj = self.pods.get((namespace, name))
        if obj is None:
            return self._answer({"kind": "Status"}, 404)
        if obj["spec"].get("nodeName") and not obj["metadata"].get("deletionTimestamp") \
                and obj["status"]["phase"] not in ("Succeeded", "Failed"):
            obj["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"  # the kubelet has yet to confirm
            return self._answer(self._bump(obj))
        del self.pods[(namespace, name)]
        return self._answer(self._bump(_copy(obj)))

    def list_pod_for_all_namespaces(self, **_: Any) -> Any:
        async def answer() -> HttpAnswer:
            for land in self.during_list:
                land()
            self.during_list.clear()
            body = {"kind": "PodList", "items": list(self.pods.values()),
                    "metadata": {"resourceVersion": str(self.rv)}}
            return HttpAnswer([json.dumps(body).encode()])
        return answer()


K8S_STEPS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.sampled_from(PODS), st.sampled_from(JOBS), st.sampled_from(["0", "1", "4", "8"])),
    st.tuples(st.just("bind"), st.sampled_from(PODS), st.sampled_from(NODES), st.just("")),
    st.tuples(st.just("place"), st.sampled_from(PODS), st.tuples(st.sampled_from(JOBS), st.sampled_from(NODES)),
              st.sampled_from(["4", "8"])),
    st.tuples(st.just("delete"), st.sampled_from(PODS), st.just(None), st.just("")),
    # another scheduler's pod, seen at once or left for a later watch event ("0.5" GPU is read as none)
    st.tuples(st.sampled_from(["theirs", "theirs-unseen"]), st.sampled_from(PODS),
              st.tuples(st.sampled_from(JOBS), st.sampled_from([None, *NODES]), st.sampled_from(PHASES),
                        st.booleans()), st.sampled_from(["1", "8", "12", "0.5"])),
    st.tuples(st.sampled_from(["phase", "relabel"]), st.sampled_from(PODS),
              st.sampled_from([*PHASES, *JOBS]), st.just("")),
    st.tuples(st.sampled_from(["watch", "watch-stale"]), st.sampled_from(PODS), st.just(None), st.just("")),
    st.tuples(st.just("relist"), st.sampled_from(PODS), st.booleans(), st.just("")),
), min_size=1, max_size=30)


@SETTINGS
@given(steps=K8S_STEPS)
def test_the_kubernetes_backends_index_equals_a_recount(steps: list[tuple[Any, ...]]) -> None:
    asyncio.run(_k8s_steps(steps))


def _node(name: str, *, ready: bool = True) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "resourceVersion": "7"},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


async def _k8s_steps(steps: list[tuple[Any, ...]]) -> None:
    from kubernetes_asyncio.client import ApiClient

    from agents.k8s.backend import KubernetesBackend

    async with ApiClient() as api:
        backend = KubernetesBackend(api, "c1", owns_client=False)
        backend._ready.set()  # the caches are filled by hand here
        server = _Apiserver()
        backend._core = server  # the generated CoreV1Api (untyped), answered in memory
        backend.pods._list_fn = server.list_pod_for_all_namespaces
        for name in NODES:
            backend.nodes.upsert(_node(name, ready=name != "n02"))
        history: dict[tuple[str, str], list[dict[str, Any]]] = {}  # every version the server had, for stale events
        for kind, target, arg, amount in steps:
            pods = list(backend.pods.records())
            if kind == "create":
                labels = {LABEL_JOB: arg} if arg is not None else {}
                with _refused_or_done():
                    await backend.create_pod(PodManifest(name=target[1], namespace=target[0], labels=labels,
                                                         requests=gpu(int(amount))))
            elif kind == "bind":
                await _bind_against_recount(backend, pods, target, arg, backend.nodes.get(("", arg)))
            elif kind == "place":
                job, node = arg
                with _refused_or_done():
                    await backend.create_pod(PodManifest(name=target[1], namespace=target[0],
                                                         labels={LABEL_JOB: job} if job else {},
                                                         requests=gpu(int(amount))))
                await _bind_against_recount(backend, list(backend.pods.records()), target, node,
                                            backend.nodes.get(("", node)))
            elif kind == "delete":
                with _refused_or_done():
                    await backend.delete_pod(*target)
            elif kind in ("theirs", "theirs-unseen"):
                job, node, phase, deleting = arg
                obj = server.put(target, job=job, node=node, phase=phase, gpus=amount, deleting=deleting)
                if kind == "theirs":
                    backend.pods._apply("ADDED", obj)  # the watch's own entry point
            elif kind in ("phase", "relabel"):
                fields = {"phase": arg} if kind == "phase" and arg in PHASES else {"job": arg if arg in JOBS else None}
                server.change(target, **fields)  # delivered by a later watch step or relist
            elif kind in ("watch", "watch-stale"):
                versions = history.get(target, [])
                current = server.pods.get(target)
                if kind == "watch-stale" and versions:
                    backend.pods._apply("MODIFIED", versions[0])
                elif current is not None:
                    backend.pods._apply("MODIFIED", _copy(current))
                else:
                    meta = {"namespace": target[0], "name": target[1], "resourceVersion": str(server.rv)}
                    backend.pods._apply("DELETED", {"kind": "Pod", "metadata": meta})
            else:  # relist; with ``arg``, an own write lands in the old cache while the list is read
                if arg:
                    def land(key: tuple[str, str] = target) -> None:
                        obj = server.put(key, job="a", node="n00", phase="Running", gpus="4", deleting=False)
                        with backend._landing(*key):
                            backend.pods.upsert(obj)
                    server.during_list.append(land)
                await backend.pods.relist()
            for key, obj in server.pods.items():
                history.setdefault(key, []).append(_copy(obj))
            after = list(backend.pods.records())
            assert_index_is_recount(backend.pod_index, after)
            for job in ("a", "b", "c"):
                assert await backend.list_pods({LABEL_JOB: job}) == recount_job(after, job)
                assert await backend.list_pods({LABEL_JOB: job, "other": "x"}) == []  # not one job's: a scan


@pytest.mark.parametrize("relist", [False, True])
async def test_an_item_the_cache_keeps_as_an_error_is_not_indexed(relist: bool) -> None:
    """An item the informer keeps as its error is not among ``records``, so not in the
    count; read again as a record, it counts again. (Pods are read leniently and never
    become errors; the informer's rule holds for any kind.)"""
    from agents.k8s.convert import pod_record
    from agents.k8s.informer import Informer
    from federation.domain.errors import InvalidInput

    def convert(obj: Mapping[str, Any]) -> PodRecord:
        if obj["metadata"]["labels"].get(LABEL_JOB) == "unreadable":
            raise InvalidInput("metadata.labels", "unreadable here")
        return pod_record(obj)

    server = _Apiserver()
    index = PodIndex()
    informer = Informer("pods", server.list_pod_for_all_namespaces, convert, lambda *_: None, index=index)
    for job, held in (("a", gpu(4, cpu=0)), ("unreadable", Resources()), ("a", gpu(4, cpu=0))):
        obj = server.put(("d", "p"), job=job, node="n00", phase="Running", gpus="4", deleting=False)
        if relist:
            await informer.relist()
        else:
            informer._apply("MODIFIED", obj)
        assert index.used("n00") == held
        assert len(informer.errors()) == (1 if job == "unreadable" else 0)
        assert [p.name for p in index.job_pods("a")] == ([] if job == "unreadable" else ["p"])


async def test_the_kubernetes_backend_refuses_a_bind_for_room_as_a_recount_would() -> None:
    """Others' pods seen by the watch, a terminating pod (still holds its room) and a pod
    that ended (holds none): each bind's answer follows the node's room."""
    from kubernetes_asyncio.client import ApiClient

    from agents.k8s.backend import KubernetesBackend

    async with ApiClient() as api:
        backend = KubernetesBackend(api, "c1", owns_client=False)
        backend._ready.set()  # the caches are filled by hand here
        server = _Apiserver()
        backend._core = server  # the generated CoreV1Api (untyped), answered in memory
        backend.nodes.upsert(_node("n00"))
        backend.pods._apply("ADDED", server.put(("other", "t"), job=None, node="n00", phase="Running", gpus="4",
                                                 deleting=False))
        await backend.create_pod(PodManifest(name="p", namespace="d", labels={LABEL_JOB: "a"}, requests=gpu(4)))
        await backend.bind_pod("d", "p", "n00")  # 4 + 4 of 8
        await backend.create_pod(PodManifest(name="q", namespace="d", labels={LABEL_JOB: "a"}, requests=gpu(1)))
        with pytest.raises(BindingRejected, match="no room"):
            await backend.bind_pod("d", "q", "n00")
        await backend.delete_pod("d", "p")  # terminating: the kubelet has yet to confirm
        terminating = backend.pods.get(("d", "p"))
        assert terminating is not None and terminating.deleting
        with pytest.raises(BindingRejected, match="no room"):
            await backend.bind_pod("d", "q", "n00")
        backend.pods._apply("MODIFIED", server.change(("other", "t"), phase="Failed") or {})  # ended: room back
        await backend.bind_pod("d", "q", "n00")
        assert [p.name for p in await backend.list_pods({LABEL_JOB: "a"})] == ["p", "q"]
        assert backend.pod_index.used("n00") == gpu(5, cpu=16000)  # p (terminating) and q


async def test_the_fake_refuses_a_bind_for_room_as_a_recount_would() -> None:
    cluster = fake(fabric()[:1])
    cluster.occupy("t", "n00", gpu(4, cpu=0))
    await cluster.create_pod(PodManifest(name="p", namespace="default", labels={LABEL_JOB: "a"}, requests=gpu(4)))
    await cluster.bind_pod("default", "p", "n00")
    await cluster.create_pod(PodManifest(name="q", namespace="default", labels={LABEL_JOB: "a"}, requests=gpu(1)))
    with pytest.raises(BindingRejected, match="no room"):
        await cluster.bind_pod("default", "q", "n00")
    cluster.fail_pod("t", namespace="other")  # ended: its room comes back
    await cluster.bind_pod("default", "q", "n00")
    assert cluster.free("n00").gpus == 3 and [p.name for p in cluster.pods({LABEL_JOB: "a"})] == ["p", "q"]
