"""A Volcano job's ``spec.volumes`` on a real kube-apiserver (agents/core/reconcile.py,
domain/job_volumes.py): the agent makes the claim of a ``volumeClaim`` before the pods,
with the spec as written and the job's label; the claim is of a WaitForFirstConsumer class,
so the agent writes ``volume.kubernetes.io/selected-node`` naming the gang's node before
binding; every container of every pod mounts it at ``mountPath``; withdrawing the job
deletes it (kube-controller-manager's PVC protection lets it go once the pods are gone).
No PV controller runs, so the claim stays Pending; kwok runs the bound pods."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import Any

import pytest
from controlplane import ApiError, ControlPlane
from fixtures_federation import KWOK_TOLERATION, Tree, WorkDriver, backend_for, cleanup, eventually, unique, work_for

from agents.core.records import ANNOTATION_SELECTED_NODE, LABEL_JOB, PodRecord
from agents.k8s.backend import KubernetesBackend
from federation.domain.job_volumes import ClaimSpec, JobVolume
from federation.domain.jobs import Job, Task
from federation.domain.resources import Resources

pytestmark = pytest.mark.e2e

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
PODS = "/api/v1/namespaces/default/pods"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def volumes_job(name: str, storage_class: str) -> Job:
    template = {"spec": {"containers": [{"name": "trainer", "image": "trainer"},
                                        {"name": "sidecar", "image": "busybox"}]}}
    return Job(name=name, queue="default", tolerations=(KWOK_TOLERATION,),
               volumes=(JobVolume("/scratch", claim=ClaimSpec(("ReadWriteOnce",), 2 << 30, storage_class)),),
               tasks=(Task("worker", 2, Resources.of(gpu=2, cpu=1000),
                           template_json=json.dumps(template, sort_keys=True, separators=(",", ":"))),))


async def _running(backend: KubernetesBackend, job: str) -> list[PodRecord]:
    pods = [p for p in await backend.list_pods({LABEL_JOB: job}) if not p.deleting]
    return pods if len(pods) == 2 and all(p.phase == "Running" and p.node for p in pods) else []


def _get(control_plane: ControlPlane, path: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = control_plane.request("east", "GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def test_a_jobs_volume_claim_is_made_mounted_bound_where_its_gang_runs_and_deleted_with_the_job(
        control_plane: ControlPlane) -> None:
    job_name, cls = unique("vols"), unique("wffc")
    made = f"{job_name}-pvc-0"
    control_plane.request("east", "POST", CLASSES, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": cls},
        "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"})
    job = volumes_job(job_name, cls)
    backend = await backend_for(control_plane, "east")
    try:
        with Tree(control_plane, "east") as tree:
            work = work_for(job, "east", tree.spine, tier=2)
            driver = WorkDriver(backend, work).start()
            try:
                pods = await eventually("gang mounting the job's claim Running",
                                        lambda: _running(backend, job_name), 45)
                [node] = {p.node for p in pods}  # both pods mount the WaitForFirstConsumer claim: one node
                claim = _get(control_plane, f"{CLAIMS}/{made}")
                assert claim is not None
                assert claim["metadata"]["labels"][LABEL_JOB] == job_name
                assert claim["metadata"]["annotations"][ANNOTATION_SELECTED_NODE] == node
                assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
                assert claim["spec"]["resources"]["requests"] == {"storage": "2Gi"}
                assert claim["spec"]["storageClassName"] == cls
                for pod in pods:
                    spec = control_plane.request("east", "GET", f"{PODS}/{pod.name}")["spec"]
                    [volume] = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
                    assert volume["persistentVolumeClaim"] == {"claimName": made}
                    for container in spec["containers"]:
                        assert {"name": volume["name"], "mountPath": "/scratch"} in [
                            {k: m[k] for k in ("name", "mountPath")} for m in container["volumeMounts"]]
                assert not [e for e in driver.errors if "forbidden" in e.lower()], driver.errors

                driver.update(replace(work, cancelled=True))

                async def withdrawn() -> bool:
                    last = driver.last
                    return _get(control_plane, f"{CLAIMS}/{made}") is None and last is not None \
                        and last.message == "withdrawn"

                await eventually("the job's claim deleted with the job", withdrawn, 45)
            finally:
                await driver.stop()
    finally:
        await cleanup(backend, job_name)
        await backend.close()
        for path in (f"{CLAIMS}/{made}", f"{CLASSES}/{cls}"):
            with contextlib.suppress(Exception):
                control_plane.request("east", "DELETE", path)
