"""A Work realised on a real cluster by the agent's loop (agents/core/controller.py over
KubernetesBackend): the gang bound inside the chosen HyperNode, Running through kwok,
fine-grained restarts, maxRetry, a crash mid-binding, and cancellation."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import (
    POD_FAIL_LABEL,
    Tree,
    WorkDriver,
    backend_for,
    cleanup,
    eventually,
    gpu_job,
    label_pod,
    pod_uids,
    unique,
    work_for,
)
from kubernetes_asyncio.client import ApiClient

from agents.core.records import LABEL_JOB, PodRecord
from agents.k8s.backend import KubernetesBackend
from federation.domain.jobs import LifecyclePolicy

pytestmark = pytest.mark.e2e
P = LifecyclePolicy




async def running(backend: KubernetesBackend, job: str, count: int) -> list[PodRecord]:
    pods = [p for p in await backend.list_pods({LABEL_JOB: job}) if not p.deleting]
    if len(pods) == count and all(p.phase == "Running" and p.node for p in pods):
        return pods
    return []


async def test_gang_is_bound_inside_the_hypernode_and_runs(control_plane: ControlPlane) -> None:
    backend = await backend_for(control_plane, "east")
    job = gpu_job(unique("gang"), (("master", 1, 2), ("worker", 2, 4)), plugins=(
        ("env", ()), ("svc", ()), ("pytorch", ("--master=master", "--worker=worker", "--port=23456"))))
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_for(job, "east", tree.leaf_a)).start()
        try:
            pods = await eventually("gang Running", lambda: running(backend, job.name, 3))
            assert {p.node for p in pods} <= tree.members[tree.leaf_a]

            async def reported_running() -> bool:
                # The agent's pass that sees the pods Running may trail the apiserver's watch.
                return driver.last is not None and driver.last.phase == "Running"

            await eventually("the agent reports Running", reported_running)
            assert [s.name for s in await backend.list_services({LABEL_JOB: job.name})] == [job.name]
            [hosts] = await backend.list_config_maps({LABEL_JOB: job.name})
            assert hosts.data["worker.host"].splitlines() == [f"{job.name}-worker-{i}.{job.name}" for i in range(2)]
            raw = control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods/{job.name}-worker-1")
            env = {e["name"]: e["value"] for e in raw["spec"]["containers"][0]["env"]}
            assert env["RANK"] == "2" and env["WORLD_SIZE"] == "3" and env["VC_TASK_INDEX"] == "1"
            assert env["MASTER_ADDR"] == f"{job.name}-master-0.{job.name}"
            assert raw["spec"]["schedulerName"] == "federation-scheduler" and raw["spec"]["subdomain"] == job.name
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def _fail(control_plane: Any, kube: Any, pod: str) -> None:
    await label_pod(kube, "default", pod, {POD_FAIL_LABEL: "true"})


async def test_restart_pod_replaces_only_the_failed_pod(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    backend = await backend_for(control_plane, "east")
    job = gpu_job(unique("rpod"), (("worker", 3, 2),), policies=(P("RestartPod", events=("PodFailed",)),))
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_for(job, "east", tree.leaf_a)).start()
        try:
            await eventually("gang Running", lambda: running(backend, job.name, 3))
            before = await pod_uids(kube_clients["east"], job.name)
            victim = f"{job.name}-worker-1"
            await _fail(control_plane, kube_clients["east"], victim)

            async def replaced() -> dict[str, str]:
                now = await pod_uids(kube_clients["east"], job.name)
                ok = len(now) == 3 and now[victim] != before[victim] and await running(backend, job.name, 3)
                return now if ok else {}

            after = await eventually("the failed pod replaced and Running", replaced, 45)
            assert {n: u for n, u in after.items() if n != victim} == {n: u for n, u in before.items() if n != victim}
            pods = await running(backend, job.name, 3)
            assert {p.node for p in pods} <= tree.members[tree.leaf_a]
            kinds = [a.kind for r in driver.reports for a in r.actions]
            assert kinds == ["RestartPod"]
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_restart_task_restarts_only_that_task(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    backend = await backend_for(control_plane, "west")
    job = gpu_job(unique("rtask"), (("master", 1, 1), ("worker", 2, 2)),
                  task_policies={"worker": (P("RestartTask", events=("PodFailed",)),)})
    with Tree(control_plane, "west") as tree:
        driver = WorkDriver(backend, work_for(job, "west", tree.spine, tier=2)).start()
        try:
            await eventually("gang Running", lambda: running(backend, job.name, 3))
            before = await pod_uids(kube_clients["west"], job.name)
            await _fail(control_plane, kube_clients["west"], f"{job.name}-worker-0")

            async def restarted() -> dict[str, str]:
                now = await pod_uids(kube_clients["west"], job.name)
                workers = [f"{job.name}-worker-{i}" for i in range(2)]
                ok = (len(now) == 3 and all(now[w] != before[w] for w in workers)
                      and await running(backend, job.name, 3))
                return now if ok else {}

            after = await eventually("the worker task restarted", restarted, 45)
            master = f"{job.name}-master-0"
            assert after[master] == before[master]
            assert [a.kind for r in driver.reports for a in r.actions] == ["RestartTask"]
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_restart_job_restarts_the_gang(control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    backend = await backend_for(control_plane, "east")
    job = gpu_job(unique("rjob"), (("master", 1, 1), ("worker", 2, 2)),
                  policies=(P("RestartJob", events=("PodFailed",)),))
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_for(job, "east", tree.spine, tier=2)).start()
        try:
            await eventually("gang Running", lambda: running(backend, job.name, 3))
            before = await pod_uids(kube_clients["east"], job.name)
            await _fail(control_plane, kube_clients["east"], f"{job.name}-master-0")

            async def restarted() -> bool:
                now = await pod_uids(kube_clients["east"], job.name)
                return (len(now) == 3 and all(now[n] != before[n] for n in before)
                        and bool(await running(backend, job.name, 3)))

            await eventually("the whole gang restarted", restarted, 45)
            assert [a.kind for r in driver.reports for a in r.actions] == ["RestartJob"]
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_max_retry_exhausted_fails_the_job_with_the_reason(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    backend = await backend_for(control_plane, "west")
    job = gpu_job(unique("retry"), (("worker", 2, 2),), max_retry=2,  # Volcano: one restart, then Failed
                  policies=(P("RestartPod", events=("PodFailed",)),))
    with Tree(control_plane, "west") as tree:
        driver = WorkDriver(backend, work_for(job, "west", tree.leaf_a)).start()
        try:
            await eventually("gang Running", lambda: running(backend, job.name, 2))
            victim = f"{job.name}-worker-0"
            first = (await pod_uids(kube_clients["west"], job.name))[victim]
            await _fail(control_plane, kube_clients["west"], victim)

            async def replaced() -> bool:
                now = await pod_uids(kube_clients["west"], job.name)
                return now.get(victim, first) != first and bool(await running(backend, job.name, 2))

            await eventually("first failure restarted", replaced, 45)
            await _fail(control_plane, kube_clients["west"], victim)

            async def failed() -> bool:
                return driver.last is not None and driver.last.phase == "Failed"

            await eventually("job Failed after maxRetry", failed, 45)
            messages = [e.message for r in driver.reports for e in r.events]
            assert any("maxRetry" in m for m in messages), messages
            assert [a.kind for r in driver.reports for a in r.actions][:1] == ["RestartPod"]
            assert driver.controller.state.phase == "Failed"
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_a_failed_pod_without_a_policy_is_kept_and_the_gang_runs_on_until_all_its_pods_end(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    # Volcano's default SyncJob: the Failed pod is counted, not recreated, and the other
    # pods keep running below minAvailable; the job is settled once every pod has ended.
    backend = await backend_for(control_plane, "west")
    job = gpu_job(unique("nopol"), (("worker", 3, 2),))
    with Tree(control_plane, "west") as tree:
        driver = WorkDriver(backend, work_for(job, "west", tree.leaf_a)).start()
        try:
            await eventually("gang Running", lambda: running(backend, job.name, 3))
            before = await pod_uids(kube_clients["west"], job.name)
            victim = f"{job.name}-worker-2"
            await _fail(control_plane, kube_clients["west"], victim)

            async def failed_and_seen() -> list[PodRecord]:
                pods = {p.name: p for p in await backend.list_pods({LABEL_JOB: job.name})}
                seen = driver.last is not None and any(p.name == victim and p.phase == "Failed"
                                                       for p in driver.last.pods)
                return list(pods.values()) if seen and pods[victim].phase == "Failed" else []

            pods = await eventually("the failed pod seen by a pass", failed_and_seen, 45)
            await asyncio.sleep(2)  # a few more passes: nothing is restarted, recreated or ended
            assert await pod_uids(kube_clients["west"], job.name) == before
            assert {p.name: p.phase for p in await backend.list_pods({LABEL_JOB: job.name})} == {
                p.name: "Failed" if p.name == victim else "Running" for p in pods}
            assert [a.kind for r in driver.reports for a in r.actions] == []
            assert driver.controller.state.phase == "Running"
            for i in (0, 1):
                await _fail(control_plane, kube_clients["west"], f"{job.name}-worker-{i}")

            async def failed() -> bool:
                return driver.last is not None and driver.last.phase == "Failed"

            await eventually("job Failed once every pod ended", failed, 45)
            assert [a.kind for r in driver.reports for a in r.actions] == ["FailJob"]
            assert [e.message for r in driver.reports for e in r.events] == [
                "all pods ended: task worker has 0 Succeeded, minAvailable 3"]
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


class CrashAfterBinds:
    """The agent process dies after ``binds`` successful bind calls: later calls never
    return (the task is cancelled), as when the process is killed mid-binding."""

    def __init__(self, backend: KubernetesBackend, binds: int) -> None:
        self._backend = backend
        self.left = binds
        self.crashed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    @property
    def cluster(self) -> str:
        return self._backend.cluster

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        if self.left <= 0:
            self.crashed.set()
            await asyncio.Event().wait()  # hangs until cancelled: the process is gone
        self.left -= 1
        await self._backend.bind_pod(namespace, name, node)


@pytest.mark.parametrize("binds", [0, 2], ids=["killed-before-any-bind", "killed-after-two-of-four-binds"])
async def test_agent_killed_mid_binding_leaves_no_duplicate_and_no_half_gang(
        control_plane: ControlPlane, binds: int) -> None:
    first = await backend_for(control_plane, "east")
    job = gpu_job(unique("crash"), (("worker", 4, 2),))
    with Tree(control_plane, "east") as tree:
        w = work_for(job, "east", tree.leaf_a)
        crashing = CrashAfterBinds(first, binds)
        driver = WorkDriver(crashing, w).start()
        try:
            await asyncio.wait_for(crashing.crashed.wait(), 30)
            await driver.stop()  # killed
            await first.close()
            second = await backend_for(control_plane, "east")
            pods = await second.list_pods({LABEL_JOB: job.name})
            assert len(pods) == 4 and sum(p.node is not None for p in pods) == binds  # the crash state
            restarted = WorkDriver(second, w).start()  # a new process: no memory, reads the cluster
            try:
                pods = await eventually("gang Running after restart", lambda: running(second, job.name, 4))
                assert sorted(p.name for p in pods) == [f"{job.name}-worker-{i}" for i in range(4)]
                assert {p.node for p in pods} <= tree.members[tree.leaf_a]
                raw = control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods?labelSelector="
                                                          f"{LABEL_JOB}%3D{job.name}")
                assert len(raw["items"]) == 4  # nothing duplicated
            finally:
                await restarted.stop()
                await cleanup(second, job.name)
                await second.close()
        finally:
            await driver.stop()


async def test_gang_that_cannot_complete_is_unbound_and_reported(control_plane: ControlPlane) -> None:
    """The HyperNode has room for 2 of 3 pods: nothing is bound and the Work says Replan."""
    backend = await backend_for(control_plane, "west")
    job = gpu_job(unique("nofit"), (("worker", 3, 8),))
    with Tree(control_plane, "west") as tree:
        driver = WorkDriver(backend, work_for(job, "west", tree.leaf_a)).start()
        try:
            async def replan() -> bool:
                return driver.last is not None and driver.last.phase == "Replan"

            await eventually("Replan reported", replan)
            assert all(p.node is None for p in await backend.list_pods({LABEL_JOB: job.name}))
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_cancellation_leaves_nothing_behind(control_plane: ControlPlane) -> None:
    backend = await backend_for(control_plane, "east")
    job = gpu_job(unique("cancel"), (("worker", 2, 2),), plugins=(("svc", ()), ("deepspeed", ())))
    with Tree(control_plane, "east") as tree:
        w = work_for(job, "east", tree.leaf_b)
        driver = WorkDriver(backend, w).start()
        try:
            await eventually("gang Running", lambda: running(backend, job.name, 2))
            assert await backend.list_services({LABEL_JOB: job.name})
            assert await backend.list_config_maps({LABEL_JOB: job.name})
            driver.update(replace(w, version=2, cancelled=True))

            async def empty() -> bool:
                selector = {LABEL_JOB: job.name}
                return not (await backend.list_pods(selector) or await backend.list_services(selector)
                            or await backend.list_config_maps(selector))

            await eventually("everything withdrawn", empty, 30)
            assert driver.last is not None and driver.last.phase == "Cancelled"
            raw = control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods?labelSelector="
                                                      f"{LABEL_JOB}%3D{job.name}")
            assert raw["items"] == []
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_a_namespace_the_cluster_lacks_is_reported_and_the_job_starts_once_it_exists(
        control_plane: ControlPlane) -> None:
    """Every create is refused (404). The agent said Bound, with no reason, for a job that had
    nothing in the cluster, and re-ran its passes back to back. Now it reports Pending with
    the apiserver's reason, backs off, and carries on once the namespace is there."""
    backend = await backend_for(control_plane, "east")
    namespace = unique("absent")
    job = replace(gpu_job(unique("nons"), (("worker", 2, 2),)), namespace=namespace)
    with Tree(control_plane, "east") as tree:
        await tree.observed_by(backend)
        driver = WorkDriver(backend, work_for(job, "east", tree.leaf_a)).start()
        try:
            async def refused() -> bool:
                last = driver.last
                return last is not None and f'namespaces "{namespace}" not found' in last.message

            await eventually("the refusal reported", refused)
            assert driver.last is not None and driver.last.phase == "Pending" and driver.last.wake_at is not None
            assert await backend.list_pods({LABEL_JOB: job.name}) == []
            control_plane.request("east", "POST", "/api/v1/namespaces",
                                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            await eventually("gang Running", lambda: running(backend, job.name, 2), 45)

            async def clean_report() -> bool:
                return driver.last is not None and driver.last.phase == "Running" and driver.last.message == ""

            await eventually("a clean report", clean_report)
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()
            control_plane.request("east", "DELETE", f"/api/v1/namespaces/{namespace}")
