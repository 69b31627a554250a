"""The opt-in topology wait and node constraints as a Volcano Job / Queue manifest carries them."""

from __future__ import annotations

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_jobs, load_queues

JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: train
  annotations: {ANNOTATIONS}
spec:
  queue: q
  minAvailable: 2
  networkTopology: {mode: soft, highestTierAllowed: 1}
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
          affinity: {AFFINITY}
          containers:
            - name: c
              image: x
              resources: {requests: {nvidia.com/gpu: 8}}
"""

QUEUE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: patient
  annotations: {ANNOTATIONS}
spec:
  weight: 1
"""


def job(annotations: str = "{}", affinity: str = "{}") -> str:
    return JOB.replace("{ANNOTATIONS}", annotations).replace("{AFFINITY}", affinity)


def test_the_job_annotation_sets_its_own_wait() -> None:
    (parsed,) = load_jobs(job('{"federation.io/topology-wait": "1h30m"}'))
    assert parsed.topology_wait_seconds == 5400.0
    (plain,) = load_jobs(job())
    assert plain.topology_wait_seconds is None


def test_the_queue_annotation_sets_its_default() -> None:
    (parsed,) = load_queues(QUEUE.replace("{ANNOTATIONS}", '{"federation.io/topology-wait": "2h"}'))
    assert parsed.topology_wait_seconds == 7200.0


@pytest.mark.parametrize(("value", "rule"), [("soon", "malformed duration"), ("800h", "between 0 and 30 days")])
def test_a_bad_wait_names_the_annotation(value: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_jobs(job(f'{{"federation.io/topology-wait": "{value}"}}'))
    assert err.value.path == "documents[0].metadata.annotations[federation.io/topology-wait]"
    assert rule in err.value.rule
    with pytest.raises(InvalidInput) as err:
        load_queues(QUEUE.replace("{ANNOTATIONS}", f'{{"federation.io/topology-wait": "{value}"}}'))
    assert err.value.path == "documents[0].metadata.annotations[federation.io/topology-wait]"


def test_the_node_selector_of_the_template_reaches_the_task() -> None:
    (parsed,) = load_jobs(job())
    assert parsed.node_constraints[0].selector == (("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),)


def test_pod_affinity_in_a_template_is_refused_with_its_path() -> None:
    with pytest.raises(InvalidInput) as err:
        load_jobs(job(affinity='{podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: []}}'))
    assert err.value.path == "documents[0].spec.tasks[0].template.spec.affinity.podAffinity"
    assert "not supported" in err.value.rule


@pytest.mark.parametrize("key", ["volcano.sh/hierarchy", "volcano.sh/hierarchy-weights"])
def test_volcano_hierarchy_annotations_are_refused_for_spec_parent(key: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_queues(QUEUE.replace("{ANNOTATIONS}", f'{{"{key}": "root/eng"}}'))
    assert err.value.path == f"documents[0].metadata.annotations[{key}]"
    assert "spec.parent" in err.value.rule


def test_parent_root_is_the_implicit_root() -> None:
    (parsed,) = load_queues(QUEUE.replace("{ANNOTATIONS}", "{}").replace("weight: 1", "weight: 1\n  parent: root"))
    assert parsed.parent is None
