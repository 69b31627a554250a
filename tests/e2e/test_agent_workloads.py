"""A Deployment with Volcano's gang and topology annotations on a real cluster: created as
a Deployment whose ReplicaSet (kube-controller-manager) makes the pods, bound by the agent
all-or-nothing inside the chosen HyperNode; a lost pod is recreated by the ReplicaSet and
bound in the same HyperNode; cancelling removes the Deployment and its pods."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import Tree, WorkDriver, backend_for, cleanup, eventually, gpu_job, unique
from fixtures_federation import work_for as work_on
from kubernetes_asyncio.client import ApiClient

from agents.core.records import LABEL_JOB, PodRecord
from agents.k8s.backend import KubernetesBackend
from federation.domain.manifests import load_jobs

pytestmark = pytest.mark.e2e


def deployment(name: str) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}}}
      annotations:
        scheduling.volcano.sh/group-min-member: "3"
        volcano.sh/network-topology-mode: hard
        volcano.sh/network-topology-highest-tier: "1"
    spec:
      schedulerName: volcano
      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]
      containers:
        - name: c
          image: nginx
          resources: {{requests: {{nvidia.com/gpu: 2, cpu: 100m}}}}
"""


async def _running(backend: KubernetesBackend, job: str, count: int) -> list[PodRecord]:
    pods = [p for p in await backend.list_pods({LABEL_JOB: job}) if not p.deleting]
    return pods if len(pods) == count and all(p.phase == "Running" and p.node for p in pods) else []


def _absent(control_plane: Any, path: str) -> bool:
    try:
        control_plane.request("east", "GET", path)
    except Exception as exc:
        return getattr(exc, "status", 0) == 404
    return False


async def test_deployment_gang_is_bound_inside_the_hypernode_and_repaired(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    from kubernetes_asyncio import client

    name = unique("serve")
    [job] = load_jobs(deployment(name))
    job = replace(job, namespace="default")  # what admission gives a manifest without one (the queue's default)
    backend = await backend_for(control_plane, "east")
    apps = f"/apis/apps/v1/namespaces/default/deployments/{name}"
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_on(job, "east", tree.leaf_a)).start()
        try:
            try:
                pods = await eventually("Deployment gang Running", lambda: _running(backend, name, 3), 60)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; agent: {driver.last}; errors: {driver.errors[-3:]}") from None
            assert {p.node for p in pods} <= tree.members[tree.leaf_a]
            made = control_plane.request("east", "GET", apps)
            assert made["spec"]["template"]["spec"]["schedulerName"] == "federation-scheduler"
            raw = control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods/{pods[0].name}")
            assert raw["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"  # made by the controller

            lost = pods[0].name
            await client.CoreV1Api(kube_clients["east"]).delete_namespaced_pod(lost, "default", grace_period_seconds=0)

            async def repaired() -> list[PodRecord]:
                now = await _running(backend, name, 3)
                return now if now and lost not in {p.name for p in now} else []

            again = await eventually("the ReplicaSet's replacement bound in the HyperNode", repaired, 60)
            assert {p.node for p in again} <= tree.members[tree.leaf_a]

            driver.update(work_on(job, "east", tree.leaf_a, cancelled=True))

            async def removed() -> bool:
                return _absent(control_plane, apps) and not await backend.list_pods({LABEL_JOB: name})

            await eventually("the Deployment and its pods removed", removed, 60)
        finally:
            await driver.stop()
            await backend.delete_workload("Deployment", "default", name)
            await cleanup(backend, name)
            await backend.close()


def stateful_set(name: str) -> str:
    """A StatefulSet whose selector matches every pod the agent labels with a task."""
    return f"""
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {name}}}
spec:
  replicas: 1
  podManagementPolicy: Parallel
  serviceName: {name}
  selector: {{matchExpressions: [{{key: federation.io/task, operator: Exists}}]}}
  template:
    metadata:
      annotations: {{scheduling.volcano.sh/group-min-member: "1"}}
    spec:
      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]
      containers:
        - name: c
          image: nginx
          resources: {{requests: {{nvidia.com/gpu: 1, cpu: 100m}}}}
"""


async def test_a_stateful_set_named_like_another_jobs_pods_does_not_adopt_them(control_plane: ControlPlane) -> None:
    """Job ``<vic>``'s pods ``<vic>-worker-<i>`` have no owner. A StatefulSet job named
    ``<vic>-worker`` in the same namespace (every queue's default) whose selector matched
    them adopted them: its controller deleted ordinals 1 and 2 and replaced 0 by its own
    pod, so the other tenant's job lost its running pods and could never recreate them."""
    backend = await backend_for(control_plane, "east")
    victim = gpu_job(unique("vic"), (("worker", 3, 1),))
    [attacker] = load_jobs(stateful_set(f"{victim.name}-worker"))
    attacker = replace(attacker, namespace="default")
    apps = f"/apis/apps/v1/namespaces/default/statefulsets/{attacker.name}"
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_on(victim, "east", tree.leaf_a)).start()
        other = None
        try:
            pods = await eventually("the victim's gang Running", lambda: _running(backend, victim.name, 3), 60)
            uids = {p.name: control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods/{p.name}")
                    ["metadata"]["uid"] for p in pods}
            other = WorkDriver(backend, work_on(attacker, "east", tree.leaf_b)).start()
            await eventually("the StatefulSet created", lambda: _made(control_plane, apps), 30)
            await asyncio.sleep(5)  # the StatefulSet controller's sync (it would adopt at once)
            for name, uid in uids.items():
                raw = control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods/{name}")
                assert raw["metadata"]["uid"] == uid and not raw["metadata"].get("deletionTimestamp"), name
                assert not raw["metadata"].get("ownerReferences"), name
            assert await _running(backend, victim.name, 3)
        finally:
            for d in (driver, other):
                if d is not None:
                    await d.stop()
            await backend.delete_workload("StatefulSet", "default", attacker.name)
            await cleanup(backend, victim.name)
            await cleanup(backend, attacker.name)
            await backend.close()


async def _made(control_plane: Any, path: str) -> bool:
    return not _absent(control_plane, path)
