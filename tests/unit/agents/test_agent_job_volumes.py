"""A Volcano job's ``spec.volumes`` in its member cluster, as Volcano's job controller does
it (``createJobIOIfNotExist``, ``createPVC``, ``createJobPod``), on the fake cluster: a
claim is made for each ``volumeClaim`` before the pods, named ``<job>-pvc-<i>`` and labelled
with the job; every container of every pod mounts every claim at its mountPath; the claims
go through the PVC-aware binding (a WaitForFirstConsumer claim gets its pods' node) and go
with the job (cancel, orphan sweep); a user's claim is never replaced or deleted."""

from __future__ import annotations

import json
from dataclasses import replace

from agentkit import LABEL_KEYS, fake, gpu, work

from agents.core.apply import apply_ops
from agents.core.controller import JobController, PassReport
from agents.core.operations import DeleteClaim
from agents.core.records import (
    ANNOTATION_CLAIMS,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    LABEL_JOB,
    ClaimManifest,
    ClaimRecord,
    ServiceManifest,
    StorageClassRecord,
    VolumeRecord,
)
from agents.core.render import render
from agents.core.volumes import claim_names
from agents.fake.cluster import FakeCluster
from agents.k8s.convert import pod_body
from agents.k8s.storage import claim_body, claim_record
from agents.runtime_jobs import orphan_ops
from federation.domain.job_volumes import ClaimSource, ClaimSpec, JobVolume
from federation.domain.jobs import Job, Task

NS = "default"
GI = 1 << 30
SCRATCH = ClaimSpec(("ReadWriteOnce",), 10 * GI, "local")


def volume_job(*volumes: JobVolume, replicas: int = 1, gpus: int = 8, containers: int = 2) -> Job:
    template = {"spec": {"containers": [{"name": f"c{i}", "image": "trainer"} for i in range(containers)],
                         "initContainers": [{"name": "fetch", "image": "busybox"}]}}
    return Job(name="train", queue="default", volumes=volumes,
               tasks=(Task("worker", replicas, gpu(gpus), template_json=json.dumps(template, sort_keys=True)),))


def wait_for_first_consumer(cluster: FakeCluster) -> None:
    cluster.storage_classes["local"] = StorageClassRecord("local", BINDING_WAIT_FOR_FIRST_CONSUMER, "csi.example.com")


async def passes(cluster: FakeCluster, ctl: JobController, n: int) -> PassReport:
    report = None
    for i in range(n):
        report = await ctl.sync(cluster, float(i), None)
    assert report is not None
    return report


def test_a_claim_is_rendered_for_each_volume_claim_and_every_pod_mounts_every_claim() -> None:
    j = volume_job(JobVolume("/scratch", claim=SCRATCH), JobVolume("/datasets", claim_name="imagenet"), replicas=2)
    rendered = render(work(j))
    assert rendered.claims == (ClaimManifest("train-pvc-0", NS, SCRATCH, {LABEL_JOB: "train"}),)
    assert rendered.service.annotations[ANNOTATION_CLAIMS] == "train-pvc-0"  # where the orphan sweep finds it
    for pod in rendered.pods:
        assert pod.claim_mounts == (("federation-volume-0", "train-pvc-0", "/scratch"),
                                    ("federation-volume-1", "imagenet", "/datasets"))
    assert claim_names(j) == ("imagenet", "train-pvc-0")  # both go through the PVC-aware binding
    assert ANNOTATION_CLAIMS not in render(work(volume_job(JobVolume("/d", claim_name="x")))).service.annotations


def test_the_pod_body_mounts_each_claim_in_every_container_but_not_init_containers() -> None:
    j = volume_job(JobVolume("/scratch", claim=SCRATCH), JobVolume("/datasets", claim_name="imagenet"))
    spec = pod_body(render(work(j)).pods[0])["spec"]
    assert [v for v in spec["volumes"] if "persistentVolumeClaim" in v] == [
        {"name": "federation-volume-0", "persistentVolumeClaim": {"claimName": "train-pvc-0"}},
        {"name": "federation-volume-1", "persistentVolumeClaim": {"claimName": "imagenet"}}]
    for container in spec["containers"]:
        assert container["volumeMounts"] == [{"name": "federation-volume-0", "mountPath": "/scratch"},
                                             {"name": "federation-volume-1", "mountPath": "/datasets"}]
    assert "volumeMounts" not in spec["initContainers"][0]  # Volcano's createJobPod: containers only


def test_the_claim_body_carries_exactly_the_fields_accepted() -> None:
    source = ClaimSource("VolumeSnapshot", "imagenet-v3", "snapshot.storage.k8s.io")
    full = ClaimManifest("train-pvc-0", NS, ClaimSpec(("ReadWriteOnce", "ReadOnlyMany"), 10 * GI, "fast",
                                                      "Filesystem", source), {LABEL_JOB: "train"})
    assert claim_body(full) == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "train-pvc-0", "namespace": NS, "labels": {LABEL_JOB: "train"}},
        "spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "resources": {"requests": {"storage": "10Gi"}},
                 "storageClassName": "fast", "volumeMode": "Filesystem",
                 "dataSource": {"kind": "VolumeSnapshot", "name": "imagenet-v3",
                                "apiGroup": "snapshot.storage.k8s.io"}}}
    default_class = claim_body(replace(full, spec=ClaimSpec(("ReadWriteMany",), 3 * 10**9)))["spec"]
    assert default_class == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "3000000000"}}}
    no_class = claim_body(replace(full, spec=ClaimSpec(("ReadWriteMany",), GI, "")))["spec"]
    assert no_class["storageClassName"] == ""  # "" asks for no class, unlike absent
    assert claim_record(claim_body(full)) == ClaimRecord("train-pvc-0", NS, storage_class="fast", job="train")


async def test_the_claim_is_made_before_the_pods_and_bound_as_wait_for_first_consumer() -> None:
    cluster = fake()
    wait_for_first_consumer(cluster)
    ctl = JobController(work(volume_job(JobVolume("/scratch", claim=SCRATCH))), label_keys=LABEL_KEYS)
    first = await ctl.sync(cluster, 0.0, None)
    assert (first.phase, first.message) == ("Pending", "creating persistentvolumeclaims train-pvc-0")
    creates = [c for c in cluster.calls if c[0] in ("create_claim", "create_pod")]
    assert creates == [("create_claim", "train-pvc-0"), ("create_pod", "train-worker-0")]
    assert cluster.made_claims[(NS, "train-pvc-0")].spec == SCRATCH
    report = await passes(cluster, ctl, 1)
    assert report.phase in ("Bound", "Running"), report.message
    [pod] = cluster.pods()
    assert pod.node is not None and cluster.claims[(NS, "train-pvc-0")].selected_node == pod.node
    assert [c for c in cluster.calls if c[0] == "create_claim"] == [("create_claim", "train-pvc-0")]  # made once


async def test_the_claim_is_withdrawn_with_the_job_and_only_then_is_it_withdrawn() -> None:
    cluster = fake()
    wait_for_first_consumer(cluster)
    w = work(volume_job(JobVolume("/scratch", claim=SCRATCH), JobVolume("/d", claim_name="imagenet")))
    cluster.put_claim(ClaimRecord("imagenet", NS, storage_class="local"))
    ctl = JobController(w, label_keys=LABEL_KEYS)
    assert (await passes(cluster, ctl, 2)).phase in ("Bound", "Running")
    ctl.update(replace(w, cancelled=True))
    report = await passes(cluster, ctl, 1)
    assert report.phase == "Cancelled" and ("delete_claim", "train-pvc-0") in cluster.calls
    assert set(cluster.claims) == {(NS, "imagenet")}  # the user's claim it only used stays
    assert (await passes(cluster, ctl, 1)).message == "withdrawn"


async def test_a_claim_being_deleted_counts_until_it_is_gone() -> None:
    cluster = fake()
    w = work(volume_job(JobVolume("/scratch", claim=SCRATCH)), cancelled=True)
    cluster.put_claim(ClaimRecord("train-pvc-0", NS, storage_class="local", job="train", deleting=True))
    report = await JobController(w, label_keys=LABEL_KEYS).sync(cluster, 0.0, None)
    assert report.message == "withdrawing 1 objects" and ("delete_claim", "train-pvc-0") not in cluster.calls


async def test_a_users_claim_of_the_made_name_is_neither_replaced_nor_deleted_nor_mounted() -> None:
    cluster = fake()
    wait_for_first_consumer(cluster)
    theirs = ClaimRecord("train-pvc-0", NS, storage_class="local", volume="pv-theirs", bound=True)
    cluster.put_claim(theirs)
    cluster.volumes["pv-theirs"] = VolumeRecord("pv-theirs")
    w = work(volume_job(JobVolume("/scratch", claim=SCRATCH)))
    ctl = JobController(w, label_keys=LABEL_KEYS)
    report = await passes(cluster, ctl, 2)
    assert report.phase == "Pending"
    assert "persistentvolumeclaim default/train-pvc-0, which this job's spec.volumes makes, already exists and " \
           "belongs to a user" in report.message
    assert cluster.pods() == [] and not [c for c in cluster.calls if c[0] == "create_claim"]
    ctl.update(replace(w, cancelled=True))
    await passes(cluster, ctl, 1)
    assert cluster.claims[(NS, "train-pvc-0")].volume == "pv-theirs" and ("delete_claim", "train-pvc-0") \
        not in cluster.calls
    assert not await cluster.delete_claim(NS, "train-pvc-0", "train")  # the backend refuses it too


async def test_a_named_claim_is_used_as_it_is_and_its_absence_keeps_the_job_pending() -> None:
    cluster = fake()
    ctl = JobController(work(volume_job(JobVolume("/d", claim_name="imagenet"))), label_keys=LABEL_KEYS)
    report = await passes(cluster, ctl, 2)
    assert (report.phase, report.message) == ("Pending", 'pod train-worker-0: persistentvolumeclaim "imagenet" '
                                                         "not found")
    assert not [c for c in cluster.calls if c[0] == "create_claim"]  # Volcano waits for it; so do we


def test_the_orphan_sweep_deletes_the_claims_named_on_the_jobs_service_first() -> None:
    svc = ServiceManifest("gone", "ns1", labels={LABEL_JOB: "gone"},
                          annotations={ANNOTATION_CLAIMS: "gone-pvc-0,gone-pvc-2"})
    ops = orphan_ops((), (svc,), (), {"train"}, ())
    assert [op for op in ops if isinstance(op, DeleteClaim)] == [DeleteClaim("ns1", "gone-pvc-0", "gone"),
                                                                 DeleteClaim("ns1", "gone-pvc-2", "gone")]
    assert ops[-1].describe() == "delete service ns1/gone"  # the Service, the marker, goes last


async def test_the_sweep_deletes_only_claims_labelled_with_that_job() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("gone-pvc-0", "ns1", job="gone"))
    cluster.put_claim(ClaimRecord("gone-pvc-1", "ns1"))  # a user's, under a name the annotation lists
    ops = [DeleteClaim("ns1", "gone-pvc-0", "gone"), DeleteClaim("ns1", "gone-pvc-1", "gone")]
    assert (await apply_ops(cluster, ops)).ok
    assert set(cluster.claims) == {("ns1", "gone-pvc-1")}
