"""Helpers and fixtures for the agent's end-to-end tests on real kube-apiservers.

Imported by ``tests/e2e/test_agent_*.py`` (``from fixtures_federation import *`` style
imports of the names they need); the session control plane itself is ``conftest.py``'s
``control_plane`` fixture (clusters ``east`` and ``west``, three 8-GPU kwok nodes each).

- ``backend_for(control_plane, cluster)``: a ``KubernetesBackend`` on its own ApiClient.
- ``gpu_job`` / ``work_for``: domain Jobs and Works as central would send them; pods
  tolerate kwok's fake-node taint.
- ``WorkDriver``: drives one Work with the agent's per-job loop
  (``agents.core.controller.JobController``) on watch events, as the runtime does, so the
  adapter and the core are tested on a real cluster independently of the central service.
- ``hypernodes(...)`` / ``cleanup(...)``: a HyperNode tree per test, and removal of
  everything a test created (tests share the session clusters).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from agents.core.controller import JobController, PassReport
from agents.core.plugins import ssh_secret_name
from agents.core.records import LABEL_JOB, PodRecord
from agents.k8s.backend import KubernetesBackend
from federation.domain.jobs import Job, LifecyclePolicy, Task
from federation.domain.nodes import Toleration
from federation.domain.plans import Placement, PodAssignment
from federation.domain.resources import Resources
from federation.domain.works import Work

T = TypeVar("T")

KWOK_TOLERATION = Toleration(key="kwok.x-k8s.io/node", operator="Exists", effect="NoSchedule")
POD_FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
HN = ("topology.volcano.sh", "v1alpha1", "hypernodes")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def backend_for(control_plane: Any, cluster: str, **kw: Any) -> KubernetesBackend:
    backend = await KubernetesBackend.from_kubeconfig(str(control_plane.kubeconfig(cluster)), cluster, **kw)
    await backend.start()
    return backend


def gpu_job(
    name: str,
    tasks: Sequence[tuple[str, int, int]] = (("worker", 3, 4),),
    *,
    policies: Sequence[LifecyclePolicy] = (),
    task_policies: dict[str, tuple[LifecyclePolicy, ...]] | None = None,
    max_retry: int = 3,
    min_available: int | None = None,
    plugins: Sequence[tuple[str, tuple[str, ...]]] = (("env", ()), ("svc", ())),
) -> Job:
    """``tasks`` = (name, replicas, GPUs per pod)."""
    tp = task_policies or {}
    return Job(
        name=name, queue="default",
        tasks=tuple(Task(t, r, Resources.of(gpu=g, cpu=1000), policies=tp.get(t, ())) for t, r, g in tasks),
        min_available=min_available, policies=tuple(policies), plugins=tuple(plugins), max_retry=max_retry,
        tolerations=(KWOK_TOLERATION,),
    )


def work_for(job: Job, cluster: str, hypernode: str, *, version: int = 1, tier: int = 1,
             pods: Sequence[tuple[str, int, str]] = (), cancelled: bool = False) -> Work:
    placement = Placement(job.name, cluster, hypernode, tier, tuple(PodAssignment(t, i, n) for t, i, n in pods))
    return Work(f"{job.name}-w", job, version, placement, cancelled)


async def eventually(what: str, check: Callable[[], Awaitable[T]], timeout: float = 30.0,
                     interval: float = 0.2) -> T:
    """Await ``check()`` until it returns something truthy; fail with the last value."""
    deadline = time.monotonic() + timeout
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        await asyncio.sleep(interval)


class WorkDriver:
    """One Work's control loop on a backend: a pass on start, on every watch event
    (debounced), when a delayed action falls due, and every ``resync`` seconds."""

    def __init__(self, backend: Any, work: Work, *, debounce: float = 0.05, resync: float = 2.0,
                 label_keys: Sequence[str] = ()) -> None:
        self.backend = backend
        self.controller = JobController(work, label_keys=label_keys)
        self.debounce = debounce
        self.resync = resync
        self.reports: list[PassReport] = []
        self.errors: list[str] = []
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None

    @property
    def last(self) -> PassReport | None:
        return self.reports[-1] if self.reports else None

    def update(self, work: Work) -> None:
        self.controller.update(work)
        self._kick.set()

    def start(self) -> WorkDriver:
        self._task = asyncio.create_task(self._loop())
        self._watch_task = asyncio.create_task(self._watch())
        return self

    async def stop(self) -> None:
        for task in (self._task, self._watch_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _watch(self) -> None:
        async for _ in self.backend.watch():
            self._kick.set()

    async def _loop(self) -> None:
        while True:
            try:
                report = await self.controller.sync(self.backend, time.time(), None)
            except Exception as exc:  # a read failed: note it and retry on the next trigger
                self.errors.append(f"{type(exc).__name__}: {exc}")
                report = None
            if report is not None:
                self.reports.append(report)
                if report.error:
                    self.errors.append(report.error)
            timeout = self.resync
            if report is not None and report.wake_at is not None:
                timeout = max(0.0, min(timeout, report.wake_at - time.time()))
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for(event.wait()) swallows a
            # cancellation that arrives as the event is set (stop() would hang).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._kick.wait()
            await asyncio.sleep(self.debounce)
            self._kick.clear()


async def job_pods(backend: KubernetesBackend, job: str) -> list[PodRecord]:
    return await backend.list_pods({LABEL_JOB: job})


def hypernode(name: str, tier: int, *, nodes: Iterable[str] = (), children: Iterable[str] = (),
              tier_name: str = "") -> dict[str, Any]:
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {"metadata": {"name": name}, "spec": spec}


async def delete_hypernodes(api: Any, names: Iterable[str]) -> None:
    from kubernetes_asyncio import client

    custom = client.CustomObjectsApi(api)
    for name in names:
        with contextlib.suppress(Exception):
            await custom.delete_cluster_custom_object(*HN, name)


async def cleanup(backend: KubernetesBackend, job: str, timeout: float = 30.0) -> None:
    """Delete everything labelled with ``job`` and wait until it is gone."""
    selector = {LABEL_JOB: job}
    for pod in await backend.list_pods(selector):
        with contextlib.suppress(Exception):
            await backend.delete_pod(pod.namespace, pod.name)
    for svc in await backend.list_services(selector):
        await backend.delete_service(svc.namespace, svc.name)
    for cm in await backend.list_config_maps(selector):
        await backend.delete_config_map(cm.namespace, cm.name)
    for policy in await backend.list_network_policies(selector):
        await backend.delete_network_policy(policy.namespace, policy.name)
    await backend.delete_secret("default", ssh_secret_name(job))

    async def gone() -> bool:
        return not (await backend.list_pods(selector) or await backend.list_services(selector)
                    or await backend.list_config_maps(selector) or await backend.list_network_policies(selector))

    await eventually(f"{job} cleaned up", gone, timeout)


async def pod_uids(api: Any, job: str, *, running: bool = False) -> dict[str, str]:
    """The job's pods not being deleted (``running``: only Running ones), name -> uid,
    read straight from the apiserver: a recreated pod has a new uid."""
    from kubernetes_asyncio import client

    pods = await client.CoreV1Api(api).list_namespaced_pod("default", label_selector=f"{LABEL_JOB}={job}")
    return {p.metadata.name: p.metadata.uid for p in pods.items
            if p.metadata.deletion_timestamp is None and (not running or p.status.phase == "Running")}


async def label_pod(api: Any, namespace: str, name: str, labels: dict[str, str]) -> None:
    """Merge-patch labels onto a pod (the content type must be given explicitly)."""
    from kubernetes_asyncio import client

    await client.CoreV1Api(api).patch_namespaced_pod(
        name, namespace, {"metadata": {"labels": labels}},
        _content_type="application/merge-patch+json")  # type: ignore[call-arg]  # kubernetes_asyncio's generated signatures omit the **kwargs it accepts (_content_type)


class Tree:
    """A two-tier HyperNode tree over the fixture's three GPU nodes of one cluster, with
    unique names: ``leaf_a`` = nodes 0 and 1, ``leaf_b`` = node 2, ``spine`` = both."""

    def __init__(self, control_plane: Any, cluster: str) -> None:
        self.control_plane = control_plane
        self.cluster = cluster
        tag = uuid.uuid4().hex[:5]
        self.nodes = [f"{cluster}-gpu-{i}" for i in range(3)]
        self.leaf_a, self.leaf_b, self.spine = f"leaf-a-{tag}", f"leaf-b-{tag}", f"spine-{tag}"
        self.members = {self.leaf_a: set(self.nodes[:2]), self.leaf_b: {self.nodes[2]},
                        self.spine: set(self.nodes)}

    def __enter__(self) -> Tree:
        self.control_plane.apply_hypernodes(self.cluster, [
            hypernode(self.leaf_a, 1, nodes=self.nodes[:2], tier_name="leaf"),
            hypernode(self.leaf_b, 1, nodes=self.nodes[2:], tier_name="leaf"),
            hypernode(self.spine, 2, children=[self.leaf_a, self.leaf_b], tier_name="spine"),
        ])
        return self

    async def observed_by(self, backend: KubernetesBackend) -> None:
        """Wait until ``backend`` has seen all three HyperNodes: a pass that runs between
        their watch events sees part of the tree, and a Work planned into a HyperNode it
        has not seen yet is reported Replan."""
        async def seen() -> bool:
            return {self.leaf_a, self.leaf_b, self.spine} <= {h.name for h in await backend.list_hypernodes()}

        await eventually(f"HyperNodes of {self.spine} observed", seen)

    def __exit__(self, *exc: object) -> None:
        for name in (self.spine, self.leaf_a, self.leaf_b):
            with contextlib.suppress(Exception):
                self.control_plane.request(
                    self.cluster, "DELETE", f"/apis/{HN[0]}/{HN[1]}/{HN[2]}/{name}")
