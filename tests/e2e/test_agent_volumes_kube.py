"""PersistentVolumeClaims on a real kube-apiserver, where the agent does what kube-scheduler's
VolumeBinding plugin would (agents/core/volumes.py): a WaitForFirstConsumer claim gets
``volume.kubernetes.io/selected-node`` naming the node its pod was bound to, and a claim
that does not exist keeps the gang unbound with the reason; a generic ephemeral volume's
claim, made by kube-controller-manager's ephemeral volume controller once the pod exists,
gets the node of its own pod. No PV controller runs here, so the claims stay Pending; kwok
runs the bound pods."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import KWOK_TOLERATION, Tree, WorkDriver, backend_for, cleanup, eventually, unique, work_for

from agents.core.records import ANNOTATION_SELECTED_NODE, LABEL_JOB, PodRecord
from agents.k8s.backend import KubernetesBackend
from federation.domain.jobs import Job, Task
from federation.domain.resources import Resources

pytestmark = pytest.mark.e2e

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def claim_job(name: str, claim: str, replicas: int = 2) -> Job:
    template = {"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}
    return Job(name=name, queue="default", tolerations=(KWOK_TOLERATION,),
               tasks=(Task("worker", replicas, Resources.of(gpu=2, cpu=1000),
                           template_json=json.dumps(template, sort_keys=True, separators=(",", ":"))),))


def ephemeral_job(name: str, cls: str, replicas: int = 2) -> Job:
    template = {"spec": {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "storageClassName": cls, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}}
    return Job(name=name, queue="default", tolerations=(KWOK_TOLERATION,),
               tasks=(Task("worker", replicas, Resources.of(gpu=2, cpu=1000),
                           template_json=json.dumps(template, sort_keys=True, separators=(",", ":"))),))


def _wait_for_first_consumer_class(control_plane: ControlPlane, cluster: str, cls: str) -> None:
    control_plane.request(cluster, "POST", CLASSES, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": cls},
        "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"})


async def _running(backend: KubernetesBackend, job: str, count: int) -> list[PodRecord]:
    pods = [p for p in await backend.list_pods({LABEL_JOB: job}) if not p.deleting]
    return pods if len(pods) == count and all(p.phase == "Running" and p.node for p in pods) else []


async def test_a_wait_for_first_consumer_claim_gets_the_node_its_gang_was_bound_to(
        control_plane: ControlPlane) -> None:
    job_name, claim, cls = unique("wffc"), unique("data"), unique("local")
    _wait_for_first_consumer_class(control_plane, "east", cls)
    control_plane.request("east", "POST", CLAIMS, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
        "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    job = claim_job(job_name, claim)
    backend = await backend_for(control_plane, "east")
    try:
        with Tree(control_plane, "east") as tree:
            driver = WorkDriver(backend, work_for(job, "east", tree.spine, tier=2)).start()
            try:
                pods = await eventually("gang sharing the claim Running", lambda: _running(backend, job_name, 2), 45)
                [node] = {p.node for p in pods}  # both pods name the claim: one node
                stored: dict[str, Any] = control_plane.request("east", "GET", f"{CLAIMS}/{claim}")
                assert stored["metadata"]["annotations"][ANNOTATION_SELECTED_NODE] == node
                assert not [e for e in driver.errors if "forbidden" in e.lower()], driver.errors
            finally:
                await driver.stop()
    finally:
        await cleanup(backend, job_name)
        await backend.close()
        for path in (f"{CLAIMS}/{claim}", f"{CLASSES}/{cls}"):
            with contextlib.suppress(Exception):
                control_plane.request("east", "DELETE", path)


async def test_a_missing_claim_keeps_the_gang_unbound_with_the_reason(control_plane: ControlPlane) -> None:
    job_name, claim = unique("noclaim"), unique("absent")
    job = claim_job(job_name, claim)
    backend = await backend_for(control_plane, "west")
    try:
        with Tree(control_plane, "west") as tree:
            driver = WorkDriver(backend, work_for(job, "west", tree.spine, tier=2)).start()
            try:
                async def waiting() -> bool:
                    last = driver.last
                    return last is not None and last.phase == "Pending" and len(last.pods) == 2 \
                        and f'persistentvolumeclaim "{claim}" not found' in last.message

                await eventually("the gang waiting for its claim", waiting, 30)
                assert all(p.node is None for p in await backend.list_pods({LABEL_JOB: job_name}))
            finally:
                await driver.stop()
    finally:
        await cleanup(backend, job_name)
        await backend.close()


async def test_each_pods_ephemeral_volume_claim_gets_the_node_that_pod_was_bound_to(
        control_plane: ControlPlane) -> None:
    job_name, cls = unique("eph"), unique("local")
    _wait_for_first_consumer_class(control_plane, "east", cls)
    backend = await backend_for(control_plane, "east")
    try:
        with Tree(control_plane, "east") as tree:
            driver = WorkDriver(backend, work_for(ephemeral_job(job_name, cls), "east", tree.spine, tier=2)).start()
            try:
                pods = await eventually("gang with ephemeral volumes Running",
                                        lambda: _running(backend, job_name, 2), 60)
                for pod in pods:  # the controller's claim, owned by its pod, provisioned where the pod runs
                    stored: dict[str, Any] = control_plane.request("east", "GET", f"{CLAIMS}/{pod.name}-scratch")
                    assert stored["metadata"]["annotations"][ANNOTATION_SELECTED_NODE] == pod.node
                    [owner] = [r for r in stored["metadata"]["ownerReferences"] if r.get("controller")]
                    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", pod.name, pod.uid)
                assert not [e for e in driver.errors if "forbidden" in e.lower()], driver.errors
            finally:
                await driver.stop()
    finally:
        await cleanup(backend, job_name)  # the claims go with their pods (garbage collector)
        await backend.close()
        with contextlib.suppress(Exception):
            control_plane.request("east", "DELETE", f"{CLASSES}/{cls}")
