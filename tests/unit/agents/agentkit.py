"""Builders shared by the agent unit tests (a helper module, not a test file)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agents.core.apply import apply_ops, observe_job
from agents.core.plugins import secret_refs
from agents.core.reconcile import Observed, Reconciliation, reconcile
from agents.core.records import NodeRecord
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from federation.domain.jobs import Job, LifecyclePolicy, Task
from federation.domain.plans import Placement, PodAssignment
from federation.domain.resources import Resources
from federation.domain.works import Work

SPINE, LEAF = "topology/spine", "topology/leaf"
LABEL_KEYS = (SPINE, LEAF)


def gpu(n: int, cpu: int = 8000) -> Resources:
    return Resources.of(gpu=n, cpu=cpu)


def node(name: str, gpus: int = 8, leaf: str | None = None, spine: str | None = None, *,
         ready: bool = True) -> NodeRecord:
    labels = {}
    if leaf is not None:
        labels[LEAF] = leaf
    if spine is not None:
        labels[SPINE] = spine
    return NodeRecord(name, Resources.of(gpu=gpus, cpu=64000), labels=labels, ready=ready)


def fabric(nodes_per_leaf: int = 2, gpus: int = 8) -> list[NodeRecord]:
    """Two spines (s0, s1), each with two leaves (l0,l1 / l2,l3), ``nodes_per_leaf`` nodes each:
    n0,n1 under l0, n2,n3 under l1, … (names zero-padded for stable sorting past 10)."""
    out = []
    i = 0
    for leaf in range(4):
        for _ in range(nodes_per_leaf):
            out.append(node(f"n{i:02d}", gpus, f"l{leaf}", f"s{leaf // 2}"))
            i += 1
    return out


def job(name: str = "train", tasks: Sequence[tuple[str, int, int]] = (("worker", 2, 8),), *,
        min_available: int | None = None, policies: Sequence[LifecyclePolicy] = (),
        plugins: Sequence[tuple[str, tuple[str, ...]]] = (), max_retry: int = 3,
        task_policies: dict[str, tuple[LifecyclePolicy, ...]] | None = None,
        task_max_retry: dict[str, int] | None = None, task_min: dict[str, int] | None = None) -> Job:
    tp = task_policies or {}
    tm = task_max_retry or {}
    tmin = task_min or {}
    return Job(
        name=name, queue="default",
        tasks=tuple(Task(t, r, gpu(g), policies=tp.get(t, ()), max_retry=tm.get(t), min_available=tmin.get(t))
                    for t, r, g in tasks),
        min_available=min_available, policies=tuple(policies), plugins=tuple(plugins), max_retry=max_retry,
    )


def work(j: Job, hypernode: str = "t1-l0", pods: Sequence[tuple[str, int, str]] = (), *, version: int = 1,
         cancelled: bool = False, tier: int = 1) -> Work:
    placement = Placement(j.name, "c1", hypernode, tier, tuple(PodAssignment(t, i, n) for t, i, n in pods))
    return Work(f"w-{j.name}", j, version, placement, cancelled)


def fake(nodes: Sequence[NodeRecord] | None = None, clock: ManualClock | None = None,
         runtime: float | None = None) -> FakeCluster:
    return FakeCluster("c1", fabric() if nodes is None else nodes, clock=clock or ManualClock(),
                       runtime=(lambda _m: runtime))


async def observe(cluster: FakeCluster, w: Work) -> Observed:
    return await observe_job(cluster, w.name, tree=None, label_keys=LABEL_KEYS, secrets=secret_refs(w.job))


async def step(cluster: FakeCluster, w: Work, **kw: object) -> Reconciliation:
    """One reconcile pass applied to the fake; asserts the cluster accepted every op."""
    result = reconcile(w, await observe(cluster, w), **kw)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor
    applied = await apply_ops(cluster, result.ops)
    assert applied.ok, applied.error
    return result


class HttpAnswer:
    """What ``agents.k8s.api`` reads of an aiohttp response: a 200 whose body arrives in
    ``chunks`` (a list page is one chunk; a watch stream as many as given)."""

    status = 200

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.content = self

    async def read(self) -> bytes:
        return b"".join(self.chunks)

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    def release(self) -> None:
        return None

    def close(self) -> None:
        return None
