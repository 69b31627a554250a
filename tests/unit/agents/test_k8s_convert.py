"""Kubernetes JSON <-> agent records (agents/k8s/convert.py), with literal objects."""

from __future__ import annotations

import json

import pytest

from agents.core.records import ConfigMapManifest, PodManifest, ServiceManifest
from agents.k8s.convert import (
    config_map_body,
    config_map_record,
    hypernode_spec,
    node_record,
    pod_body,
    pod_record,
    service_body,
    service_record,
    timestamp,
)
from federation.domain.errors import InvalidInput
from federation.domain.nodes import Taint, Toleration
from federation.domain.resources import Resources

GPU = "nvidia.com/gpu"


def test_node_reads_allocatable_readiness_cordon_and_taints() -> None:
    node = node_record({
        "metadata": {"name": "n1", "labels": {"rack": "r1"}},
        "spec": {"unschedulable": True, "taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", GPU: "8", "pods": "110"},
                   "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]},
    })
    assert node.name == "n1" and node.ready and node.unschedulable
    assert node.allocatable.get("cpu") == 96_000 and node.allocatable.gpus == 8
    assert node.taints == (Taint("gpu", "a100", "NoSchedule"),)
    assert node.labels == {"rack": "r1"}


@pytest.mark.parametrize("conditions", [[], [{"type": "Ready", "status": "False"}],
                                        [{"type": "Ready", "status": "Unknown"}]],
                         ids=["no-conditions", "ready-false", "ready-unknown"])
def test_node_without_ready_true_is_not_ready(conditions: list[dict[str, str]]) -> None:
    assert not node_record({"metadata": {"name": "n"}, "status": {"conditions": conditions}}).ready


def test_pod_requests_sum_containers_raise_to_init_and_add_overhead() -> None:
    pod = pod_record({
        "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"resources": {"requests": {"cpu": "1", GPU: "4"}}},
                           {"resources": {"requests": {"cpu": "500m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
            "overhead": {"cpu": "100m"},
        },
        "status": {"phase": "Running", "containerStatuses": [
            {"restartCount": 2, "state": {"running": {"startedAt": "2026-01-01T00:01:00Z"}}}]},
    })
    assert pod.requests == Resources({"cpu": 3100, GPU: 4})
    assert pod.node == "n1" and pod.phase == "Running" and pod.restarts == 2
    assert pod.phase_since == timestamp("2026-01-01T00:01:00Z")


def test_failed_pod_carries_exit_code_reason_and_finish_time() -> None:
    pod = pod_record({
        "metadata": {"name": "p", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:09:00Z"},
        "spec": {},
        "status": {"phase": "Failed", "containerStatuses": [
            {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:05:00Z"}}}]},
    })
    assert (pod.exit_code, pod.reason, pod.deleting) == (137, "OOMKilled", True)
    assert pod.phase_since == timestamp("2026-01-01T00:05:00Z")


def test_evicted_reason_comes_from_the_pod_status() -> None:
    pod = pod_record({"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Evicted"}})
    assert pod.reason == "Evicted" and pod.namespace == "default" and pod.node is None


def _manifest(**kw: object) -> PodManifest:
    base: dict[str, object] = dict(
        name="j-worker-0", namespace="ns", labels={"federation.io/job": "j"}, annotations={"a": "b"},
        requests=Resources({"cpu": 2000, GPU: 8}), env=(("RANK", "0"),), hostname="j-worker-0", subdomain="j",
        tolerations=(Toleration(key="kwok.x-k8s.io/node", operator="Exists", effect="NoSchedule"),),
        config_map_mounts=(("j-hosts", "/etc/volcano"),),
    )
    base.update(kw)
    return PodManifest(**base)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


def test_pod_without_template_gets_a_container_with_requests_and_gpu_limits() -> None:
    body = pod_body(_manifest())
    spec = body["spec"]
    assert "nodeName" not in spec and spec["schedulerName"] == "federation-scheduler"
    assert spec["restartPolicy"] == "Never" and spec["hostname"] == "j-worker-0" and spec["subdomain"] == "j"
    [c] = spec["containers"]
    assert c["resources"] == {"requests": {"cpu": "2", GPU: "8"}, "limits": {GPU: "8"}}
    assert c["env"] == [{"name": "RANK", "value": "0"}]
    assert c["volumeMounts"] == [{"name": "federation-hosts-0", "mountPath": "/etc/volcano", "readOnly": True}]
    assert spec["volumes"] == [{"name": "federation-hosts-0", "configMap": {"name": "j-hosts"}}]
    assert pod_record(body).requests == _manifest().requests  # read-back symmetry


def test_pod_template_is_kept_and_merged() -> None:
    template = {
        "metadata": {"labels": {"app": "train", "federation.io/job": "spoofed"}, "annotations": {"t": "1"}},
        "spec": {
            "nodeName": "sneaky", "restartPolicy": "OnFailure",
            "containers": [{"name": "trainer", "image": "img", "env": [{"name": "RANK", "value": "9"},
                                                                        {"name": "X", "value": "1"}],
                            "resources": {"requests": {GPU: 8, "cpu": "2"}}}],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    body = pod_body(_manifest(template_json=json.dumps(template)))
    meta, spec = body["metadata"], body["spec"]
    assert meta["labels"] == {"app": "train", "federation.io/job": "j"}
    assert meta["annotations"] == {"t": "1", "a": "b"}
    assert "nodeName" not in spec and spec["restartPolicy"] == "OnFailure"
    [c] = spec["containers"]
    assert c["image"] == "img" and c["env"] == [{"name": "X", "value": "1"}, {"name": "RANK", "value": "0"}]
    assert c["resources"]["limits"] == {GPU: 8}
    assert len(spec["tolerations"]) == 1  # the same toleration is not repeated


def test_service_and_config_map_round_trip() -> None:
    svc = ServiceManifest("j", "ns", {"federation.io/job": "j"}, {"h": "1"}, {"federation.io/job": "j"})
    body = service_body(svc)
    assert body["spec"]["clusterIP"] == "None"
    assert service_record(body) == svc
    cm = ConfigMapManifest("j-hosts", "ns", {"federation.io/job": "j"}, {"h": "2"}, {"worker.host": "a\nb"})
    assert config_map_record(config_map_body(cm)) == cm


def test_hypernode_reads_every_selector_kind() -> None:
    spec = hypernode_spec({
        "metadata": {"name": "s0", "resourceVersion": "12", "uid": "x"},
        "spec": {"tier": 2, "tierName": "spine", "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "l0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}},
        ]},
    })
    assert (spec.name, spec.tier, spec.tier_name) == ("s0", 2, "spine")
    assert [m.selector.exact_name or m.selector.regex or dict(m.selector.labels or {}) for m in spec.members] == [
        "l0", "^gpu-[0-9]+$", {"rack": "r1"}]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"tier": "2", "members": []}, "hyperNodes[h].spec.tier"),
        ({"tier": 1, "members": [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "x"}}}]},
         "hyperNodes[h].spec.members[0].selector"),
        ({"tier": 1, "members": [{"type": "Node", "selector": {}}]}, "hyperNodes[h].spec.members[0].selector"),
        ({"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]},
         "hyperNodes[h].spec.members[0].selector.regexMatch.pattern"),
        ({"tier": 1, "members": [{"type": "Node", "selector": {"labelMatch": {"matchExpressions": [{"key": "a"}]}}}]},
         "hyperNodes[h].spec.members[0].selector.labelMatch.matchExpressions"),
        ({"tier": 1, "members": []}, "hyperNodes[h].spec.members"),
    ],
    ids=["tier-not-integer", "regex-on-hypernode-member", "no-selector", "bad-regex", "match-expressions",
         "no-members"],
)
def test_unreadable_hypernode_names_the_field(spec: dict[str, object], path: str) -> None:
    with pytest.raises(InvalidInput) as err:
        hypernode_spec({"metadata": {"name": "h"}, "spec": spec})
    assert err.value.path == path
