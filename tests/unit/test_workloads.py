"""Deployments and StatefulSets with Volcano's gang and topology annotations as jobs
(federation/domain/workloads.py): what is read, what is refused naming the field, and
the wire round trip."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_jobs
from federation.wire.jobs import job_from_proto, job_to_proto


def workload(kind: str = "Deployment", *, replicas: int = 4, template_ann: str = "", own_ann: str = "",
             spec_extra: str = "", pod_extra: str = "") -> str:
    return f"""
apiVersion: apps/v1
kind: {kind}
metadata:
  name: serve
  labels: {{team: a}}
  annotations: {{{own_ann}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: serve}}}}
  {spec_extra}
  template:
    metadata:
      labels: {{app: serve}}
      annotations: {{{template_ann}}}
    spec:
      {pod_extra}
      containers:
        - name: c
          image: nginx
          resources: {{requests: {{nvidia.com/gpu: 2, cpu: 1}}}}
"""


GANG = ('scheduling.volcano.sh/group-min-member: "4", volcano.sh/network-topology-mode: hard, '
        'volcano.sh/network-topology-highest-tier: "1"')


def test_deployment_with_volcano_annotations_is_a_one_task_gang_in_one_hypernode() -> None:
    [job] = load_jobs(workload(template_ann=GANG))
    assert (job.name, job.queue, job.labels) == ("serve", "default", (("team", "a"),))
    [task] = job.tasks
    assert (task.name, task.replicas, task.resources.gpus) == ("pod", 4, 2)
    assert job.gang_size == 4
    assert job.network_topology is not None
    assert (job.network_topology.mode, job.network_topology.highest_tier_allowed) == ("hard", 1)
    assert job.workload is not None and job.workload.kind == "Deployment"
    assert job.workload.body["spec"]["selector"] == {"matchLabels": {"app": "serve"}}


def test_annotations_on_the_workload_itself_are_read_when_the_template_has_none() -> None:
    [job] = load_jobs(workload(own_ann='scheduling.volcano.sh/group-min-member: "2", '
                                       'scheduling.volcano.sh/queue-name: research'))
    assert (job.gang_size, job.queue, job.network_topology) == (2, "research", None)


def test_statefulset_gang_with_parallel_pod_management() -> None:
    [job] = load_jobs(workload("StatefulSet", template_ann=GANG,
                               spec_extra="podManagementPolicy: Parallel\n  serviceName: serve"))
    assert job.workload is not None and job.workload.kind == "StatefulSet"


def test_a_workload_round_trips_over_the_wire() -> None:
    [job] = load_jobs(workload(template_ann=GANG))
    assert job_from_proto(job_to_proto(job)) == job


REFUSED = [
    pytest.param(workload("StatefulSet", template_ann=GANG), "documents[0].spec.podManagementPolicy",
                 "Parallel", id="ordered-statefulset-gang-could-never-start"),
    pytest.param(workload(template_ann='scheduling.volcano.sh/group-min-member: "5"'),
                 "documents[0].spec.template.metadata.annotations[scheduling.volcano.sh/group-min-member]",
                 "must not exceed spec.replicas", id="min-member-above-replicas"),
    pytest.param(workload(template_ann="volcano.sh/network-topology-mode: strict"),
                 "documents[0].spec.template.metadata.annotations[volcano.sh/network-topology-mode]",
                 "hard or soft", id="unknown-topology-mode"),
    pytest.param(workload(own_ann='volcano.sh/network-topology-highest-tier: "one"'),
                 "documents[0].metadata.annotations[volcano.sh/network-topology-highest-tier]",
                 "integer", id="tier-not-a-number"),
    pytest.param(workload(pod_extra="nodeName: n1"), "documents[0].spec.template.spec.nodeName",
                 "not supported", id="node-name-is-ours-to-choose"),
    pytest.param(workload(pod_extra="schedulerName: default-scheduler"),
                 "documents[0].spec.template.spec.schedulerName", "not supported", id="another-scheduler"),
    pytest.param(workload(replicas=0), "documents[0].spec.replicas", "must be >= 1", id="scaled-to-zero"),
]


@pytest.mark.parametrize(("text", "path", "rule"), REFUSED)
def test_workloads_we_cannot_honour_are_refused(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_jobs(text)
    assert info.value.path == path
    assert rule in info.value.rule


def test_a_wire_workload_must_be_an_object_of_its_kind() -> None:
    [job] = load_jobs(workload(template_ann=GANG))
    msg = job_to_proto(job)
    msg.workload.body_json = json.dumps({"kind": "StatefulSet", "spec": {}})
    with pytest.raises(InvalidInput) as info:
        job_from_proto(msg)
    assert info.value.path == "spec.workload.bodyJson"


@pytest.mark.parametrize(("change", "path"), [
    pytest.param(lambda m: setattr(m, "max_retry", 7), "spec.maxRetry", id="job-max-retry"),
    pytest.param(lambda m: setattr(m.tasks[0], "max_retry", 2), "spec.tasks[0].maxRetry", id="task-max-retry"),
    pytest.param(lambda m: m.tasks[0].policies.add(events=["PodFailed"], action="RestartJob"),
                 "spec.tasks[0].policies", id="task-policies"),
])
def test_a_wire_workload_with_a_restart_budget_or_policy_is_refused(change: Callable[[Any], object],
                                                                   path: str) -> None:
    # Its controller restarts the pods and the agent keeps no retries for it: accepted,
    # these would be silently dropped.
    [job] = load_jobs(workload(template_ann=GANG))
    msg = job_to_proto(job)
    change(msg)
    with pytest.raises(InvalidInput) as info:
        job_from_proto(msg)
    assert info.value.path == path
    assert "not supported for a Deployment or StatefulSet" in info.value.rule
