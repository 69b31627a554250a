"""A job whose manifest names no namespace lands in its queue's default namespace (issue 10).

Every way a job enters (a Volcano Job for ``submit``/``apply``, a JobFlow's jobs from its
JobTemplates, a Deployment or StatefulSet with Volcano's annotations) parses to
``QUEUE_DEFAULT_NAMESPACE``, crosses the wire as proto3 ``""``, and admission gives it the
queue's ``default_namespace``: never Kubernetes' ``default``, which the queue may not allow.
"""

from __future__ import annotations

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_jobs, load_manifests
from federation.domain.manifests_fields import QUEUE_DEFAULT_NAMESPACE
from federation.domain.queues import Queue
from federation.service.admission import admit
from federation.wire.convert import job_from_proto, job_to_proto
from federation.wire.limits import Limits

QUEUE = Queue("research", namespaces=("team-a", "shared"), default_namespace="team-a")

VOLCANO_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train%s}
spec:
  queue: research
  tasks: [{name: w, replicas: 2, template: {spec: {containers: [{name: c, image: busybox}]}}}]
"""

JOBFLOW = """\
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {name: pipe%s}
spec:
  flows: [{name: prep}, {name: train, dependsOn: {targets: [prep]}}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: prep%s}
spec:
  queue: research
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: train%s}
spec:
  queue: research
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
"""

WORKLOAD = """\
apiVersion: apps/v1
kind: %s
metadata: {name: serve%s}
spec:
  replicas: 2
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: serve}}
  template:
    metadata:
      labels: {app: serve}
      annotations: {scheduling.volcano.sh/group-min-member: "2", scheduling.volcano.sh/queue-name: research}
    spec: {containers: [{name: c, image: nginx}]}
"""

INLINE_POLICY = """\
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: pin%s}
spec:
  placement: {clusterAffinity: {clusterNames: [c1]}}
"""


def _ns(namespace: str | None) -> str:
    return "" if namespace is None else f", namespace: {namespace}"


def _texts(namespace: str | None) -> dict[str, str]:
    ns = _ns(namespace)
    return {"volcano job": VOLCANO_JOB % ns, "jobflow": JOBFLOW % (ns, ns, ns),
            "deployment": WORKLOAD % ("Deployment", ns), "statefulset": WORKLOAD % ("StatefulSet", ns),
            "volcano job + inline policy": VOLCANO_JOB % ns + INLINE_POLICY % ns}


def _admitted(text: str) -> list[str]:
    """Each job's namespace after the fedctl side parses it, the wire carries it and the
    service admits it into ``QUEUE``."""
    out = []
    for job in load_jobs(text):
        spec = job_to_proto(job)
        out.append(admit(job_from_proto(spec), spec, QUEUE, Limits()).namespace)
    return out


@pytest.mark.parametrize("kind", list(_texts(None)))
def test_a_job_naming_no_namespace_gets_its_queues_default_namespace(kind: str) -> None:
    text = _texts(None)[kind]
    assert {job.namespace for job in load_jobs(text)} == {QUEUE_DEFAULT_NAMESPACE}
    assert all(job_to_proto(job).namespace == "" for job in load_jobs(text))
    assert set(_admitted(text)) == {"team-a"}


@pytest.mark.parametrize("kind", list(_texts(None)))
def test_a_job_naming_an_allowed_namespace_keeps_it(kind: str) -> None:
    assert set(_admitted(_texts("shared")[kind])) == {"shared"}


@pytest.mark.parametrize("kind", list(_texts(None)))
def test_a_job_naming_kubernetes_default_is_refused_by_a_queue_that_does_not_allow_it(kind: str) -> None:
    with pytest.raises(InvalidInput, match=r"^spec.namespace: default is not a namespace of queue research"):
        _admitted(_texts("default")[kind])


def test_an_inline_policy_naming_a_namespace_the_job_leaves_to_its_queue_is_refused() -> None:
    text = VOLCANO_JOB % "" + INLINE_POLICY % ", namespace: team-a"
    with pytest.raises(InvalidInput) as err:
        load_manifests(text)
    assert err.value.path == "documents[1].metadata.namespace"
    assert "with no namespace (it takes its queue's default namespace)" in err.value.rule


def test_a_queue_without_listed_namespaces_still_defaults_to_its_own() -> None:
    only = Queue("research", default_namespace="ml")
    [job] = load_jobs(VOLCANO_JOB % "")
    spec = job_to_proto(job)
    assert admit(job_from_proto(spec), spec, only, Limits()).namespace == "ml"
