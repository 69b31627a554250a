"""Volcano's job plugins on a real kube-apiserver: a Volcano MPI example as published
(its ssh Secret, the Secret's mount, MPI_HOST, the hosts files in the created pods and
the svc plugin's NetworkPolicy), TF_CONFIG and the ssh options on real pods, and
everything removed with the job."""

from __future__ import annotations

import base64
import contextlib
import json
from dataclasses import replace
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import KWOK_TOLERATION, Tree, WorkDriver, backend_for, cleanup, eventually, gpu_job, unique
from fixtures_federation import work_for as work_on

from agents.core.records import LABEL_JOB, PodRecord
from agents.k8s.backend import KubernetesBackend
from federation.domain.manifests import load_jobs
from tests.fixtures.corpus import CORPUS, corpus

pytestmark = pytest.mark.e2e

MPI_GUIDE = CORPUS / "volcano-jobs" / "volcano__docs__user-guide__how_to_use_mpi_plugin.md__L34-75.yaml"


def _get(control_plane: Any, cluster: str, path: str) -> Any:
    try:
        return control_plane.request(cluster, "GET", path)
    except Exception as exc:
        if getattr(exc, "status", 0) == 404:
            return None
        raise


async def _running(backend: KubernetesBackend, job: str, count: int) -> list[PodRecord]:
    pods = [p for p in await backend.list_pods({LABEL_JOB: job}) if not p.deleting]
    return pods if len(pods) == count and all(p.phase == "Running" and p.node for p in pods) else []


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


async def test_volcano_mpi_example_gets_its_secret_mounts_and_environment(control_plane: ControlPlane) -> None:
    corpus()
    [published] = load_jobs(MPI_GUIDE.read_text())
    # namespace: what admission gives a job whose manifest names none (its queue's default)
    job = replace(published, name=unique("mpi"), tolerations=(KWOK_TOLERATION,), namespace="default")
    backend = await backend_for(control_plane, "east")
    pods_path = "/api/v1/namespaces/default/pods"
    secret_path = f"/api/v1/namespaces/default/secrets/{job.name}-ssh"
    policy_path = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies"
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_on(job, "east", tree.spine, tier=2)).start()
        try:
            await eventually("MPI gang Running", lambda: _running(backend, job.name, 3), 45)
            secret = _get(control_plane, "east", secret_path)
            assert secret is not None and secret["type"] == "Opaque"
            data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
            assert data["id_rsa"].startswith("-----BEGIN RSA PRIVATE KEY-----")
            assert data["id_rsa.pub"].startswith("ssh-rsa ")
            names = [f"{job.name}-mpimaster-0", f"{job.name}-mpiworker-0", f"{job.name}-mpiworker-1"]
            for name in names:
                assert f"Host {name}\n  HostName {name}.{job.name}\n" in data["config"]

            for name in names:
                pod = control_plane.request("east", "GET", f"{pods_path}/{name}")
                [volume] = [v for v in pod["spec"]["volumes"] if v.get("secret")]
                assert volume["secret"]["secretName"] == f"{job.name}-ssh"
                assert volume["secret"]["defaultMode"] == 0o600
                paths = {i["path"] for i in volume["secret"]["items"]}
                assert paths == {".ssh/id_rsa", ".ssh/id_rsa.pub", ".ssh/authorized_keys", ".ssh/config"}
                container = pod["spec"]["containers"][0]
                mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
                assert mounts["/root/.ssh"]["subPath"] == ".ssh" and "/etc/volcano" in mounts
                assert {"name": "mpijob-port", "containerPort": 22, "protocol": "TCP"} in container["ports"]
                env = _env(pod)
                workers = f"{job.name}-mpiworker-0.{job.name},{job.name}-mpiworker-1.{job.name}"
                assert env["VC_MPIWORKER_HOSTS"] == workers
                assert ("MPI_HOST" in env) == (name == names[0])
            master = control_plane.request("east", "GET", f"{pods_path}/{names[0]}")
            assert _env(master)["MPI_HOST"] == f"{job.name}-mpiworker-0.{job.name},{job.name}-mpiworker-1.{job.name}"
            hosts = _get(control_plane, "east", f"/api/v1/namespaces/default/configmaps/{job.name}-hosts")
            assert hosts["data"]["mpiworker.host"].splitlines() == [f"{n}.{job.name}" for n in names[1:]]
            # mpi turns on svc, whose NetworkPolicy admits ingress to the job's pods only from them
            policy = _get(control_plane, "east", f"{policy_path}/{job.name}")
            own = {"matchLabels": {LABEL_JOB: job.name}}
            assert policy["spec"]["podSelector"] == own and policy["spec"]["policyTypes"] == ["Ingress"]
            assert policy["spec"]["ingress"] == [{"from": [{"podSelector": own}]}]

            driver.update(work_on(job, "east", tree.spine, tier=2, cancelled=True))

            async def removed() -> bool:
                return (not await backend.list_pods({LABEL_JOB: job.name})
                        and not await backend.list_services({LABEL_JOB: job.name})
                        and not await backend.list_config_maps({LABEL_JOB: job.name})
                        and _get(control_plane, "east", secret_path) is None
                        and _get(control_plane, "east", f"{policy_path}/{job.name}") is None)

            await eventually("pods, Service, ConfigMap, Secret and NetworkPolicy removed with the job", removed, 45)
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def test_tensorflow_config_and_ssh_options_on_real_pods(control_plane: ControlPlane) -> None:
    job = gpu_job(unique("tf"), (("ps", 1, 0), ("worker", 2, 2)),
                  plugins=(("tensorflow", ("--port=3333",)), ("ssh", ("--no-root",))))
    backend = await backend_for(control_plane, "west")
    with Tree(control_plane, "west") as tree:
        driver = WorkDriver(backend, work_on(job, "west", tree.leaf_a)).start()
        try:
            await eventually("tensorflow gang Running", lambda: _running(backend, job.name, 3), 45)
            pod = control_plane.request("west", "GET", f"/api/v1/namespaces/default/pods/{job.name}-worker-1")
            config = json.loads(_env(pod)["TF_CONFIG"])
            assert config["task"] == {"type": "worker", "index": 1}
            assert config["cluster"]["ps"] == [f"{job.name}-ps-0.{job.name}:3333"]
            assert len(config["cluster"]["worker"]) == 2
            [volume] = [v for v in pod["spec"]["volumes"] if v.get("secret")]
            assert volume["secret"]["defaultMode"] == 0o755
            mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
            assert "/etc/volcano/.ssh" in mounts
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()
            assert _get(control_plane, "west", f"/api/v1/namespaces/default/secrets/{job.name}-ssh") is None


async def test_a_users_own_secret_named_like_the_jobs_ssh_secret_is_left_alone(control_plane: ControlPlane) -> None:
    # The user's Secret ``<job>-ssh`` (no job label) was replaced by the job's key pair, and
    # deleted with the job: it is not the agent's. The job's create is refused instead.
    job = gpu_job(unique("theirs"), (("worker", 1, 1),), plugins=(("ssh", ()),))
    path = f"/api/v1/namespaces/default/secrets/{job.name}-ssh"
    control_plane.request("east", "POST", "/api/v1/namespaces/default/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{job.name}-ssh"},
        "data": {"token": base64.b64encode(b"precious").decode()}})
    backend = await backend_for(control_plane, "east")
    with Tree(control_plane, "east") as tree:
        driver = WorkDriver(backend, work_on(job, "east", tree.spine, tier=2)).start()
        try:
            await eventually("the create refused", lambda: _refused(driver), 30)
            driver.update(work_on(job, "east", tree.spine, tier=2, cancelled=True))
            await eventually("the job withdrawn", lambda: _withdrawn(driver), 30)
            await backend.delete_secret("default", f"{job.name}-ssh")  # the orphan sweep's call
            secret = _get(control_plane, "east", path)
            assert secret is not None and secret["data"] == {"token": base64.b64encode(b"precious").decode()}
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()
            with contextlib.suppress(Exception):
                control_plane.request("east", "DELETE", path)


async def _refused(driver: WorkDriver) -> bool:
    return any("already exists" in e for e in driver.errors)


async def _withdrawn(driver: WorkDriver) -> bool:
    return driver.last is not None and driver.last.message == "withdrawn"
