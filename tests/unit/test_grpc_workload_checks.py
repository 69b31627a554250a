"""A job sent over gRPC meets the same rules as one applied from YAML: a workload's body
(``spec.workload.bodyJson``) is checked like a manifest's Deployment/StatefulSet, its pod
template is the task's and passes the queue's Pod Security level, and a task's resources
are what its template's containers request (federation/domain/workloads.py,
federation/domain/pod_requests.py, federation/service/admission.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_jobs
from federation.domain.queues import Queue
from federation.service.admission import admit
from federation.v1 import types_pb2
from federation.wire.jobs import job_from_proto, job_to_proto
from federation.wire.limits import Limits

CONTAINER = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}


def _template(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "serve"}}, "spec": {"containers": [CONTAINER], **spec}}


def _workload(kind: str = "Deployment", template: dict[str, Any] | None = None, annotations: dict[str, str] | None
              = None, **spec: Any) -> types_pb2.Workload:
    body = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"annotations": annotations or {}},
            "spec": {"replicas": 2, "template": template if template is not None else _template(), **spec}}
    return types_pb2.Workload(kind=kind, body_json=json.dumps(body))


def _spec(workload: types_pb2.Workload | None = None, *, template: dict[str, Any] | None = None,
          resources: dict[str, str] | None = None, min_available: int | None = None) -> types_pb2.JobSpec:
    task = types_pb2.TaskSpec(name="pod", replicas=2, resources={"cpu": "1"} if resources is None else resources,
                              template_json=json.dumps(template) if template is not None else "")
    msg = types_pb2.JobSpec(name="serve", queue="team", tasks=[task])
    if workload is not None:
        msg.workload.CopyFrom(workload)
    if min_available is not None:
        msg.min_available = min_available
    return msg


def _refused(msg: types_pb2.JobSpec) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        admit(job_from_proto(msg), msg, Queue("team"), Limits())
    return info.value


REFUSED = [
    pytest.param(_spec(_workload(template=_template(hostNetwork=True))),
                 "spec.workload.bodyJson.spec.template.spec.hostNetwork", "baseline", id="host-network-in-the-body"),
    pytest.param(_spec(_workload(template=_template(volumes=[{"name": "root", "hostPath": {"path": "/"}}]))),
                 "spec.workload.bodyJson.spec.template.spec.volumes[0].hostPath", "baseline", id="host-path-volume"),
    pytest.param(_spec(_workload(template=_template(containers=[{**CONTAINER, "securityContext": {
        "privileged": True}}]))), "spec.workload.bodyJson.spec.template.spec.containers[0].securityContext"
                                  ".privileged", "baseline", id="privileged-container"),
    pytest.param(_spec(_workload(template=_template(nodeName="n1"))),
                 "spec.workload.bodyJson.spec.template.spec.nodeName", "not supported", id="node-name-is-ours"),
    pytest.param(_spec(_workload(template=_template(schedulerName="default-scheduler"))),
                 "spec.workload.bodyJson.spec.template.spec.schedulerName", "not supported", id="another-scheduler"),
    pytest.param(_spec(_workload(annotations={"volcano.sh/preemptable": "true"})),
                 "spec.workload.bodyJson.metadata.annotations[volcano.sh/preemptable]", "not supported",
                 id="unknown-volcano-annotation"),
    pytest.param(_spec(_workload(annotations={"scheduling.volcano.sh/group-min-member": "3"})),
                 "spec.workload.bodyJson.metadata.annotations[scheduling.volcano.sh/group-min-member]",
                 "must not exceed spec.replicas", id="min-member-above-replicas"),
    pytest.param(_spec(_workload("StatefulSet"), min_available=2),
                 "spec.workload.bodyJson.spec.podManagementPolicy", "Parallel", id="ordered-statefulset-gang"),
    pytest.param(_spec(_workload(), template=_template(nodeSelector={"gpu": "h100"})),
                 "spec.tasks[0].template", "the workload's pod template", id="task-template-is-not-the-body's"),
    pytest.param(_spec(_workload(), resources={"cpu": "100m"}), "spec.tasks[0].resources",
                 "containers request (cpu: 1)", id="body-requests-more-than-counted"),
    pytest.param(_spec(template=_template(containers=[{**CONTAINER, "resources": {
        "requests": {"nvidia.com/gpu": "8", "cpu": "64"}}}]), resources={"cpu": "100m"}),
                 "spec.tasks[0].resources", "cpu: 64, nvidia.com/gpu: 8", id="template-requests-more-than-counted"),
    pytest.param(_spec(template=_template(containers=[{**CONTAINER, "resources": {"limits": {"nvidia.com/gpu": "8"}}}]),
                       resources={"cpu": "1"}),
                 "spec.tasks[0].resources", "nvidia.com/gpu: 8", id="a-limit-is-a-request"),
    pytest.param(_spec(template=_template(containers=[{**CONTAINER, "resources": {"requests": {"cpu": "lots"}}}])),
                 "spec.tasks[0].template.spec.containers[0].resources.requests.cpu", "", id="malformed-request"),
    pytest.param(_spec(types_pb2.Workload(kind="Deployment", body_json="[" * 5000)), "spec.workload.bodyJson",
                 "nested too deep", id="body-deeper-than-the-interpreter"),
    pytest.param(_spec(types_pb2.Workload(kind="Deployment", body_json='{"a":' * 200 + "1" + "}" * 200)),
                 "spec.workload.bodyJson", "over the limit", id="body-deeper-than-the-limit"),
    pytest.param(_spec(types_pb2.Workload(kind="Deployment", body_json="[]")), "spec.workload.bodyJson",
                 "a Deployment", id="body-not-an-object"),
]


@pytest.mark.parametrize(("msg", "path", "rule"), REFUSED)
def test_what_yaml_refuses_grpc_refuses_naming_the_field(msg: types_pb2.JobSpec, path: str, rule: str) -> None:
    err = _refused(msg)
    assert (err.path, rule in err.rule) == (path, True), err.rule


def test_a_workload_task_without_a_template_takes_the_body_template() -> None:
    msg = _spec(_workload())
    job = admit(job_from_proto(msg), msg, Queue("team"), Limits())
    assert job.workload is not None and job.tasks[0].template_json == job.workload.template_json
    assert json.loads(job.tasks[0].template_json) == _template()
    assert job_from_proto(job_to_proto(job)) == job


ALLOWED = [
    pytest.param(_template(containers=[{"name": "c", "image": "nginx"}]), {"nvidia.com/gpu": "8"},
                 id="containers-requesting-nothing-get-the-task's-resources"),
    pytest.param(_template(), {"cpu": "1000m"}, id="same-amount-other-spelling"),
    pytest.param(_template(containers=[{**CONTAINER, "resources": {"limits": {"cpu": "2"}}}]), {"cpu": "2"},
                 id="limit-only-defaults-the-request"),
    pytest.param(_template(initContainers=[{"name": "warm", "image": "x", "resources": {"requests": {"cpu": "3"}}}]),
                 {"cpu": "3"}, id="raised-to-the-init-peak"),
    pytest.param(_template(initContainers=[{"name": "proxy", "image": "x", "restartPolicy": "Always",
                                            "resources": {"requests": {"cpu": "1"}}}]),
                 {"cpu": "2"}, id="a-sidecar-adds-up"),
]


@pytest.mark.parametrize(("template", "resources"), ALLOWED)
def test_a_task_counting_what_its_pod_requests_is_admitted(template: dict[str, Any], resources: dict[str, str]) -> None:
    msg = _spec(template=template, resources=resources)
    admit(job_from_proto(msg), msg, Queue("team"), Limits())


def test_a_parallel_statefulset_gang_and_a_privileged_queue_pass() -> None:
    msg = _spec(_workload("StatefulSet", template=_template(hostNetwork=True), podManagementPolicy="Parallel"),
                min_available=2)
    job = admit(job_from_proto(msg), msg, Queue("team", pod_security="privileged"), Limits())
    assert job.gang_size == 2


YAML_DEPLOYMENT = """
apiVersion: apps/v1
kind: %s
metadata: {name: serve}
spec:
  replicas: 2
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      initContainers: [{name: proxy, image: x, restartPolicy: Always, resources: {requests: {cpu: 500m}}}]
      containers: [{name: c, image: nginx, resources: {limits: {nvidia.com/gpu: 2}, requests: {cpu: 1}}}]
"""


def test_the_yaml_path_still_passes_and_round_trips_over_the_wire() -> None:
    [job] = load_jobs(YAML_DEPLOYMENT % "Deployment")
    assert dict(job.tasks[0].resources.to_quantities()) == {"cpu": "1500m", "nvidia.com/gpu": "2"}
    assert job.workload is not None and job.tasks[0].template_json == job.workload.template_json
    msg = job_to_proto(job)
    assert admit(job_from_proto(msg), msg, Queue("team"), Limits()).tasks == job.tasks


def test_a_yaml_statefulset_whose_gang_is_all_its_replicas_needs_parallel() -> None:
    with pytest.raises(InvalidInput) as info:
        load_jobs(YAML_DEPLOYMENT % "StatefulSet")
    assert info.value.path == "documents[0].spec.podManagementPolicy"


@pytest.mark.parametrize(("msg", "path", "rule"), [
    pytest.param(_spec(_workload(replicas=3)), "spec.tasks[0].replicas", "spec.replicas (3)", id="replicas"),
    pytest.param(_spec(_workload(annotations={"scheduling.volcano.sh/group-min-member": "2"})), "spec.minAvailable",
                 "group-min-member annotation (2)", id="min-member"),
    pytest.param(_spec(_workload(annotations={"volcano.sh/network-topology-mode": "hard",
                                              "volcano.sh/network-topology-highest-tier": "1"})),
                 "spec.networkTopology", "mode hard, highest tier 1", id="topology"),
    pytest.param(_spec(_workload(annotations={"scheduling.volcano.sh/queue-name": "other"})), "spec.queue",
                 "queue-name annotation ('other')", id="queue"),
])
def test_a_job_must_say_what_its_workload_body_says(msg: types_pb2.JobSpec, path: str, rule: str) -> None:
    """Over gRPC the body travels beside the job's own fields: the planner reads the job, the
    member cluster's controller the body, so they may not differ."""
    with pytest.raises(InvalidInput) as info:
        job_from_proto(msg)
    assert info.value.path == path and rule in info.value.rule
    ok = _spec(_workload(annotations={"scheduling.volcano.sh/group-min-member": "2"}), min_available=2)
    assert job_from_proto(ok).min_available == 2
