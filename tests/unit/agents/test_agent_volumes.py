"""A gang whose pods name PersistentVolumeClaims is bound as kube-scheduler's VolumeBinding
plugin would bind it (agents/core/volumes.py), on the fake cluster: a missing or unbound
Immediate claim keeps the gang unbound and says why, a bound PV's node affinity narrows
the nodes, and a WaitForFirstConsumer claim gets its pod's node written on it before the
pod is bound."""

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
    ClaimRecord,
    StorageClassRecord,
    VolumeRecord,
)
from agents.core.volumes import MAX_JOB_CLAIMS, claim_names, pod_claims
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from agents.k8s.storage import claim_record, storage_class_record, volume_record
from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, Task
from federation.domain.scheduling import Requirement, Term
from federation.domain.workloads import Workload

NS = "default"


def template(*claims: str) -> str:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return json.dumps({"spec": {"volumes": volumes}}, sort_keys=True, separators=(",", ":"))


def volume_job(*claims: str, replicas: int = 2, gpus: int = 8, name: str = "train") -> Job:
    return Job(name=name, queue="default",
               tasks=(Task("worker", replicas, gpu(gpus), template_json=template(*claims)),))


def bound_claim(name: str, pv: str) -> ClaimRecord:
    return ClaimRecord(name, NS, storage_class="standard", volume=pv, bound=True)


def leaf_affinity(*leaves: str) -> tuple[Term, ...]:
    return (Term((Requirement(LEAF, "In", leaves),)),)


async def run(cluster: FakeCluster, j: Job, hypernode: str = "t1-l0") -> tuple[JobController, PassReport]:
    ctl = JobController(work(j, hypernode), label_keys=LABEL_KEYS)
    return ctl, await ctl.sync(cluster, ManualClock()(), None)


def nodes_of(cluster: FakeCluster, job: str = "train") -> dict[str, str | None]:
    return {p.name: p.node for p in cluster.pods() if p.job == job}


async def test_a_missing_claim_keeps_the_gang_unbound_with_the_reason_until_it_exists() -> None:
    cluster = fake()
    ctl, report = await run(cluster, volume_job("data"))
    assert report.phase == "Pending"
    assert report.message == 'pod train-worker-0: persistentvolumeclaim "data" not found'
    assert nodes_of(cluster) == {"train-worker-0": None, "train-worker-1": None}  # created, not bound
    assert not [c for c in cluster.calls if c[0] == "bind_pod"]

    cluster.put_claim(bound_claim("data", "pv-data"))
    cluster.volumes["pv-data"] = VolumeRecord("pv-data")
    again = await ctl.sync(cluster, 1.0, None)
    assert again.phase in ("Bound", "Running") and all(nodes_of(cluster).values())


@pytest.mark.parametrize(("claim", "classes", "why"), [
    (ClaimRecord("data", NS, storage_class="fast"), {"fast": StorageClassRecord("fast", BINDING_IMMEDIATE, "csi.x")},
     "StorageClass fast binds Immediately"),
    (ClaimRecord("data", NS, storage_class="gone"), {}, "StorageClass gone not found"),
    (ClaimRecord("data", NS), {}, "no StorageClass"),
    (ClaimRecord("data", NS, storage_class="wait", volume="pv-x"),
     {"wait": StorageClassRecord("wait", BINDING_WAIT_FOR_FIRST_CONSUMER, "csi.x")},
     "pre-bound to persistentvolume pv-x, not bound yet"),
], ids=["immediate-class", "class-not-found", "no-class", "pre-bound-not-yet-bound"])
async def test_an_unbound_immediate_claim_keeps_the_gang_unbound(
        claim: ClaimRecord, classes: dict[str, StorageClassRecord], why: str) -> None:
    cluster = fake()
    cluster.put_claim(claim)
    cluster.storage_classes.update(classes)
    _, report = await run(cluster, volume_job("data"))
    assert report.phase == "Pending"
    assert report.message == (f'pod train-worker-0: pod has unbound immediate PersistentVolumeClaims '
                              f'(claim "data": {why}; waiting for it to be bound)')
    assert not any(nodes_of(cluster).values())


@pytest.mark.parametrize(("claim", "reason"), [
    (replace(bound_claim("data", "pv-data"), deleting=True), 'persistentvolumeclaim "data" is being deleted'),
    (replace(bound_claim("data", "pv-lost"), bound=False, lost=True),
     'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-lost"'),
    (bound_claim("data", "pv-nowhere"),
     'persistentvolumeclaim "data" is bound to persistentvolume "pv-nowhere", which does not exist'),
], ids=["claim-deleting", "claim-lost", "pv-missing"])
async def test_claims_kube_scheduler_would_not_schedule_on_keep_the_gang_unbound(claim: ClaimRecord,
                                                                                reason: str) -> None:
    cluster = fake()
    cluster.put_claim(claim)
    cluster.volumes["pv-data"] = VolumeRecord("pv-data")
    _, report = await run(cluster, volume_job("data"))
    assert (report.phase, report.message) == ("Pending", f"pod train-worker-0: {reason}")
    assert not any(nodes_of(cluster).values())


async def test_a_bound_pvs_node_affinity_keeps_the_pods_on_the_nodes_it_allows() -> None:
    # Spine s0 holds leaves l0 (n00, n01) and l1 (n02, n03); the PV lives on l1 only, and
    # the plan proposed n00/n01, which the volume does not reach.
    cluster = fake()
    cluster.put_claim(bound_claim("data", "pv-data"))
    cluster.volumes["pv-data"] = VolumeRecord("pv-data", leaf_affinity("l1"))
    j = volume_job("data", gpus=4)
    ctl = JobController(work(j, "t2-s0", pods=(("worker", 0, "n00"), ("worker", 1, "n01"))), label_keys=LABEL_KEYS)
    report = await ctl.sync(cluster, 0.0, None)
    assert report.phase in ("Bound", "Running"), report.message
    assert set(nodes_of(cluster).values()) <= {"n02", "n03"}


async def test_a_pv_whose_affinity_allows_no_node_of_the_domain_reports_replan() -> None:
    cluster = fake()
    cluster.put_claim(bound_claim("data", "pv-data"))
    cluster.volumes["pv-data"] = VolumeRecord("pv-data", leaf_affinity("l3"))
    _, report = await run(cluster, volume_job("data"), "t1-l0")
    assert report.phase == "Replan"
    assert "its volumes (PV pv-data's node affinity) allow 0 of the 2 nodes" in report.message
    assert not any(nodes_of(cluster).values())


async def test_a_match_fields_term_never_matches_as_kube_scheduler_reads_pv_affinity_on_labels_only() -> None:
    cluster = fake()
    cluster.put_claim(bound_claim("data", "pv-data"))
    cluster.volumes["pv-data"] = VolumeRecord("pv-data", (Term((), (Requirement("metadata.name", "In", ("n00",)),)),))
    _, report = await run(cluster, volume_job("data", replicas=1))
    assert report.phase == "Replan" and not any(nodes_of(cluster).values())


def wait_class(provisioner: str = "csi.example.com", topologies: tuple = ()) -> StorageClassRecord:  # type: ignore[type-arg]  # a literal of the record's own field type
    return StorageClassRecord("local", BINDING_WAIT_FOR_FIRST_CONSUMER, provisioner, topologies)


async def test_a_wait_for_first_consumer_claim_gets_its_pods_node_before_the_pod_is_bound() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local"))
    cluster.storage_classes["local"] = wait_class()
    _, report = await run(cluster, volume_job("data", replicas=1))
    assert report.phase in ("Bound", "Running"), report.message
    node = nodes_of(cluster)["train-worker-0"]
    assert node is not None and cluster.claims[(NS, "data")].selected_node == node
    writes = [c for c in cluster.calls if c[0] in ("select_claim_node", "bind_pod")]
    assert writes == [("select_claim_node", f"data->{node}"), ("bind_pod", f"train-worker-0->{node}")]


async def test_pods_sharing_a_wait_for_first_consumer_claim_go_to_one_node() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local"))
    cluster.storage_classes["local"] = wait_class()
    _, report = await run(cluster, volume_job("data", replicas=2, gpus=4))
    assert report.phase in ("Bound", "Running"), report.message
    nodes = set(nodes_of(cluster).values())
    assert len(nodes) == 1 and cluster.claims[(NS, "data")].selected_node in nodes
    assert len([c for c in cluster.calls if c[0] == "select_claim_node"]) == 1


async def test_pods_sharing_such_a_claim_that_cannot_share_a_node_are_not_bound() -> None:
    cluster = fake()  # 8 GPUs a node: two 8-GPU pods never fit on one
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local"))
    cluster.storage_classes["local"] = wait_class()
    _, report = await run(cluster, volume_job("data", replicas=2, gpus=8))
    assert report.phase == "Replan" and "claim data provisioned on one node for all its pods" in report.message
    assert not any(nodes_of(cluster).values()) and cluster.claims[(NS, "data")].selected_node == ""


async def test_a_node_already_selected_is_kept_and_not_written_again() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local", selected_node="n01"))
    cluster.storage_classes["local"] = wait_class()
    _, report = await run(cluster, volume_job("data", replicas=1), "t2-s0")
    assert report.phase in ("Bound", "Running"), report.message
    assert nodes_of(cluster) == {"train-worker-0": "n01"}
    assert not [c for c in cluster.calls if c[0] == "select_claim_node"]


async def test_allowed_topologies_of_the_class_narrow_the_nodes() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local"))
    cluster.storage_classes["local"] = wait_class(topologies=(((LEAF, ("l1",)),),))
    _, report = await run(cluster, volume_job("data", replicas=1), "t2-s0")
    assert report.phase in ("Bound", "Running"), report.message
    assert nodes_of(cluster)["train-worker-0"] in ("n02", "n03")


async def test_a_class_without_a_provisioner_waits_for_a_pre_bound_volume() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local"))
    cluster.storage_classes["local"] = wait_class(provisioner="kubernetes.io/no-provisioner")
    _, report = await run(cluster, volume_job("data", replicas=1))
    assert report.phase == "Pending" and "has no provisioner" in report.message
    assert not any(nodes_of(cluster).values())


async def test_a_claim_changed_since_it_was_read_is_not_overwritten_and_nothing_is_bound() -> None:
    cluster = fake()
    cluster.put_claim(ClaimRecord("data", NS, storage_class="local"))
    cluster.storage_classes["local"] = wait_class()
    real = cluster.read_claim

    async def stale(namespace: str, name: str) -> ClaimRecord | None:
        claim = await real(namespace, name)
        cluster.put_claim(replace(cluster.claims[(namespace, name)], selected_node="elsewhere"))  # a provisioner
        return claim

    cluster.read_claim = stale  # type: ignore[method-assign]  # the claim moves between the read and the write
    _, report = await run(cluster, volume_job("data", replicas=1))
    assert "changed since it was read" in report.error and report.phase == "Pending"
    assert cluster.claims[(NS, "data")].selected_node == "elsewhere" and not any(nodes_of(cluster).values())


async def test_a_running_gang_reads_no_claims() -> None:
    cluster = fake()
    cluster.put_claim(bound_claim("data", "pv-data"))
    cluster.volumes["pv-data"] = VolumeRecord("pv-data")
    ctl, _ = await run(cluster, volume_job("data"))
    reads = cluster.storage_reads
    assert reads == 2  # the claim and its PV, once
    await ctl.sync(cluster, 1.0, None)
    await ctl.sync(cluster, 2.0, None)
    assert cluster.storage_reads == reads


async def test_a_job_naming_too_many_claims_is_not_bound_and_reads_none() -> None:
    cluster = fake()
    claims = [f"c{i}" for i in range(MAX_JOB_CLAIMS + 1)]
    _, report = await run(cluster, volume_job(*claims, replicas=1))
    assert report.phase == "Pending" and f"over the limit of {MAX_JOB_CLAIMS}" in report.message
    assert cluster.storage_reads == 0


def test_a_stateful_sets_claim_templates_name_one_claim_per_ordinal() -> None:
    body: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"replicas": 2, "podManagementPolicy": "Parallel", "selector": {"matchLabels": {"a": "b"}},
                     "template": json.loads(template("shared", "cache")),
                     "volumeClaimTemplates": [{"metadata": {"name": "v1"}}]}}
    tmpl = json.dumps(body["spec"]["template"], sort_keys=True, separators=(",", ":"))
    j = Job(name="db", queue="default", tasks=(Task("pod", 2, gpu(1), template_json=tmpl),),
            workload=Workload("StatefulSet", json.dumps(body, sort_keys=True, separators=(",", ":"))))
    # the template's volume v1 is the claim template's: the controller mounts v1-db-<ordinal> there
    assert pod_claims(j) == {("pod", 0): ("shared", "v1-db-0"), ("pod", 1): ("shared", "v1-db-1")}
    assert claim_names(j) == ("shared", "v1-db-0", "v1-db-1")


# ---------------------------------------------------------------- what the cluster holds is hostile


def test_objects_read_from_the_cluster_become_records() -> None:
    claim = claim_record({"metadata": {"name": "data", "namespace": "ml", "resourceVersion": "7", "annotations": {
        "pv.kubernetes.io/bind-completed": "yes", "volume.kubernetes.io/selected-node": "n1"}},
        "spec": {"storageClassName": "fast", "volumeName": "pv-1"}, "status": {"phase": "Bound"}})
    assert claim == ClaimRecord("data", "ml", "fast", "pv-1", True, False, False, "n1", "7")
    beta = claim_record({"metadata": {"name": "d", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
                         "spec": {"storageClassName": "new"}})
    assert beta.storage_class == "old" and not beta.bound  # the beta annotation wins, as kube-scheduler reads it
    pv = volume_record({"metadata": {"name": "pv-1"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}})
    assert pv == VolumeRecord("pv-1", (Term((Requirement("zone", "In", ("a",)),)),))
    cls = storage_class_record({"metadata": {"name": "local"}, "provisioner": "p", "volumeBindingMode":
                                "WaitForFirstConsumer", "allowedTopologies": [
                                    {"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}]})
    assert cls == StorageClassRecord("local", BINDING_WAIT_FOR_FIRST_CONSUMER, "p", ((("zone", ("a", "b")),),))


@pytest.mark.parametrize(("read", "obj", "path"), [
    (claim_record, {"metadata": {"name": "d"}, "spec": {"volumeName": 5}}, "persistentvolumeclaim d.spec.volumeName"),
    (claim_record, {"metadata": {"name": "x" * 254}}, "metadata.name"),
    (volume_record, {"metadata": {"name": "pv"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": []}] * 33}}}}, "persistentvolume pv.spec.nodeAffinity.required.nodeSelectorTerms"),
    (volume_record, {"metadata": {"name": "pv"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}}, "persistentvolume pv.spec.nodeAffinity"),
    (storage_class_record, {"metadata": {"name": "s"}, "volumeBindingMode": "Later"},
     "storageclass s.volumeBindingMode"),
    (storage_class_record, {"metadata": {"name": "s"}, "allowedTopologies": [{"matchLabelExpressions": [
        {"key": "k", "values": ["v"] * 257}]}]}, "storageclass s.allowedTopologies[0].matchLabelExpressions[0].values"),
], ids=["claim-volume-not-a-string", "claim-name-too-long", "pv-too-many-terms", "pv-unknown-operator",
        "class-unknown-mode", "class-too-many-values"])
def test_unreadable_objects_are_refused_naming_the_field(read: object, obj: dict, path: str) -> None:  # type: ignore[type-arg]  # JSON
    with pytest.raises(InvalidInput) as refused:
        read(obj)  # type: ignore[operator]  # one of the record readers
    assert str(refused.value).startswith(path), str(refused.value)


async def test_an_unreadable_volume_holds_the_gang_back_naming_it() -> None:
    cluster = fake()
    cluster.put_claim(bound_claim("data", "pv-data"))

    async def bad(name: str) -> VolumeRecord | None:
        return volume_record({"metadata": {"name": name}, "spec": {"nodeAffinity": {"required": 3}}})

    cluster.read_volume = bad  # type: ignore[method-assign]  # a cluster object the reader refuses
    _, report = await run(cluster, volume_job("data"))
    assert report.phase == "Pending"
    assert report.message == "read volumes: persistentvolume pv-data.spec.nodeAffinity.required: must be a mapping"
    assert not any(nodes_of(cluster).values())
