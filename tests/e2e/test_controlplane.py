"""Smoke test of the e2e control plane: two real kube-apiservers on one etcd,
kwok-simulated GPU nodes and pods, the HyperNode CRD, and cluster isolation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import eventually
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

HN = ("topology.volcano.sh", "v1alpha1", "hypernodes")
POD_FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
K8S_VERSION = "v1.34.9"
CLUSTERS = ("east", "west")  # started by the control_plane fixture (conftest.py)
FIXTURE_NODE_LABEL = "federation.e2e/cluster"  # put on the fixture's fake GPU nodes


async def _fixture_nodes(api: client.ApiClient, cluster: str) -> list[client.V1Node]:
    nodes = await client.CoreV1Api(api).list_node(label_selector=f"{FIXTURE_NODE_LABEL}={cluster}")
    return sorted(nodes.items, key=lambda n: n.metadata.name)


async def _fixture_node_names(api: client.ApiClient, cluster: str) -> list[str]:
    names = [n.metadata.name for n in await _fixture_nodes(api, cluster)]
    assert len(names) >= 3, f"the control_plane fixture should create >= 3 nodes in {cluster}: {names}"
    return names


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def _pod(name: str, labels: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "smoke", **(labels or {})}),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="busybox:stable",
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        limits={"nvidia.com/gpu": "1"},
                    ),
                )
            ],
            tolerations=[client.V1Toleration(key="kwok.x-k8s.io/node", operator="Exists", effect="NoSchedule")],
        ),
    )


async def _bind(core: client.CoreV1Api, ns: str, pod: str, node: str) -> None:
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # The server answers with a Status, which the generated client cannot
    # deserialise into V1Binding; take the raw response instead.
    resp: Any = await core.create_namespaced_pod_binding(pod, ns, body, _preload_content=False)
    try:  # an aiohttp response (typed as V1Binding by the generated client)
        assert resp.status == 201, await resp.text()
    finally:
        resp.release()


@pytest.mark.asyncio
async def test_both_apiservers_answer(control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    servers = {control_plane[name].server for name in CLUSTERS}
    assert len(servers) == len(CLUSTERS)
    for name in CLUSTERS:
        assert control_plane.request(name, "GET", "/readyz", raw=True).strip() == "ok"
        info = await client.VersionApi(kube_clients[name]).get_code()
        assert info.git_version == K8S_VERSION, info
        assert kube_clients[name].configuration.host == control_plane[name].server


@pytest.mark.asyncio
async def test_fake_gpu_nodes_become_ready(kube_clients: dict[str, ApiClient]) -> None:
    for name in CLUSTERS:
        nodes = await _fixture_nodes(kube_clients[name], name)
        assert len(nodes) >= 3
        for n in nodes:
            ready = [c for c in n.status.conditions or [] if c.type == "Ready"]
            assert ready and ready[0].status == "True", (n.metadata.name, n.status.conditions)
            assert n.status.allocatable["nvidia.com/gpu"] == "8"
            assert n.status.capacity["nvidia.com/gpu"] == "8"
            assert n.status.allocatable["cpu"] == "96"
            assert n.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
            assert any(t.key == "kwok.x-k8s.io/node" and t.effect == "NoSchedule" for t in n.spec.taints)
        # heartbeat-with-lease keeps a Lease per node.
        leases = await client.CoordinationV1Api(kube_clients[name]).list_namespaced_lease("kube-node-lease")
        assert {n.metadata.name for n in nodes} <= {lease.metadata.name for lease in leases.items}


@pytest.mark.asyncio
async def test_bound_pod_becomes_running_and_is_deleted(kube_clients: dict[str, ApiClient]) -> None:
    core = client.CoreV1Api(kube_clients["east"])
    name, node = f"smoke-run-{_suffix()}", (await _fixture_node_names(kube_clients["east"], "east"))[0]
    await core.create_namespaced_pod("default", _pod(name))
    await _bind(core, "default", name, node)

    async def running() -> Any:
        pod = await core.read_namespaced_pod(name, "default")
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        return pod if pod.status.phase == "Running" and ready else None

    pod = await eventually(f"pod {name} Running", running)
    assert pod.spec.node_name == node
    assert pod.status.pod_ip and pod.status.container_statuses[0].state.running

    # pod-delete stage finalises the deletion (no kubelet).
    await core.delete_namespaced_pod(name, "default")

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod(name, "default")
        except ApiException as e:
            return e.status == 404
        return False

    await eventually(f"pod {name} deleted", gone)


@pytest.mark.asyncio
async def test_chaos_labelled_pod_fails(kube_clients: dict[str, ApiClient]) -> None:
    core = client.CoreV1Api(kube_clients["east"])
    name = f"smoke-fail-{_suffix()}"
    await core.create_namespaced_pod("default", _pod(name, labels={POD_FAIL_LABEL: "true"}))
    await _bind(core, "default", name, (await _fixture_node_names(kube_clients["east"], "east"))[1])

    async def failed() -> Any:
        pod = await core.read_namespaced_pod(name, "default")
        return pod if pod.status.phase == "Failed" else None

    pod = await eventually(f"pod {name} Failed", failed)
    term = pod.status.container_statuses[0].state.terminated
    assert term is not None and term.exit_code == 1
    await core.delete_namespaced_pod(name, "default", grace_period_seconds=0)


@pytest.mark.asyncio
async def test_hypernode_crd(control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    s = _suffix()
    east = await _fixture_node_names(kube_clients["east"], "east")
    manifests: list[dict[str, Any]] = [
        {
            "metadata": {"name": f"leaf-a-{s}"},
            "spec": {
                "tier": 1,
                "tierName": "rack",
                "members": [
                    {"type": "Node", "selector": {"exactMatch": {"name": east[0]}}},
                    {"type": "Node", "selector": {"exactMatch": {"name": east[1]}}},
                ],
            },
        },
        {
            "metadata": {"name": f"leaf-b-{s}"},
            "spec": {
                "tier": 1,
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"kubernetes.io/hostname": east[2]}}}}
                ],
            },
        },
        {
            "metadata": {"name": f"spine-{s}"},
            "spec": {
                "tier": 2,
                "tierName": "spine",
                "members": [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": f"^leaf-.*-{s}$"}}}],
            },
            "status": {"nodeCount": 3},
        },
    ]
    stored = control_plane.apply_hypernodes("east", manifests)
    assert [o["metadata"]["name"] for o in stored] == [m["metadata"]["name"] for m in manifests]
    # Applying again replaces instead of failing.
    control_plane.apply_hypernodes("east", manifests[:1])

    custom = client.CustomObjectsApi(kube_clients["east"])
    listed = await custom.list_cluster_custom_object(*HN)
    by_name = {o["metadata"]["name"]: o for o in listed["items"]}
    assert {m["metadata"]["name"] for m in manifests} <= set(by_name)
    assert by_name[f"spine-{s}"]["spec"]["tier"] == 2
    assert by_name[f"spine-{s}"]["status"]["nodeCount"] == 3

    # Created through the async client as well, then patched with merge-patch.
    await custom.create_cluster_custom_object(
        *HN,
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": f"leaf-c-{s}"},
            "spec": {"tier": 1, "members": []},
        },
    )
    await custom.patch_cluster_custom_object(
        *HN, f"leaf-c-{s}", {"spec": {"tierName": "rack"}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # kubernetes_asyncio's generated signatures omit the **kwargs it accepts (_content_type)
    )
    got = await custom.get_cluster_custom_object(*HN, f"leaf-c-{s}")
    assert got["spec"]["tierName"] == "rack"

    # The schema is enforced.
    for bad_spec in (
        {"tier": -1},
        {},  # tier is required
        {"tier": 1, "members": [{"type": "Pod", "selector": {"exactMatch": {"name": "x"}}}]},
        {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": "x"}, "regexMatch": {"pattern": "x"}}}],
        },
    ):
        with pytest.raises(ApiException) as exc:
            await custom.create_cluster_custom_object(
                *HN,
                {
                    "apiVersion": "topology.volcano.sh/v1alpha1",
                    "kind": "HyperNode",
                    "metadata": {"name": f"bad-{_suffix()}"},
                    "spec": bad_spec,
                },
            )
        assert exc.value.status == 422, (bad_spec, exc.value.body)

    for m in [*manifests, {"metadata": {"name": f"leaf-c-{s}"}}]:
        await custom.delete_cluster_custom_object(*HN, m["metadata"]["name"])


@pytest.mark.asyncio
async def test_clusters_do_not_see_each_other(control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    s = _suffix()
    east, west = client.CoreV1Api(kube_clients["east"]), client.CoreV1Api(kube_clients["west"])

    # Nodes are disjoint.
    east_nodes = {n.metadata.name for n in (await east.list_node()).items}
    west_nodes = {n.metadata.name for n in (await west.list_node()).items}
    assert set(await _fixture_node_names(kube_clients["east"], "east")) <= east_nodes
    assert set(await _fixture_node_names(kube_clients["west"], "west")) <= west_nodes
    assert not east_nodes & west_nodes

    # Same object name, different content per cluster.
    cm = f"probe-{s}"
    for name, core in (("east", east), ("west", west)):
        await core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=cm), data={"cluster": name})
        )
    assert (await east.read_namespaced_config_map(cm, "default")).data == {"cluster": "east"}
    assert (await west.read_namespaced_config_map(cm, "default")).data == {"cluster": "west"}

    # Objects created in one cluster are absent from the other.
    only = f"east-only-{s}"
    await east.create_namespaced_pod("default", _pod(only))
    control_plane.apply_hypernodes("east", [{"metadata": {"name": only}, "spec": {"tier": 1}}])
    with pytest.raises(ApiException) as exc:
        await west.read_namespaced_pod(only, "default")
    assert exc.value.status == 404
    with pytest.raises(ApiException) as exc:
        await client.CustomObjectsApi(kube_clients["west"]).get_cluster_custom_object(*HN, only)
    assert exc.value.status == 404
    west_hn = await client.CustomObjectsApi(kube_clients["west"]).list_cluster_custom_object(*HN)
    assert only not in {o["metadata"]["name"] for o in west_hn["items"]}

    await east.delete_namespaced_pod(only, "default", grace_period_seconds=0)
    await client.CustomObjectsApi(kube_clients["east"]).delete_cluster_custom_object(*HN, only)
    for core in (east, west):
        await core.delete_namespaced_config_map(cm, "default")
