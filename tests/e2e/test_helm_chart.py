"""deploy/chart/ with a real helm (helm.sh/helm/v3 built from its Go module): lint, template,
install of both charts into a real kube-apiserver (helm validates against the server's
OpenAPI schema, then the apiserver validates each object it creates), and the rendered
readiness probe checked against a running server with grpc-health-probe."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane

from federation.service.server import build_server
from federation.store import Store
from federation.store import migrate as migrations
from tests.fixtures.gotools import arun_tool
from tests.fixtures.helm import AGENT, AGENT_VALUES, CENTRAL, CENTRAL_VALUES, helm, one, render, sets

pytestmark = pytest.mark.e2e


def _container(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    containers: list[dict[str, Any]] = one(docs, kind)["spec"]["template"]["spec"]["containers"]
    return containers[0]


def test_both_charts_lint_clean() -> None:
    for chart, values in ((CENTRAL, CENTRAL_VALUES), (AGENT, AGENT_VALUES)):
        proc = helm("lint", "--strict", str(chart), *sets(values))
        assert "0 chart(s) failed" in proc.stdout


def test_central_chart_renders_leader_elected_replicas_tls_tokens_metrics_and_the_migration_hook() -> None:
    docs = render(CENTRAL, {**CENTRAL_VALUES, "tls.enabled": "true", "tls.secretName": "central-tls",
                            "tls.requireClientCerts": "true", "auditRetention": "30d"})
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    central = _container(docs, "Deployment")
    args = central["args"]
    assert {"--leader-election", "--lease-seconds=15", "--metrics-listen=0.0.0.0:9090", "--log-format=json",
            "--no-migrate", "--audit-retention=30d", "--tls-cert=/etc/federation/tls/tls.crt",
            "--tls-client-ca=/etc/federation/tls/ca.crt"} <= set(args)
    assert central["readinessProbe"]["grpc"] == {"port": 50052}  # TLS: the plaintext health-only port
    assert {p["name"]: p["containerPort"] for p in central["ports"]} == {"grpc": 50051, "health": 50052,
                                                                      "metrics": 9090}
    assert central["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    job = one(docs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert _container(docs, "Job")["command"] == ["federation", "db", "upgrade"]
    db_secret = one(docs, "Secret", "federation-db")
    assert db_secret["metadata"]["annotations"]["helm.sh/hook-weight"] == "-10"  # before the Job reads it
    assert one(docs, "Secret", "federation-tokens")["stringData"]["tokens.yaml"]
    assert not [d for d in docs if d["kind"] == "ServiceMonitor"]  # off by default

    monitored = render(CENTRAL, {**CENTRAL_VALUES, "serviceMonitor.enabled": "true"})
    monitor = one(monitored, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    metrics_service = one(monitored, "Service", "federation-metrics")
    assert metrics_service["spec"]["publishNotReadyAddresses"] is True

    single = render(CENTRAL, {**CENTRAL_VALUES, "replicas": "1", "leaderElection.enabled": "false",
                              "metrics.enabled": "false"})
    assert one(single, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert not [a for a in _container(single, "Deployment")["args"] if a.startswith(("--leader", "--metrics"))]
    refused = helm("template", "x", str(CENTRAL), *sets({**CENTRAL_VALUES, "leaderElection.enabled": "false"}),
                   check=False)
    assert refused.returncode != 0 and "replicas > 1 needs leaderElection.enabled" in refused.stderr


def test_agent_chart_renders_one_cluster_with_its_token_and_the_crd_only_when_asked_or_absent() -> None:
    docs = render(AGENT, AGENT_VALUES, release="federation-agent")
    agent = _container(docs, "DaemonSet")
    assert {"--cluster=east", "--server=federation-central.federation-system:50051",
            "--token-file=/var/run/federation/token/token", "--metrics-listen=0.0.0.0:9091"} <= set(agent["args"])
    assert one(docs, "Secret")["stringData"]["token"] == "t"
    assert one(docs, "CustomResourceDefinition")["metadata"]["name"] == "hypernodes.topology.volcano.sh"
    assert not [d for d in render(AGENT, {**AGENT_VALUES, "hypernodeCRD": "false"})
                if d["kind"] == "CustomResourceDefinition"]
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == "federation-system"
    assert [r["resources"] for r in role["rules"]] == [["leases"]]
    missing = helm("template", "x", str(AGENT), *sets({"server": "s:1", "token.value": "t"}), check=False)
    assert missing.returncode != 0 and "clusterName is required" in missing.stderr


def test_helm_installs_both_charts_into_a_real_apiserver(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    west, east = str(control_plane.kubeconfig("west")), str(control_plane.kubeconfig("east"))
    helm("install", "federation", str(CENTRAL), "--kubeconfig", west, "--namespace", "federation-central-e2e",
         "--create-namespace", "--no-hooks", *sets(CENTRAL_VALUES))
    # --no-hooks: this control plane runs no kube-controller-manager, so the migration Job
    # would never complete; the hook documents are validated by the apiserver instead.
    hooks = [d for d in render(CENTRAL, CENTRAL_VALUES, namespace="federation-central-e2e")
             if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    assert {d["kind"] for d in hooks} == {"Job", "Secret"}
    for doc in hooks:
        path = {"Job": "/apis/batch/v1/namespaces/federation-central-e2e/jobs",
                "Secret": "/api/v1/namespaces/federation-central-e2e/secrets"}[doc["kind"]]
        control_plane.request("west", "POST", path + "?dryRun=All", doc)
    deployment = control_plane.request("west", "GET",
                                       "/apis/apps/v1/namespaces/federation-central-e2e/deployments/federation")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["port"] == 50051
    status = helm("status", "federation", "--kubeconfig", west, "--namespace", "federation-central-e2e")
    assert "STATUS: deployed" in status.stdout

    # One agent release per member cluster; east already has the HyperNode CRD (the
    # control plane installs Volcano's definition), so the chart leaves it out.
    helm("install", "federation-agent", str(AGENT), "--kubeconfig", east, "--namespace", "federation-agent-e2e",
         "--create-namespace", *sets(AGENT_VALUES))
    manifest = helm("get", "manifest", "federation-agent", "--kubeconfig", east, "--namespace",
                    "federation-agent-e2e").stdout
    assert "kind: DaemonSet" in manifest and "kind: CustomResourceDefinition" not in manifest
    control_plane.request("east", "GET", "/apis/apps/v1/namespaces/federation-agent-e2e/daemonsets/federation-agent")
    helm("uninstall", "federation-agent", "--kubeconfig", east, "--namespace", "federation-agent-e2e")
    helm("uninstall", "federation", "--kubeconfig", west, "--namespace", "federation-central-e2e")


async def test_the_rendered_probes_pass_against_a_running_server(
        tmp_path: Path) -> None:
    """What the kubelet would ask, asked by grpc-health-probe of a real server."""
    central = _container(render(CENTRAL, CENTRAL_VALUES), "Deployment")
    ports = {p["name"]: p["containerPort"] for p in central["ports"]}
    readiness, liveness = central["readinessProbe"]["grpc"], central["livenessProbe"]["grpc"]
    assert readiness["port"] == liveness["port"] == ports["grpc"]
    url = f"sqlite:///{tmp_path / 'federation.db'}"
    await asyncio.to_thread(migrations.upgrade, url)
    store = Store(url)
    server = await build_server(store)
    try:
        for probe in (readiness, liveness):
            proc = await arun_tool("grpc-health-probe", f"-addr=127.0.0.1:{server.port}",
                                   f"-service={probe.get('service', '')}")
            assert proc.returncode == 0 and "SERVING" in proc.stdout + proc.stderr, (probe, proc.stderr)
    finally:
        await server.stop(grace=1.0)
        store.dispose()
