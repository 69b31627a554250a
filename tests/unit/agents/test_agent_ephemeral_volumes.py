"""Generic ephemeral volumes (``volumes[].ephemeral``) on the fake cluster: each is the
claim ``<pod>-<volume>`` that the ephemeral volume controller makes once the pod exists
(the fake runs no controllers: the tests make it, owned by the pod's uid). The gang waits
for it, refuses one its pod does not control, and then binds as for any claim
(agents/core/volumes.py, rule 4): a WaitForFirstConsumer claim gets its pod's node."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from agentkit import LABEL_KEYS, LEAF, fake, gpu, work

from agents.core.controller import JobController, PassReport
from agents.core.records import (
    BINDING_IMMEDIATE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    LABEL_JOB,
    LABEL_TASK,
    ClaimRecord,
    PodManifest,
    PodRecord,
    StorageClassRecord,
    VolumeRecord,
)
from agents.core.volumes import MAX_JOB_CLAIMS, JobClaims, job_claims
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from agents.k8s.convert import pod_record
from agents.k8s.storage import claim_record
from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, Task
from federation.domain.manifests import load_jobs
from federation.domain.resources import Resources
from federation.domain.scheduling import Requirement, Term
from federation.domain.workloads import Workload

NS = "default"
WAIT = StorageClassRecord("local", BINDING_WAIT_FOR_FIRST_CONSUMER, "csi.example.com")


def ephemeral(name: str, cls: str = "local") -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "storageClassName": cls, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}


def scratch_job(*volumes: dict[str, Any], replicas: int = 2, gpus: int = 8) -> Job:
    template = json.dumps({"spec": {"volumes": list(volumes or [ephemeral("scratch")])}},
                          sort_keys=True, separators=(",", ":"))
    return Job(name="train", queue="default", tasks=(Task("worker", replicas, gpu(gpus), template_json=template),))


async def first_pass(cluster: FakeCluster, j: Job) -> tuple[JobController, PassReport]:
    ctl = JobController(work(j, "t2-s0"), label_keys=LABEL_KEYS)
    return ctl, await ctl.sync(cluster, ManualClock()(), None)


def our_pods(cluster: FakeCluster) -> list[PodRecord]:
    return [p for p in cluster.pods() if p.job]


def controller_makes(cluster: FakeCluster, cls: str = "local", owners: dict[str, str] | None = None) -> None:
    """What the ephemeral volume controller does for each pod: claim ``<pod>-scratch``
    controlled by the pod (``owners``: another controlling uid, by pod name)."""
    for pod in our_pods(cluster):
        cluster.put_claim(ClaimRecord(f"{pod.name}-scratch", NS, storage_class=cls,
                                      controller=(owners or {}).get(pod.name, pod.uid)))


async def test_the_gang_waits_for_the_controller_then_each_claim_gets_its_pods_node_before_the_bind() -> None:
    cluster = fake()
    cluster.storage_classes["local"] = WAIT
    ctl, report = await first_pass(cluster, scratch_job())
    assert (report.phase, report.message) == ("Pending", 'pod train-worker-0: waiting for the ephemeral volume '
                                              'controller to create the persistentvolumeclaim "train-worker-0-scratch"')
    assert [p.node for p in our_pods(cluster)] == [None, None]  # made, so the controller can make their claims

    controller_makes(cluster)
    report = await ctl.sync(cluster, 1.0, None)
    assert report.phase in ("Bound", "Running"), report.message
    for pod in our_pods(cluster):
        assert pod.node is not None
        assert cluster.claims[(NS, f"{pod.name}-scratch")].selected_node == pod.node  # provisioned where it runs
    writes = [c[0] for c in cluster.calls if c[0] in ("select_claim_node", "bind_pod")]
    assert writes == ["select_claim_node", "select_claim_node", "bind_pod", "bind_pod"]


@pytest.mark.parametrize("owner", ["", "uid-of-an-earlier-pod"], ids=["a-users-claim", "another-pods-claim"])
async def test_a_claim_its_pod_does_not_control_is_refused_with_kube_schedulers_reason(owner: str) -> None:
    cluster = fake()
    cluster.storage_classes["local"] = WAIT
    ctl, _ = await first_pass(cluster, scratch_job())
    controller_makes(cluster, owners={"train-worker-0": owner})
    report = await ctl.sync(cluster, 1.0, None)
    assert (report.phase, report.message) == ("Pending", "pod train-worker-0: PVC default/train-worker-0-scratch was "
                                              "not created for pod default/train-worker-0 (pod is not owner)")
    assert not [p for p in our_pods(cluster) if p.node]
    assert not [c for c in cluster.calls if c[0] == "select_claim_node"]


async def test_a_claim_left_before_its_pod_existed_waits_then_is_refused() -> None:
    # A claim of the pod's name made before the pod (a user's, or the last pod's still
    # being collected) is never taken for the new pod's.
    cluster = fake()
    cluster.storage_classes["local"] = WAIT
    cluster.put_claim(ClaimRecord("train-worker-0-scratch", NS, storage_class="local", controller="uid-old"))
    ctl, report = await first_pass(cluster, scratch_job(replicas=1))
    assert report.phase == "Pending" and "waiting for the ephemeral volume controller" in report.message
    report = await ctl.sync(cluster, 1.0, None)
    assert report.phase == "Pending" and "(pod is not owner)" in report.message
    assert not [p for p in our_pods(cluster) if p.node]


async def test_the_rules_of_any_claim_apply_to_an_ephemeral_one() -> None:
    # An Immediate class's claim is bound by the PV controller first; a bound one's PV
    # affinity (leaf l1: n02, n03) places the pod.
    cluster = fake()
    cluster.storage_classes["fast"] = StorageClassRecord("fast", BINDING_IMMEDIATE, "csi.example.com")
    ctl, _ = await first_pass(cluster, scratch_job(ephemeral("scratch", "fast"), replicas=1))
    controller_makes(cluster, cls="fast")
    report = await ctl.sync(cluster, 1.0, None)
    assert report.message == ('pod train-worker-0: pod has unbound immediate PersistentVolumeClaims (claim '
                              '"train-worker-0-scratch": StorageClass fast binds Immediately; waiting for it to be '
                              'bound)')
    claim = cluster.claims[(NS, "train-worker-0-scratch")]
    cluster.put_claim(replace(claim, volume="pv-1", bound=True))
    cluster.volumes["pv-1"] = VolumeRecord("pv-1", (Term((Requirement(LEAF, "In", ("l1",)),)),))
    report = await ctl.sync(cluster, 2.0, None)
    assert report.phase in ("Bound", "Running"), report.message
    assert our_pods(cluster)[0].node in ("n02", "n03")


async def test_only_the_claims_of_pods_still_to_bind_are_read() -> None:
    cluster = fake()
    cluster.storage_classes["local"] = WAIT
    ctl, _ = await first_pass(cluster, scratch_job())
    assert cluster.storage_reads == 0  # no pod existed when the pass observed: nothing to read
    controller_makes(cluster)
    await ctl.sync(cluster, 1.0, None)
    assert cluster.storage_reads == 3  # two claims and their class, once
    await ctl.sync(cluster, 2.0, None)
    assert cluster.storage_reads == 3  # a bound gang reads none


async def test_ephemeral_volumes_count_once_per_pod_toward_the_limit_before_any_read() -> None:
    # 32 pods x 2 ephemeral volumes + 1 named claim = 65 claims: over 64 although the job names one.
    cluster = fake()
    named = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    j = scratch_job(named, ephemeral("a"), ephemeral("b"), replicas=32, gpus=1)
    assert job_claims(j).count == MAX_JOB_CLAIMS + 1
    ctl, _ = await first_pass(cluster, j)
    report = await ctl.sync(cluster, 1.0, None)
    assert report.phase == "Pending"
    assert report.message == ("the job's pods name 65 PersistentVolumeClaims (each pod's generic ephemeral volumes "
                              "counted for every pod), over the limit of 64 the agent reads for a job")
    assert cluster.storage_reads == 0 and not [p for p in our_pods(cluster) if p.node]


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve}
spec:
  replicas: 2
  selector: {matchLabels: {app: serve}}
  template:
    metadata:
      labels: {app: serve}
      annotations: {scheduling.volcano.sh/group-min-member: "2"}
    spec:
      containers: [{name: c, image: nginx, resources: {requests: {nvidia.com/gpu: 4}},
                    volumeMounts: [{name: scratch, mountPath: /scratch}]}]
      volumes:
      - name: scratch
        ephemeral:
          volumeClaimTemplate:
            spec: {storageClassName: local, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


async def test_a_deployments_pods_claims_are_named_after_the_pods_its_controller_made() -> None:
    cluster = fake()
    cluster.storage_classes["local"] = WAIT
    [j] = load_jobs(DEPLOYMENT)
    ctl = JobController(work(replace(j, namespace=NS), "t1-l0"), label_keys=LABEL_KEYS)
    await ctl.sync(cluster, 0.0, None)
    [made] = cluster.workloads()
    template = json.loads(made.body_json)["spec"]["template"]
    for suffix in ("x1", "y2"):  # the ReplicaSet controller's random names
        await cluster.create_pod(PodManifest(name=f"serve-5c7-{suffix}", namespace=NS,
                                             labels=template["metadata"]["labels"],
                                             annotations=template["metadata"]["annotations"],
                                             requests=Resources.of(gpu=4)))
    report = await ctl.sync(cluster, 1.0, None)
    assert report.message == ('pod serve-5c7-x1: waiting for the ephemeral volume controller to create the '
                              'persistentvolumeclaim "serve-5c7-x1-scratch"')
    controller_makes(cluster)
    report = await ctl.sync(cluster, 2.0, None)
    assert report.phase in ("Bound", "Running"), report.message
    for pod in our_pods(cluster):
        assert pod.node is not None and cluster.claims[(NS, f"{pod.name}-scratch")].selected_node == pod.node


def test_a_stateful_sets_claim_template_replaces_an_ephemeral_volume_of_its_name() -> None:
    body: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
                            "spec": {"replicas": 2, "podManagementPolicy": "Parallel",
                                     "selector": {"matchLabels": {"a": "b"}},
                                     "template": {"spec": {"volumes": [ephemeral("data"), ephemeral("tmp")]}},
                                     "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}}
    tmpl = json.dumps(body["spec"]["template"], sort_keys=True, separators=(",", ":"))
    j = Job(name="db", queue="default", tasks=(Task("pod", 2, gpu(1), template_json=tmpl),),
            workload=Workload("StatefulSet", json.dumps(body, sort_keys=True, separators=(",", ":"))))
    claims = job_claims(j)
    assert claims == JobClaims(("data-db-0", "data-db-1"), {"pod": ("tmp",)}, 4)
    labels = {LABEL_JOB: "db", LABEL_TASK: "pod"}
    pods = [PodRecord("db-0", NS, labels=labels), PodRecord("db-1", NS, labels=labels, node="n00")]
    assert claims.names(NS, pods) == ("data-db-0", "data-db-1", "db-0-tmp")  # db-1 is bound: its claim is not read


# ---------------------------------------------------------------- what the cluster holds is hostile


def test_a_claims_controller_and_a_pods_uid_are_read() -> None:
    owners = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1", "controller": True},
              {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-2"}]
    assert claim_record({"metadata": {"name": "p-v", "ownerReferences": owners[::-1]}}).controller == "u-1"
    assert claim_record({"metadata": {"name": "p-v", "ownerReferences": owners[1:]}}).controller == ""
    assert pod_record({"metadata": {"name": "p", "uid": "u-1"}}).uid == "u-1"


@pytest.mark.parametrize(("refs", "path"), [
    ([{"uid": "u", "controller": True}] * 65, "persistentvolumeclaim d.metadata.ownerReferences"),
    ([{"uid": 7, "controller": True}], "persistentvolumeclaim d.metadata.ownerReferences[0].uid"),
    ("pod", "persistentvolumeclaim d.metadata.ownerReferences"),
], ids=["too-many-owners", "uid-not-a-string", "not-a-list"])
def test_unreadable_owner_references_are_refused_naming_the_field(refs: object, path: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        claim_record({"metadata": {"name": "d", "ownerReferences": refs}})
    assert str(refused.value).startswith(path), str(refused.value)
