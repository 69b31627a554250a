"""The Helm charts' manifests against a real apiserver: the agent's RBAC (rendered from
deploy/chart/federation-agent) is enough for everything the agent does and no more, and
every rendered document of both charts (DaemonSet, Deployment, Services, the migration
hook Job and Secrets) passes the apiserver's validation (server-side dry run)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import Tree, WorkDriver, cleanup, eventually, gpu_job, unique, work_for

from agents.core.records import ANNOTATION_SELECTED_NODE, LABEL_JOB
from agents.k8s.api import ApiError, call, client_from_kubeconfig, core_api
from agents.k8s.backend import KubernetesBackend
from agents.k8s.lease import KubernetesLeaseStore
from agents.leader import LeaderElector
from federation.domain.job_volumes import ClaimSpec, JobVolume
from tests.fixtures.helm import AGENT, AGENT_VALUES, CENTRAL, CENTRAL_VALUES, render

pytestmark = pytest.mark.e2e

SERVICE_ACCOUNT = "system:serviceaccount:federation-system:federation-agent"
_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "Service": "/api/v1/namespaces/{ns}/services",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "federation-system"}}


def _agent_docs() -> list[dict[str, Any]]:
    return render(AGENT, AGENT_VALUES, release="federation-agent")


def _rbac() -> list[dict[str, Any]]:
    return [NAMESPACE, *(d for d in _agent_docs() if d["kind"] in
                         ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"))]


def _create(control_plane: Any, cluster: str, doc: dict[str, Any], *, dry_run: bool = False) -> int:
    path = _PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", ""))
    try:
        control_plane.request(cluster, "POST", path + ("?dryRun=All" if dry_run else ""), doc)
        return 201
    except Exception as exc:  # ApiError from the control-plane helper
        status = getattr(exc, "status", 0)
        if status != 409:
            raise
        return 409


async def _impersonating(control_plane: Any, cluster: str) -> Any:
    api = await client_from_kubeconfig(str(control_plane.kubeconfig(cluster)))
    api.set_default_header("Impersonate-User", SERVICE_ACCOUNT)
    return api


async def _gang_runs(control_plane: Any, backend: KubernetesBackend, job: Any) -> None:
    """Start the backend (list + watch nodes, pods, HyperNodes, services, config maps) and run a
    2-pod gang in a tier-1 HyperNode of west with no 403 on the way; then clean it up."""
    await backend.start()
    with Tree(control_plane, "west") as tree:
        driver = WorkDriver(backend, work_for(job, "west", tree.leaf_a)).start()
        try:
            async def running() -> bool:
                pods = await backend.list_pods({LABEL_JOB: job.name})
                return len(pods) == 2 and all(p.phase == "Running" for p in pods)

            await eventually("gang Running as the service account", running, 45)
            assert not [e for e in driver.errors if "403" in e or "forbidden" in e.lower()], driver.errors
        finally:
            await driver.stop()
        await cleanup(backend, job.name)


def test_manifests_pass_server_side_validation(control_plane: ControlPlane) -> None:
    for doc in _rbac():
        _create(control_plane, "west", doc)
    checked = []
    for doc in [*_agent_docs(), *render(CENTRAL, CENTRAL_VALUES, release="federation-central")]:
        status = _create(control_plane, "west", doc, dry_run=True)
        assert status in (201, 409), doc["kind"]
        checked.append(doc["kind"])
    assert {"DaemonSet", "Deployment", "Service", "Job", "Secret"} <= set(checked)


async def test_agent_service_account_can_do_its_job_and_no_more(control_plane: ControlPlane) -> None:
    for doc in _rbac():
        _create(control_plane, "west", doc)
    api = await _impersonating(control_plane, "west")
    backend = KubernetesBackend(api, "west")
    # ssh: the Secret is created, read by name and deleted as the service account; the
    # job's PriorityClass is created (get/create on priorityclasses).
    priority_class = unique("rbac-prio")
    job = replace(gpu_job(unique("rbac"), (("worker", 2, 2),), plugins=(("svc", ()), ("ssh", ()))),
                  priority_class=priority_class, priority=777)
    try:
        await _gang_runs(control_plane, backend, job)
        made = control_plane.request("west", "GET", f"/apis/scheduling.k8s.io/v1/priorityclasses/{priority_class}")
        assert made["value"] == 777

        elector = LeaderElector(KubernetesLeaseStore(api, "federation-system", unique("agent")), "sa-replica",
                                lease_duration=3, renew_deadline=2, retry_period=0.5)
        term = await elector.try_acquire()
        assert term is not None and term.epoch > 0

        core = core_api(api)
        with pytest.raises(ApiError) as denied:
            await call(core.delete_node("west-gpu-0", _preload_content=False))
        assert denied.value.status == 403
        with pytest.raises(ApiError) as denied:
            await call(core.list_secret_for_all_namespaces(_preload_content=False))
        assert denied.value.status == 403
    finally:
        await cleanup(backend, job.name)
        await backend.close()
        with contextlib.suppress(Exception):
            control_plane.request("west", "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{priority_class}")


CONFINED = "federation-agent-confined"  # the release, so its RBAC sits beside the default one's


def _confined_rbac(namespaces: str) -> list[dict[str, Any]]:
    """The agent chart's RBAC with ``rbac.namespaces={namespaces}``."""
    docs = render(AGENT, {**AGENT_VALUES, "rbac.namespaces": f"{{{namespaces}}}"}, release=CONFINED)
    return [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                             "RoleBinding")]


def test_rbac_namespaces_renders_cluster_reads_and_one_writing_role_per_namespace() -> None:
    docs = _confined_rbac("team-a,team-b")
    [cluster_role] = [d for d in docs if d["kind"] == "ClusterRole"]
    verbs = {v for rule in cluster_role["rules"] for v in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}, cluster_role  # nothing written cluster-wide
    assert {r for rule in cluster_role["rules"] for r in rule["resources"]} == {
        "nodes", "pods", "services", "configmaps", "networkpolicies", "hypernodes", "persistentvolumes",
        "storageclasses"}
    writes = {(d["kind"], d["metadata"]["namespace"]) for d in docs
              if d["kind"] in ("Role", "RoleBinding") and d["metadata"]["name"] == f"{CONFINED}-write"}
    assert writes == {(k, ns) for k in ("Role", "RoleBinding") for ns in ("team-a", "team-b")}
    [write] = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "team-a"]
    assert {r for rule in write["rules"] for r in rule["resources"]} == {
        "pods", "pods/binding", "services", "configmaps", "secrets", "deployments", "statefulsets",
        "persistentvolumeclaims", "networkpolicies"}
    # without the value: the writing ClusterRole and no per-namespace Role
    default = render(AGENT, AGENT_VALUES, release=CONFINED)
    assert "create" in {v for d in default if d["kind"] == "ClusterRole" for rule in d["rules"] for v in rule["verbs"]}
    assert not [d for d in default if d["metadata"]["name"] == f"{CONFINED}-write"]


async def test_a_confined_agent_works_in_its_namespaces_and_cannot_create_pods_elsewhere(
        control_plane: ControlPlane) -> None:
    """The chart with ``rbac.namespaces={default}``: the gang runs in default as the agent's
    service account; a pod in kube-system, kube-public or an unlisted namespace is
    forbidden (403) whatever the central service sends."""
    for doc in [NAMESPACE, *_confined_rbac("default")]:
        _create(control_plane, "west", doc)
    api = await client_from_kubeconfig(str(control_plane.kubeconfig("west")))
    api.set_default_header("Impersonate-User", f"system:serviceaccount:federation-system:{CONFINED}")
    backend = KubernetesBackend(api, "west")
    job = gpu_job(unique("confined"), (("worker", 2, 2),), plugins=(("svc", ()),))
    try:
        await _gang_runs(control_plane, backend, job)
        core = core_api(api)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": unique("escape")},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        for namespace in ("kube-system", "kube-public", "federation-system", "team-b"):
            with pytest.raises(ApiError) as denied:
                await call(core.create_namespaced_pod(namespace, pod, _preload_content=False))
            assert denied.value.status == 403, namespace
    finally:
        await cleanup(backend, job.name)
        await backend.close()


@pytest.mark.parametrize("confined", [False, True], ids=["cluster-wide", "rbac-namespaces"])
async def test_the_service_account_checks_and_annotates_a_gangs_claim_and_lists_none(
        control_plane: ControlPlane, confined: bool) -> None:
    """Both RBAC forms: the claim, its class (and a PV) read by name and the selected node
    written as the agent's service account, the claim of the job's spec.volumes made and
    deleted by it; listing claims or PVs is forbidden."""
    docs = [NAMESPACE, *_confined_rbac("default")] if confined else _rbac()
    for doc in docs:
        _create(control_plane, "west", doc)
    account = f"system:serviceaccount:federation-system:{CONFINED}" if confined else SERVICE_ACCOUNT
    api = await client_from_kubeconfig(str(control_plane.kubeconfig("west")))
    api.set_default_header("Impersonate-User", account)
    backend = KubernetesBackend(api, "west")
    claims, classes = "/api/v1/namespaces/default/persistentvolumeclaims", "/apis/storage.k8s.io/v1/storageclasses"
    claim, cls = unique("rbac-data"), unique("rbac-local")
    control_plane.request("west", "POST", classes, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": cls},
        "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"})
    control_plane.request("west", "POST", claims, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
        "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    template = json.dumps({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}},
                          sort_keys=True, separators=(",", ":"))
    job = gpu_job(unique("rbac-claim"), (("worker", 2, 2),), plugins=(("svc", ()),))
    # and a claim the agent makes for the job's spec.volumes (create, then delete, as the account)
    job = replace(job, tasks=(replace(job.tasks[0], template_json=template),),
                  volumes=(JobVolume("/scratch", claim=ClaimSpec(("ReadWriteOnce",), 1 << 30, cls)),))
    made = f"{job.name}-pvc-0"
    try:
        await _gang_runs(control_plane, backend, job)
        for name in (claim, made):
            assert ANNOTATION_SELECTED_NODE in control_plane.request("west", "GET", f"{claims}/{name}")["metadata"][
                "annotations"]
        assert await backend.delete_claim("default", made, job.name)
        assert await backend.read_volume(unique("no-such-pv")) is None  # get on persistentvolumes: a 404, not a 403
        core = core_api(api)
        for listing in (core.list_namespaced_persistent_volume_claim("default", _preload_content=False),
                        core.list_persistent_volume(_preload_content=False)):
            with pytest.raises(ApiError) as denied:
                await call(listing)
            assert denied.value.status == 403
    finally:
        await cleanup(backend, job.name)
        await backend.close()
        for path in (f"{claims}/{claim}", f"{claims}/{made}", f"{classes}/{cls}"):
            with contextlib.suppress(Exception):
                control_plane.request("west", "DELETE", path)
