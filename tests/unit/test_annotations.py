"""Volcano's and Kubernetes' scheduling annotations: each one honoured is read, every other
is refused naming the key and "not supported"; the user's own annotations reach the pods
(federation/domain/annotations.py, docs/design/compatibility.md)."""

from __future__ import annotations

import json

import pytest
from test_workloads import GANG, workload

from federation.domain.annotations import check_annotations, in_family, pod_annotations
from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_jobs, load_manifests, load_queues

JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: j
  annotations: {{{job}}}
spec:
  queue: q
  tasks:
  - name: t
    replicas: 1
    template:
      metadata: {{annotations: {{{pod}}}}}
      spec: {{containers: [{{name: c, image: x}}]}}
"""

QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: q, annotations: {{{ann}}}}}
spec: {{weight: 1}}
"""


@pytest.mark.parametrize(("key", "family"), [
    ("volcano.sh/preemptable", True),
    ("scheduling.volcano.sh/queue-name", True),
    ("batch.volcano.sh/job-name", True),
    ("topology.volcano.sh/anything", True),
    ("scheduling.k8s.io/group-name", True),
    ("federation.io/priority", False),
    ("example.com/owner", False),
    ("notvolcano.sh/x", False),
    ("kubectl.kubernetes.io/last-applied-configuration", False),
])
def test_the_family_is_every_volcano_sh_domain_and_scheduling_k8s_io(key: str, family: bool) -> None:
    assert in_family(key) is family


@pytest.mark.parametrize(("job", "pod", "path", "rule"), [
    pytest.param("volcano.sh/preemptable: 'true'", "", "documents[0].metadata.annotations[volcano.sh/preemptable]",
                 "preemptable flag", id="tdm's preemptable (corpus: tdm.md)"),
    pytest.param("volcano.sh/sla-waiting-time: 3m", "",
                 "documents[0].metadata.annotations[volcano.sh/sla-waiting-time]",
                 "sla plugin", id="sla (corpus: sla.md)"),
    pytest.param("scheduling.volcano.sh/queue-name: q", "",
                 "documents[0].metadata.annotations[scheduling.volcano.sh/queue-name]", "spec.queue",
                 id="a Job's queue is its field"),
    pytest.param("volcano.sh/network-topology-mode: hard", "",
                 "documents[0].metadata.annotations[volcano.sh/network-topology-mode]", "spec.networkTopology",
                 id="a Job's topology is its field"),
    pytest.param("volcano.sh/made-up: x", "", "documents[0].metadata.annotations[volcano.sh/made-up]",
                 "does not read this", id="any other key of the family"),
    pytest.param("", "volcano.sh/numa-topology-policy: single-numa-node",
                 "documents[0].spec.tasks[0].template.metadata.annotations[volcano.sh/numa-topology-policy]",
                 "numa-aware", id="pod template: numa-aware (corpus)"),
    pytest.param("", "volcano.sh/resource-strategy-weight: '{\"nvidia.com/gpu\": 2}'",
                 "documents[0].spec.tasks[0].template.metadata.annotations[volcano.sh/resource-strategy-weight]",
                 "resource-strategy-fit", id="pod template: resource-strategy-fit (corpus)"),
    pytest.param("", "scheduling.k8s.io/group-name: pg",
                 "documents[0].spec.tasks[0].template.metadata.annotations[scheduling.k8s.io/group-name]",
                 "no PodGroup", id="pod template: a PodGroup link"),
])
def test_a_volcano_annotation_on_a_job_is_refused_naming_it(job: str, pod: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_jobs(JOB.format(job=job, pod=pod))
    assert info.value.path == path
    assert info.value.rule.startswith("not supported") and rule in info.value.rule


def test_a_jobs_own_annotations_reach_its_pods_under_the_templates() -> None:
    job = load_manifests(JOB.format(
        job="team.example.com/cost-centre: ml, shared: job, federation.io/priority: '5', "
            "kubectl.kubernetes.io/last-applied-configuration: '{}'",
        pod="shared: pod, prometheus.io/scrape: 'true'")).job
    template = json.loads(job.tasks[0].template_json)
    assert template["metadata"]["annotations"] == {
        "team.example.com/cost-centre": "ml", "shared": "pod", "prometheus.io/scrape": "true"}
    assert job.priority == 5  # ours is read, not copied


def test_a_job_without_annotations_keeps_its_template_as_written() -> None:
    job = load_manifests(JOB.format(job="", pod="")).job
    assert json.loads(job.tasks[0].template_json)["metadata"] == {"annotations": {}}


def test_a_workload_honours_its_four_volcano_annotations_and_refuses_others() -> None:
    (job,) = load_jobs(workload(template_ann=GANG + ", scheduling.volcano.sh/queue-name: q"))
    assert job.min_available == 4 and job.queue == "q" and job.network_topology is not None
    with pytest.raises(InvalidInput) as info:
        load_jobs(workload(template_ann=GANG + ", volcano.sh/preemptable: 'true'"))
    assert info.value.path == "documents[0].spec.template.metadata.annotations[volcano.sh/preemptable]"
    assert "not supported" in info.value.rule and "honoured here: scheduling.volcano.sh/group-min-member" \
        in info.value.rule
    with pytest.raises(InvalidInput) as info:
        load_jobs(workload(template_ann=GANG, own_ann="scheduling.k8s.io/group-name: pg"))
    assert info.value.path == "documents[0].metadata.annotations[scheduling.k8s.io/group-name]"


@pytest.mark.parametrize(("ann", "rule"), [
    ("volcano.sh/hierarchy: root/a", "spec.parent"),
    ("volcano.sh/nodegroup-resource-limits: x", "does not read this"),
])
def test_a_volcano_annotation_on_a_queue_is_refused_naming_it(ann: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_queues(QUEUE.format(ann=ann))
    assert info.value.path == f"documents[0].metadata.annotations[{ann.split(':')[0]}]"
    assert info.value.rule.startswith("not supported") and rule in info.value.rule


def test_queue_annotations_of_ours_are_still_read() -> None:
    (queue,) = load_queues(QUEUE.format(ann="federation.io/owners: 'a,b'"))
    assert queue.owners == ("a", "b")


def test_the_checks_directly() -> None:
    check_annotations({"a/b": "1", "volcano.sh/x": "2"}, "m", honoured=("volcano.sh/x",))
    assert pod_annotations({"volcano.sh/x": "1", "federation.io/y": "2", "z": "3"}) == {"z": "3"}
