"""A workload job (Deployment/StatefulSet) on the fake cluster: the workload is created
for our scheduler, its controller's pods (made here by hand: the fake runs no
controllers) are bound all-or-nothing inside the HyperNode, a lost pod's replacement is
bound in the same domain, a new version replaces the workload, cancel withdraws it."""

from __future__ import annotations

import json
from dataclasses import replace

from agentkit import LABEL_KEYS, fake, work

from agents.core.apply import apply_ops, observe_job
from agents.core.operations import CreateWorkload, DeleteWorkload
from agents.core.reconcile import Reconciliation
from agents.core.records import (
    ANNOTATION_SPEC_HASH,
    ANNOTATION_WORK_ID,
    LABEL_JOB,
    LABEL_TASK,
    LABEL_WORK_VERSION,
    SCHEDULER_NAME,
    PodManifest,
)
from agents.core.render import spec_hash
from agents.core.snapshot import build_snapshot
from agents.core.workloads import index_pods, own_selector, reconcile_workload, render_workload, workload_refs
from agents.fake.cluster import FakeCluster
from agents.runtime_jobs import orphan_ops
from federation.domain.jobs import Job
from federation.domain.manifests import load_jobs
from federation.domain.resources import Resources
from federation.domain.works import Work

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, labels: {team: a}}
spec:
  replicas: 3
  selector: {matchLabels: {app: serve}}
  template:
    metadata:
      labels: {app: serve}
      annotations: {scheduling.volcano.sh/group-min-member: "3", volcano.sh/network-topology-mode: hard,
                    volcano.sh/network-topology-highest-tier: "1"}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {nvidia.com/gpu: 4}}}]}
"""


def serve() -> Job:
    [job] = load_jobs(DEPLOYMENT)
    return replace(job, namespace="default")  # as the service admits it (the queue's default namespace)


async def pass_(cluster: FakeCluster, w: Work) -> Reconciliation:
    nodes = await cluster.list_nodes()
    tree = build_snapshot("c1", nodes, await cluster.list_pods({}), [], label_keys=LABEL_KEYS).snapshot
    assert tree is not None
    observed = await observe_job(cluster, w.name, tree=tree.tree, label_keys=LABEL_KEYS, workloads=workload_refs(w.job))
    result = reconcile_workload(w, observed)
    applied = await apply_ops(cluster, result.ops)
    assert applied.ok, applied.error
    return result


async def controller_creates(cluster: FakeCluster, w: Work, *suffixes: str) -> None:
    """What the ReplicaSet controller would do: unbound pods from the workload's template."""
    [made] = cluster.workloads()
    template = json.loads(made.body_json)["spec"]["template"]
    for suffix in suffixes:
        await cluster.create_pod(PodManifest(
            name=f"serve-7d9f-{suffix}", namespace="default", labels=template["metadata"]["labels"],
            annotations=template["metadata"]["annotations"], requests=Resources.of(gpu=4)))


def test_the_workload_goes_to_our_scheduler_with_our_labels_and_the_gang_replicas() -> None:
    w = work(serve(), hypernode="t1-l0", version=2)
    made = render_workload(w)
    body = json.loads(made.body_json)
    assert (made.kind, made.name, body["kind"]) == ("Deployment", "serve", "Deployment")
    assert body["spec"]["replicas"] == 3
    template = body["spec"]["template"]
    assert template["spec"]["schedulerName"] == SCHEDULER_NAME
    assert template["metadata"]["labels"] == {"app": "serve", LABEL_JOB: "serve", LABEL_TASK: "pod",
                                              LABEL_WORK_VERSION: "2"}
    assert template["metadata"]["annotations"][ANNOTATION_WORK_ID] == "w-serve"
    assert body["spec"]["selector"] == {"matchLabels": {"app": "serve", LABEL_JOB: "serve"}}  # its own pods only
    assert made.labels == {"team": "a", LABEL_JOB: "serve"}


def test_a_workload_selector_is_narrowed_to_its_own_jobs_pods() -> None:
    # A StatefulSet ``train-worker`` selecting every pod with a task label adopted job
    # ``train``'s pods ``train-worker-<i>`` (same namespace, no owner) and deleted them.
    wide = {"matchExpressions": [{"key": LABEL_TASK, "operator": "Exists"}]}
    assert own_selector(wide, "train-worker") == {**wide, "matchLabels": {LABEL_JOB: "train-worker"}}
    assert own_selector({"matchLabels": {LABEL_JOB: "other"}}, "serve") == {"matchLabels": {LABEL_JOB: "serve"}}
    w = work(serve(), hypernode="t1-l0")
    made = render_workload(w)
    # The hash is the user's spec: a workload created before the selector was narrowed is
    # not replaced (its pods restarted) by an agent upgrade.
    spec = {**json.loads(made.body_json)["spec"], "selector": {"matchLabels": {"app": "serve"}}}
    assert made.annotations[ANNOTATION_SPEC_HASH] == spec_hash("workload", "Deployment",
                                                               json.dumps(spec, sort_keys=True), 1)


async def test_pods_are_bound_only_once_the_whole_gang_exists_and_inside_the_hypernode() -> None:
    cluster = fake()
    w = work(serve(), hypernode="t1-l0")
    first = await pass_(cluster, w)
    assert [type(op) for op in first.ops] == [CreateWorkload] and first.phase == "Pending"
    await controller_creates(cluster, w, "a", "b")
    assert (await pass_(cluster, w)).message == "waiting for 2 of 3 pods from the Deployment"
    assert all(p.node is None for p in cluster.pods())
    await controller_creates(cluster, w, "c")
    await pass_(cluster, w)
    assert {p.node for p in cluster.pods()} <= {"n00", "n01"}  # l0 holds n00 and n01
    assert all(p.node is not None for p in cluster.pods())
    assert (await pass_(cluster, w)).phase == "Running"


async def test_a_lost_pod_is_replaced_by_the_controller_and_bound_in_the_same_domain() -> None:
    cluster = fake()
    w = work(serve(), hypernode="t1-l0")
    await pass_(cluster, w)
    await controller_creates(cluster, w, "a", "b", "c")
    await pass_(cluster, w)
    await cluster.delete_pod("default", "serve-7d9f-b")
    await controller_creates(cluster, w, "d")
    await pass_(cluster, w)
    pods = cluster.pods()
    assert sorted(p.name for p in pods) == ["serve-7d9f-a", "serve-7d9f-c", "serve-7d9f-d"]
    assert all(p.node in ("n00", "n01") for p in pods)


async def test_a_gang_that_no_longer_fits_is_released_and_replanned() -> None:
    cluster = fake()
    w = work(serve(), hypernode="t1-l0")
    await pass_(cluster, w)
    cluster.occupy("hog", "n00", Resources.of(gpu=8))
    cluster.occupy("hog2", "n01", Resources.of(gpu=4))
    await controller_creates(cluster, w, "a", "b", "c")
    result = await pass_(cluster, w)
    assert result.phase == "Replan" and "needs 3 pods inside" in result.message


async def test_a_new_version_replaces_the_workload_and_cancel_withdraws_it() -> None:
    cluster = fake()
    job = serve()
    await pass_(cluster, work(job, hypernode="t1-l0"))
    second = await pass_(cluster, work(job, hypernode="t1-l1", version=2))
    assert [type(op) for op in second.ops] == [DeleteWorkload, CreateWorkload]
    [made] = cluster.workloads()
    assert json.loads(made.body_json)["spec"]["template"]["metadata"]["labels"][LABEL_WORK_VERSION] == "2"
    cancelled = await pass_(cluster, work(job, hypernode="t1-l1", version=2, cancelled=True))
    assert cancelled.phase == "Cancelled" and cluster.workloads() == []


async def test_statefulset_pods_take_their_ordinal_as_index_deployment_pods_their_rank() -> None:
    cluster = fake()
    await cluster.create_pod(PodManifest("serve-7d9f-zz", "default", labels={LABEL_JOB: "serve"}))
    await cluster.create_pod(PodManifest("serve-7d9f-aa", "default", labels={LABEL_JOB: "serve"}))
    indexed = index_pods(serve(), cluster.pods())
    assert [(p.name, p.index, p.task) for p in indexed] == [("serve-7d9f-aa", 0, "pod"), ("serve-7d9f-zz", 1, "pod")]


def test_orphaned_workload_pods_take_their_workload_with_them() -> None:
    from agents.core.records import PodRecord

    pod = PodRecord("serve-7d9f-a", "ns1", labels={LABEL_JOB: "serve", LABEL_TASK: "pod"})
    ops = orphan_ops((pod,), (), (), set(), ())
    assert [type(op).__name__ for op in ops] == ["DeleteWorkload", "DeleteWorkload", "DeletePod"]
    assert {op.kind for op in ops if isinstance(op, DeleteWorkload)} == {"Deployment", "StatefulSet"}


def test_the_created_workload_gives_gpu_requests_an_equal_limit_as_pods_get() -> None:
    from agents.k8s.convert import workload_body

    body = workload_body(render_workload(work(serve())))
    resources = body["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": 4}


def test_evicted_deployment_pods_neither_hide_the_live_gang_nor_get_the_report_refused() -> None:
    """A ReplicaSet replaces an evicted pod but leaves the Failed one behind (until the
    cluster's pod GC, at thousands of pods). Ranked by name among all pods, four of them
    pushed the three live pods to indices 4 to 6: the gang (indices below the replicas)
    looked empty, the job said "waiting for 0 of 3 pods" while all three ran, and central
    refused every report of it (an index past twice the replicas), so its state froze."""
    from agents.core.events import job_pods
    from agents.core.reconcile import Observed
    from agents.core.records import PodRecord
    from federation.service.agent_status import _check_pods
    from federation.v1 import agent_pb2

    job = serve()
    labels = {LABEL_JOB: "serve", LABEL_WORK_VERSION: "1"}
    evicted = [PodRecord(f"serve-7d9f-a{i}", "default", labels=labels, node="n0", phase="Failed", reason="Evicted")
               for i in range(4)]
    live = [PodRecord(f"serve-7d9f-b{i}", "default", labels=labels, node=f"n{i}", phase="Running") for i in range(3)]
    w = work(job, hypernode="t1-l0")
    have = render_workload(w)
    result = reconcile_workload(w, Observed(pods=(*evicted, *live), workloads=(have,)))
    assert (result.phase, result.message) == ("Running", "")
    reported = job_pods(job, [*evicted, *live], 1)
    assert {p.name: p.index for p in reported if p.phase == "Running"} == {
        "serve-7d9f-b0": 0, "serve-7d9f-b1": 1, "serve-7d9f-b2": 2}
    _check_pods(agent_pb2.WorkStatus(pods=[agent_pb2.PodStatus(task=p.task, index=p.index, node=p.node or "",
                                                               phase=p.phase) for p in reported]), job)
