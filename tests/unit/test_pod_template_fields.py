"""Pod template fields of real manifests: each is honoured or refused naming it, never
dropped (nodeName, schedulerName, fractional devices, requests over limits, sidecars,
non-string labels) and cluster tolerations and spread constraints as Karmada reads them."""

from __future__ import annotations

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_manifests
from federation.domain.nodes import Taint, Toleration
from federation.domain.propagation import SpreadConstraint
from federation.domain.resources import GPU, Resources, parse_quantity, pod_request

JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  queue: q
  tasks:
  - name: w
    replicas: 1
    template:
      metadata: {{labels: {{app: w}}}}
      spec:
        {pod}
        containers:
        - name: c
          image: x
          resources: {resources}
        {init}
"""


def job(pod: str = "", resources: str = "{requests: {cpu: '1'}}", init: str = "") -> str:
    return JOB.format(pod=pod, resources=resources, init=init)


@pytest.mark.parametrize(("text", "path", "rule"), [
    pytest.param(job(pod="nodeName: node-7"), "documents[0].spec.tasks[0].template.spec.nodeName",
                 "the federation binds the pods", id="nodeName"),
    pytest.param(job(pod="schedulerName: default-scheduler"),
                 "documents[0].spec.tasks[0].template.spec.schedulerName", "not supported", id="another-scheduler"),
    pytest.param(job(resources="{requests: {nvidia.com/gpu: '0.5'}, limits: {nvidia.com/gpu: '0.5'}}"),
                 "documents[0].spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu",
                 "not a whole number", id="half-a-gpu"),
    pytest.param(job(resources="{limits: {nvidia.com/gpu: 500m}}"),
                 "documents[0].spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu",
                 "not a whole number", id="500m-gpu"),
    pytest.param(job(resources="{requests: {cpu: '4'}, limits: {cpu: '2'}}"),
                 "documents[0].spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
                 "must not exceed the limit (4 > 2)", id="requests-over-limits"),
    pytest.param(job(resources="{requests: {nvidia.com/gpu: '4'}, limits: {nvidia.com/gpu: '8'}}"),
                 "documents[0].spec.tasks[0].template.spec.containers[0].resources.requests.nvidia.com/gpu",
                 "cannot be overcommitted", id="gpu-requests-below-limits"),
    pytest.param(job(init="initContainers: [{name: i, image: x, restartPolicy: OnFailure}]"),
                 "documents[0].spec.tasks[0].template.spec.initContainers[0].restartPolicy",
                 "may only be Always", id="init-restart-policy"),
    pytest.param(job(pod="nodeSelector: {gpu: true}"),
                 "documents[0].spec.tasks[0].template.spec.nodeSelector.gpu", "must be a string, got bool",
                 id="boolean-node-selector"),
    pytest.param(job(pod="tolerations: [{effect: NoSchedule}]"),
                 "documents[0].spec.tasks[0].template.spec.tolerations[0].operator", "must be Exists when key is empty",
                 id="pod-toleration-empty-key-equal"),
])
def test_a_pod_field_the_member_cluster_would_not_honour_is_refused(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_manifests(text)
    assert err.value.path == path and rule in err.value.rule


def test_volcano_and_our_scheduler_names_are_accepted() -> None:
    for name in ("volcano", "federation-scheduler"):
        assert load_manifests(job(pod=f"schedulerName: {name}")).job is not None


def test_sidecars_add_to_the_containers_and_init_containers_raise_to_their_peak() -> None:
    init = ("initContainers: [{name: s, image: x, restartPolicy: Always, resources: {requests: {cpu: '2'}}}, "
            "{name: i, image: x, resources: {requests: {cpu: '3'}}}]")
    [task] = load_manifests(job(init=init)).job.tasks
    assert task.resources == Resources({"cpu": 5000})  # the init container runs beside the sidecar: 2 + 3
    sidecar_only = "initContainers: [{name: s, image: x, restartPolicy: Always, resources: {requests: {cpu: '2'}}}]"
    [task] = load_manifests(job(init=sidecar_only)).job.tasks
    assert task.resources == Resources({"cpu": 3000})  # the container's 1 plus the sidecar's 2


@pytest.mark.parametrize(("containers", "inits", "expected"), [
    ([1000], [], 1000),
    ([1000], [(3000, False)], 3000),
    ([1000], [(2000, True)], 3000),
    ([1000], [(500, True), (3000, False)], 3500),
    ([1000], [(3000, False), (500, True)], 3000),
    ([1000, 1000], [(500, True), (500, True), (1000, False)], 3000),
])
def test_pod_request_follows_kubernetes(containers: list[int], inits: list[tuple[int, bool]], expected: int) -> None:
    got = pod_request([Resources({"cpu": c}) for c in containers], [(Resources({"cpu": c}), s) for c, s in inits])
    assert got == Resources({"cpu": expected})


@pytest.mark.parametrize(("resource", "value", "expected"), [
    (GPU, "2", 2), (GPU, "2.0", 2), (GPU, "1k", 1000), ("memory", "500m", 1), ("cpu", "0.5", 500),
    ("example.kubernetes.io/thing", "0.5", 1),
])
def test_whole_devices_and_native_fractions(resource: str, value: str, expected: int) -> None:
    assert parse_quantity(resource, value, "x") == expected


@pytest.mark.parametrize("value", ["0.5", "500m", "1e-70", "1.5"])
def test_a_fraction_of_an_extended_resource_is_refused(value: str) -> None:
    with pytest.raises(InvalidInput, match="not a whole number"):
        parse_quantity("rdma/hca", value, "x")


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [
    (Toleration(effect="NoSchedule"), Taint("dedicated", "", "NoSchedule"), True),  # Karmada's own example
    (Toleration(effect="NoSchedule"), Taint("dedicated", "gpu", "NoSchedule"), False),  # Equal: values differ
    (Toleration(effect="NoSchedule"), Taint("dedicated", "", "NoExecute"), False),
    (Toleration(operator="Exists"), Taint("dedicated", "gpu", "NoExecute"), True),
    (Toleration("dedicated", "Equal", "gpu"), Taint("dedicated", "gpu", "NoSchedule"), True),
    (Toleration("dedicated", "Equal", "gpu"), Taint("other", "gpu", "NoSchedule"), False),
    (Toleration("dedicated", "Exists", effect="NoExecute"), Taint("dedicated", "x", "NoExecute"), True),
])
def test_tolerations_match_as_kubernetes_tolerates_taint(toleration: Toleration, taint: Taint,
                                                          tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


@pytest.mark.parametrize("field", ["region", "zone", "provider"])
def test_spread_by_a_cluster_property_clusters_do_not_report_is_refused(field: str) -> None:
    with pytest.raises(InvalidInput, match="report no region, zone or provider") as err:
        SpreadConstraint(spread_by_field=field, max_groups=1)
    assert err.value.path == "spreadByField"
    assert SpreadConstraint(spread_by_field="cluster", max_groups=1).spread_by_field == "cluster"


INLINE = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: trainer, labels: {team: b}}
spec:
  queue: q
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p}
spec:
  resourceSelectors: [{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, labelSelector: {matchLabels: {team: SEL}}}]
  placement: {clusterAffinity: {clusterNames: [west]}}
"""


def test_an_inline_policy_must_select_its_job_by_labels_too() -> None:
    assert load_manifests(INLINE.replace("SEL", "b")).propagation is not None
    with pytest.raises(InvalidInput, match="does not select the Job trainer") as err:
        load_manifests(INLINE.replace("SEL", "a"))
    assert err.value.path == "documents[1].spec.resourceSelectors"
