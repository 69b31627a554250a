"""Codecs: every field of a Job (and of a ClusterSnapshot) survives the JSON round trip,
through both databases; the spec digest is canonical."""

from __future__ import annotations

import dataclasses
import json

import pytest

from federation.domain import (
    ClusterAffinity,
    ClusterAffinityTerm,
    ClusterSnapshot,
    HyperNodeMember,
    HyperNodeSpec,
    Job,
    LifecyclePolicy,
    MemberSelector,
    NetworkTopology,
    Node,
    PropagationPolicy,
    Queue,
    ReplicaScheduling,
    Resources,
    SpreadConstraint,
    Taint,
    Task,
    Toleration,
)
from federation.domain.job_volumes import ClaimSource, ClaimSpec, JobVolume
from federation.domain.jobs import PartitionPolicy
from federation.domain.workloads import Workload
from federation.store import Store
from federation.store.codec import (
    job_from_json,
    job_to_json,
    queue_from_json,
    queue_to_json,
    snapshot_from_json,
    snapshot_to_json,
    spec_digest,
)

EVERYTHING = Job(
    name="llm-70b",
    queue="research",
    tasks=(
        Task("master", 1, Resources.of(cpu=8000, memory=64 << 30), min_available=1,
             policies=(LifecyclePolicy("RestartJob", events=("PodEvicted", "PodFailed")),), max_retry=2,
             template_json='{"containers":[{"image":"trainer:1"}]}'),
        Task("worker", 16, Resources.of(cpu=32000, gpu=8), min_available=16,
             policies=(LifecyclePolicy("RestartTask", exit_code=137, timeout_seconds=30.5),),
             partition_policy=PartitionPolicy(4, 4, 4, NetworkTopology("hard", highest_tier_name="leaf"))),
    ),
    min_available=17,
    priority=100,
    priority_class="high",
    network_topology=NetworkTopology("soft", highest_tier_name="spine"),
    policies=(LifecyclePolicy("AbortJob", events=("PodPending",), timeout_seconds=600),),
    plugins=(("pytorch", ("--port=23456",)), ("svc", ())),
    max_retry=5,
    propagation=PropagationPolicy(
        name="gpu-clusters",
        cluster_affinities=(
            ClusterAffinityTerm("primary", ClusterAffinity(cluster_names=("east",), match_labels={"gpu": "h100"})),
            ClusterAffinityTerm("backup", ClusterAffinity(exclude=("edge",))),
        ),
        cluster_tolerations=(Toleration("maintenance", "Exists", effect="NoSchedule"),),
        spread_constraints=(SpreadConstraint("cluster", min_groups=1, max_groups=2),),
        replica_scheduling=ReplicaScheduling("Divided", "Weighted", static_weights=(("east", 2), ("west", 1))),
    ),
    namespace="ml",
    labels=(("team", "nlp"), ("cost-center", "42")),
    tolerations=(Toleration("nvidia.com/gpu", "Exists"),),
    topology_wait_seconds=7200.0,
    after=("tokenize", "dedupe"),
    min_success=12,
    ttl_seconds_after_finished=600,
    volumes=(
        JobVolume("/checkpoints", claim=ClaimSpec(("ReadWriteOnce", "ReadOnlyMany"), 100 << 30, "local-nvme",
                                                  "Filesystem", ClaimSource("VolumeSnapshot", "ckpt-7",
                                                                            "snapshot.storage.k8s.io"))),
        JobVolume("/scratch", claim=ClaimSpec(("ReadWriteOncePod",), 1 << 30, "")),
        JobVolume("/datasets", claim_name="imagenet"),
    ),
)
# A workload job carries the fields a Volcano Job cannot (one task, no plugins or policies).
DEPLOYMENT = Job(
    name="serve-7b",
    queue="research",
    tasks=(Task("default0", 4, Resources.of(gpu=2), min_available=2),),
    workload=Workload("Deployment", json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                                                "metadata": {"labels": {"app": "serve"}},
                                                "spec": {"replicas": 4}})),
)


def test_the_fixtures_set_every_job_field() -> None:
    """Guards the round-trip tests: a new Job field must be given a non-default value in
    EVERYTHING, or in DEPLOYMENT where a Volcano Job cannot carry it."""
    for f in dataclasses.fields(Job):
        if f.name not in ("name", "queue", "tasks"):
            set_somewhere = any(getattr(job, f.name) != getattr(Job(name="x", queue="q", tasks=job.tasks), f.name)
                                for job in (EVERYTHING, DEPLOYMENT))
            assert set_somewhere, f"set Job.{f.name} in EVERYTHING or DEPLOYMENT"


@pytest.mark.parametrize("job", [EVERYTHING, DEPLOYMENT], ids=["volcano-job", "deployment"])
def test_job_round_trips_through_json_text(job: Job) -> None:
    text = json.dumps(job_to_json(job))
    assert job_from_json(json.loads(text)) == job


@pytest.mark.parametrize("job", [EVERYTHING, DEPLOYMENT], ids=["volcano-job", "deployment"])
def test_job_round_trips_through_the_database(store: Store, job: Job) -> None:
    store.queues.create(Queue("research"))
    store.jobs.submit(job)
    stored = store.jobs.get(job.name)
    assert stored.job == job
    assert stored.spec_digest == spec_digest(job)


def test_defaults_are_omitted_so_the_digest_survives_additive_fields() -> None:
    minimal = Job(name="small", queue="q", tasks=(Task("w", 1, Resources.of(gpu=1)),))
    assert job_to_json(minimal) == {
        "name": "small", "queue": "q", "tasks": [{"name": "w", "replicas": 1, "resources": {"nvidia.com/gpu": 1}}],
    }


def test_digest_is_canonical() -> None:
    a = Job(name="j", queue="q", tasks=(Task("w", 1, Resources({"cpu": 1000, "memory": 1 << 30})),))
    b = Job(name="j", queue="q", tasks=(Task("w", 1, Resources({"memory": 1 << 30, "cpu": 1000})),))
    assert spec_digest(a) == spec_digest(b)
    timeout_int = Job(name="j", queue="q", tasks=a.tasks, policies=(LifecyclePolicy("AbortJob", ("*",), None, 30),))
    timeout_float = Job(name="j", queue="q", tasks=a.tasks,
                        policies=(LifecyclePolicy("AbortJob", ("*",), None, 30.0),))
    assert spec_digest(timeout_int) == spec_digest(timeout_float)
    assert spec_digest(a) != spec_digest(dataclasses.replace(a, priority=1))


def test_snapshot_round_trips_with_every_selector_kind() -> None:
    nodes = (
        Node("gpu-0", Resources.of(gpu=8), Resources.of(gpu=4), labels={"rack": "a"},
             taints=(Taint("dedicated", "ml", "NoSchedule"),), ready=True, unschedulable=True),
        Node("gpu-1", Resources.of(gpu=8), Resources.of(gpu=8), labels={"rack": "b"}, ready=False),
    )
    hypernodes = (
        HyperNodeSpec("leaf-a", 1, (HyperNodeMember("Node", MemberSelector(exact_name="gpu-0")),), "leaf"),
        HyperNodeSpec("leaf-b", 1, (HyperNodeMember("Node", MemberSelector(regex="gpu-1$")),)),
        HyperNodeSpec("leaf-empty", 1, (HyperNodeMember("Node", MemberSelector(labels={})),)),
        HyperNodeSpec("spine", 2, (HyperNodeMember("HyperNode", MemberSelector(exact_name="leaf-a")),
                                   HyperNodeMember("HyperNode", MemberSelector(exact_name="leaf-b")))),
    )
    snap = ClusterSnapshot("east", nodes, hypernodes, labels={"region": "eu"},
                           taints=(Taint("maintenance"),), healthy=False, taken_at=1234.5)
    back = snapshot_from_json(json.loads(json.dumps(snapshot_to_json(snap))))
    assert back == snap
    assert back.hypernodes[2].members[0].selector.labels == {}  # empty labelMatch is not "no selector"
    assert back.tree.domains["spine"].nodes == snap.tree.domains["spine"].nodes


def test_queue_round_trips() -> None:
    queue = Queue("q", weight=2, priority=1, capability=Resources.of(gpu=8), guarantee=Resources.of(gpu=1),
                  deserved=Resources.of(gpu=4), reclaimable=False, parent="org", owners=("alice",))
    assert queue_from_json(json.loads(json.dumps(queue_to_json(queue)))) == queue


def test_the_decoded_spec_cache_is_bounded_by_the_text_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted in jobs only, 50,000 specs of up to 1 MiB of template each could hold tens of GiB."""
    from federation.store import lifecycle

    monkeypatch.setattr(lifecycle, "_DECODED", {})
    monkeypatch.setattr(lifecycle, "_decoded_bytes", 0)
    monkeypatch.setattr(lifecycle, "_DECODED_MAX_BYTES", 1 << 20)
    for i in range(40):
        padded = dataclasses.replace(EVERYTHING.tasks[1], template_json=json.dumps({"metadata": {
            "annotations": {"pad": "x" * 100_000}}, "spec": {"containers": [{"name": "c", "image": f"i{i}"}]}}))
        job = dataclasses.replace(EVERYTHING, tasks=(EVERYTHING.tasks[0], padded))
        spec = job_to_json(job)
        assert lifecycle.decode_spec(spec_digest(job), spec) == job
        assert lifecycle._decoded_bytes <= 1 << 20
        assert len(lifecycle._DECODED) <= 10
