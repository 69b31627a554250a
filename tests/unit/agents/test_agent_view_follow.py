"""The shared view follows this agent's own pod writes without a full build
(agents/core/view.py ``follow_own_writes``, agents/own_writes.py), and gives exactly what a
full build would: the same free room on every node, the same pods of every job, in the
same order. Anything that is not an own write (another scheduler's pod, a pod status
change, a node or HyperNode change) still rebuilds it.

Property tests (hypothesis): random sequences of own creates, binds and deletes and of
others' changes on the fake cluster, the kept view compared with a fresh full build after
every step; the pure step over random pods (terminating, terminal, over-committed nodes,
unbound, relabelled); and the Kubernetes backend's own writes through its cache.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentkit import LABEL_KEYS, HttpAnswer, fabric, fake, gpu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.core.records import LABEL_JOB, NodeRecord, PodManifest, PodRecord
from agents.core.view import ClusterViews, build_view, follow_own_writes, read_view
from agents.own_writes import OwnPodWrites, PodChange
from federation.domain.errors import InvalidInput
from federation.domain.resources import Resources
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NODES = [n.name for n in fabric()]  # n00..n07, 8 GPUs each
PODS = [("default", "p0"), ("default", "p1"), ("default", "p2"), ("team", "p0"), ("team", "p3")]
JOBS = ["a", "b", None]  # None: a pod without the job label (no job's)

OWN = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(PODS), st.sampled_from(JOBS), st.sampled_from([0, 1, 4, 8])),
    st.tuples(st.just("bind"), st.sampled_from(PODS), st.sampled_from(NODES), st.just(0)),
    st.tuples(st.just("delete"), st.sampled_from(PODS), st.just(None), st.just(0)),
)
OTHERS = st.one_of(
    # 12 GPUs on an 8-GPU node: over-committed, so free is clamped at zero
    st.tuples(st.just("occupy"), st.sampled_from(NODES), st.just(None), st.sampled_from([1, 8, 12])),
    st.tuples(st.just("fail"), st.sampled_from(PODS), st.just(None), st.just(0)),
    st.tuples(st.just("succeed"), st.sampled_from(PODS), st.just(None), st.just(0)),
    st.tuples(st.just("restart"), st.sampled_from(PODS), st.just(None), st.just(0)),
    st.tuples(st.just("not-ready"), st.sampled_from(NODES), st.just(None), st.just(0)),
    st.tuples(st.just("remove-node"), st.sampled_from(NODES), st.just(None), st.just(0)),
    st.tuples(st.just("hypernodes"), st.sampled_from(NODES), st.just(None), st.just(0)),
)
STEPS = st.lists(st.tuples(st.one_of(OWN, OTHERS), st.booleans()), min_size=1, max_size=25)


async def _own(cluster: Any, kind: str, pod: tuple[str, str], arg: Any, gpus: int) -> None:
    """One of the agent's own pod writes; a refusal is a write too (it moves ``writes``)."""
    from agents.backend import BackendError

    namespace, name = pod
    try:
        if kind == "create":
            labels = {LABEL_JOB: arg} if arg is not None else {}
            await cluster.create_pod(PodManifest(name=name, namespace=namespace, labels=labels, requests=gpu(gpus)))
        elif kind == "bind":
            await cluster.bind_pod(namespace, name, arg)
        else:
            await cluster.delete_pod(namespace, name)
    except BackendError:
        pass


def _others(cluster: Any, kind: str, target: Any, gpus: int, step: int) -> None:
    """A change this agent did not make (a watch event would report it)."""
    if kind == "occupy":
        if cluster.node(target) is not None:
            cluster.occupy(f"theirs-{step}", target, gpu(gpus))
    elif kind in ("fail", "succeed", "restart"):
        record = cluster.pod(target[1], target[0])
        if record is None or record.node is None or (record.terminal and kind != "restart"):
            return
        {"fail": cluster.fail_pod, "succeed": cluster.succeed_pod, "restart": cluster.restart_container}[kind](
            target[1], namespace=target[0])
    elif kind == "not-ready":
        if cluster.node(target) is not None:
            cluster.set_node_ready(target, False)
    elif kind == "remove-node":
        if cluster.node(target) is not None:
            cluster.remove_node(target)
    else:  # a HyperNode holding one node, or none: the tree changes, never the room
        cluster.set_hypernodes([HyperNodeSpec(f"extra-{step}", 1, (
            HyperNodeMember("Node", MemberSelector(exact_name=target)),))] if step % 2 else [])


@SETTINGS
@given(steps=STEPS)
def test_the_kept_view_is_always_what_a_full_build_gives(steps: list[tuple[tuple[Any, ...], bool]]) -> None:
    asyncio.run(_kept_against_fresh(steps))


async def _kept_against_fresh(steps: list[tuple[tuple[Any, ...], bool]]) -> None:
    cluster = fake()
    views = ClusterViews()
    await views.get(cluster, LABEL_KEYS)
    seen, others = cluster.revision, False  # others: a change not ours since the last read
    for i, ((kind, target, arg, amount), look) in enumerate(steps):
        if kind in ("create", "bind", "delete"):
            await _own(cluster, kind, target, arg, amount)
        else:
            revision = cluster.revision
            _others(cluster, kind, target, amount, i)
            others = others or cluster.revision != revision
        if not look and i < len(steps) - 1:
            continue  # several writes (and others' changes) between two reads of the view
        builds, followed = views.builds, views.followed
        kept = await views.get(cluster, LABEL_KEYS)
        fresh = await read_view(cluster, LABEL_KEYS)
        assert kept == fresh
        assert kept.nodes == fresh.nodes and kept.pods_by_job == fresh.pods_by_job  # spelled out for the reader
        # Own writes alone are followed, never rebuilt; anything else is always rebuilt.
        assert views.builds == builds + (1 if others else 0)
        assert views.followed == followed + (1 if cluster.revision != seen and not others else 0)
        seen, others = cluster.revision, False


async def test_own_writes_in_a_pass_are_followed_not_rebuilt() -> None:
    cluster = fake()
    views = ClusterViews()
    first = await views.get(cluster, LABEL_KEYS)
    await cluster.create_pod(PodManifest(name="p", namespace="default", labels={LABEL_JOB: "a"}, requests=gpu(8)))
    await cluster.bind_pod("default", "p", "n00")
    kept = await views.get(cluster, LABEL_KEYS)
    assert (views.builds, views.followed) == (1, 1)
    assert kept.revision == cluster.revision > first.revision
    assert next(n for n in kept.nodes if n.name == "n00").free.gpus == 0
    assert [p.node for p in kept.job_pods("a")] == ["n00"]
    assert kept == await read_view(cluster, LABEL_KEYS)
    cluster.occupy("theirs", "n01", gpu(8))  # another scheduler: a full build
    await cluster.delete_pod("default", "p")
    again = await views.get(cluster, LABEL_KEYS)
    assert (views.builds, views.followed) == (2, 1)
    assert next(n for n in again.nodes if n.name == "n00").free.gpus == 8
    assert next(n for n in again.nodes if n.name == "n01").free.gpus == 0


async def test_a_deleted_terminal_pod_gives_no_room_back() -> None:
    cluster = fake()
    views = ClusterViews()
    cluster.occupy("theirs", "n00", gpu(8))
    await cluster.create_pod(PodManifest(name="p", namespace="default", labels={LABEL_JOB: "a"}, requests=gpu(4)))
    await cluster.bind_pod("default", "p", "n01")
    cluster.fail_pod("p")  # terminal: it holds no room, so deleting it gives none back
    before = await views.get(cluster, LABEL_KEYS)
    assert next(n for n in before.nodes if n.name == "n01").free.gpus == 8
    await cluster.delete_pod("default", "p")
    after = await views.get(cluster, LABEL_KEYS)
    assert views.followed == 1 and after == await read_view(cluster, LABEL_KEYS)
    assert next(n for n in after.nodes if n.name == "n01").free.gpus == 8 and after.job_pods("a") == ()


# ------------------------------------------------------------------ the pure step

POD_RECORDS = st.builds(
    lambda key, job, node, phase, gpus, deleting: PodRecord(
        name=key[1], namespace=key[0], labels={LABEL_JOB: job} if job is not None else {}, node=node, phase=phase,
        requests=Resources.of(gpu=gpus, cpu=gpus * 1000) if gpus >= 0 else Resources(), deleting=deleting),
    st.sampled_from(PODS), st.sampled_from(JOBS), st.sampled_from([None, "n00", "n01", "n02", "gone"]),
    st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]), st.sampled_from([-1, 0, 2, 8, 12]),
    st.booleans())
CHANGES = st.lists(st.tuples(st.sampled_from(PODS), st.one_of(st.none(), POD_RECORDS)), max_size=12)
SPECS = st.sampled_from(["tree", "invalid", "unreadable"])


def _specs(kind: str) -> list[HyperNodeSpec] | InvalidInput:
    if kind == "unreadable":
        return InvalidInput("hyperNodes", "unreadable")
    member = HyperNodeMember("Node", MemberSelector(exact_name="n00"))
    if kind == "invalid":  # a name clash with a discovered HyperNode: no snapshot, the room still counts
        return [HyperNodeSpec("t1-l0", 1, (member,))]
    return [HyperNodeSpec("extra", 1, (member,))]


@SETTINGS
@given(start=st.lists(POD_RECORDS, max_size=6, unique_by=lambda p: (p.namespace, p.name)), changes=CHANGES,
       specs=SPECS)
def test_following_own_changes_equals_a_full_build(start: list[PodRecord], changes: list[tuple[Any, Any]],
                                                   specs: str) -> None:
    nodes: list[NodeRecord] = fabric()[:3]  # n00..n02 (8 GPUs); "gone" is no node
    held = {(p.namespace, p.name): p for p in start}
    log: list[PodChange] = []
    for i, (key, record) in enumerate(changes):
        after = None if record is None else PodRecord(**{**vars(record), "namespace": key[0], "name": key[1]})
        log.append(PodChange(i, i + 1, held.get(key), after))
        if after is None:
            held.pop(key, None)
        else:
            held[key] = after
    base = build_view("c1", 0, nodes, start, _specs(specs), LABEL_KEYS)
    followed = follow_own_writes(base, len(log), log)
    fresh = build_view("c1", len(log), nodes, list(held.values()), _specs(specs), LABEL_KEYS)
    assert followed == fresh
    assert (followed.snapshot is None) == (specs == "invalid")


def test_the_log_gives_a_chain_only_when_own_writes_alone_moved_the_revision() -> None:
    log = OwnPodWrites(kept=3)
    revision = 0
    pod = PodRecord("p", "default")

    def write(moves: int) -> None:
        nonlocal revision
        with log.landing(lambda: revision, lambda: pod):
            revision += moves

    write(1)
    write(1)
    assert [(c.since, c.until) for c in log.between(0, 2) or ()] == [(0, 1), (1, 2)]
    assert log.between(2, 2) == ()
    revision += 1  # a watch event
    write(1)
    assert log.between(0, 4) is None and log.between(1, 4) is None
    assert [(c.since, c.until) for c in log.between(3, 4) or ()] == [(3, 4)]
    write(0)  # a refused write: nothing landed, nothing recorded
    write(1)
    write(1)
    assert [(c.since, c.until) for c in log.between(3, 6) or ()] == [(3, 4), (4, 5), (5, 6)]
    write(1)
    assert log.between(3, 7) is None  # no longer remembered that far back (3 kept)
    assert [(c.since, c.until) for c in log.between(4, 6) or ()] == [(4, 5), (5, 6)]  # up to a revision passed


# ------------------------------------------------------------------ the Kubernetes backend


class _CoreApi:
    """The generated CoreV1Api calls the backend's pod writes make, answered from here."""

    def __init__(self) -> None:
        self.rv = 100

    def _answer(self, obj: dict[str, Any]) -> Any:
        async def answer() -> HttpAnswer:
            return HttpAnswer([json.dumps(obj).encode()])
        return answer()

    def _pod(self, namespace: str, name: str, *, node: str | None = None, deleting: bool = False) -> dict[str, Any]:
        self.rv += 1
        meta: dict[str, Any] = {"namespace": namespace, "name": name, "resourceVersion": str(self.rv),
                                "labels": {LABEL_JOB: "a"}}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-29T00:00:00Z"
        spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}
        if node is not None:
            spec["nodeName"] = node
        return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any], **_: Any) -> Any:
        return self._answer(self._pod(namespace, body["metadata"]["name"]))

    def create_namespaced_pod_binding(self, name: str, namespace: str, body: dict[str, Any], **_: Any) -> Any:
        return self._answer({})

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> Any:
        return self._answer(self._pod(namespace, name, node="n0", deleting=True))  # terminating: still there


async def test_the_kubernetes_backend_records_its_own_pod_writes_as_they_land() -> None:
    from kubernetes_asyncio.client import ApiClient

    from agents.k8s.backend import KubernetesBackend

    async with ApiClient() as api:
        backend = KubernetesBackend(api, "c1", owns_client=False)
        backend._ready.set()  # the caches are filled by hand here
        backend._core = _CoreApi()
        backend.nodes.upsert({"kind": "Node", "metadata": {"name": "n0", "resourceVersion": "7"},
                              "status": {"allocatable": {"nvidia.com/gpu": "8"},
                                         "conditions": [{"type": "Ready", "status": "True"}]}})
        views = ClusterViews()

        async def kept_is_fresh() -> int:
            kept = await views.get(backend, ())
            assert kept == await read_view(backend, ())
            return next(n for n in kept.nodes if n.name == "n0").free.gpus

        assert await kept_is_fresh() == 8
        start = backend.revision
        await backend.create_pod(PodManifest(name="p", namespace="d", labels={LABEL_JOB: "a"}, requests=gpu(4)))
        assert await kept_is_fresh() == 8 and views.followed == 1
        await backend.bind_pod("d", "p", "n0")
        assert await kept_is_fresh() == 4 and views.followed == 2
        await backend.delete_pod("d", "p")  # terminating: holds its room until the watch says it is gone
        assert await kept_is_fresh() == 4 and views.followed == 3
        changes = backend.own_pod_writes(start, backend.revision)
        assert changes is not None and [(c.before is None, c.after.node, c.after.deleting)
                                        for c in changes if c.after is not None] == [
            (True, None, False), (False, "n0", False), (False, "n0", True)]
        assert backend.own_pod_writes(start - 1, backend.revision) is None  # the node: not an own write
        assert views.builds == 1
        backend.pods._apply("DELETED", {"metadata": {"namespace": "d", "name": "p", "resourceVersion": "999"}})
        assert await kept_is_fresh() == 8 and views.builds == 2  # a watch event: rebuilt
