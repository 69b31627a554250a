"""proto <-> domain: exact round trips, Volcano defaults for unset fields, and refusals
whose paths name the request field a client must fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from federation.domain import (
    GPU,
    MEMORY,
    ClusterSnapshot,
    HyperNodeMember,
    HyperNodeSpec,
    InvalidInput,
    Job,
    MemberSelector,
    Node,
    Placement,
    PodAssignment,
    Queue,
    Resources,
    Taint,
    Task,
)
from federation.domain.jobs import DEFAULT_MAX_RETRY
from federation.domain.manifests import PRIORITY_CLASSES, load_manifests
from federation.domain.manifests_fields import QUEUE_DEFAULT_NAMESPACE
from federation.domain.works import Work
from federation.v1 import agent_pb2, jobs_pb2, queues_pb2, types_pb2
from federation.wire import convert

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "manifests" / "pytorch-llama-pretrain.yaml"
GI = 1 << 30


def pretrain() -> Job:
    return load_manifests(FIXTURE.read_text()).job


def wire(msg: types_pb2.JobSpec) -> types_pb2.JobSpec:
    """Through real bytes, as a client would send it."""
    return types_pb2.JobSpec.FromString(msg.SerializeToString())


def small_spec(**fields: object) -> types_pb2.JobSpec:
    spec = types_pb2.JobSpec(
        name="small",
        tasks=[types_pb2.TaskSpec(name="worker", replicas=2, resources={"nvidia.com/gpu": "8", "memory": "64Gi"})],
    )
    for key, value in fields.items():
        setattr(spec, key, value)
    return spec


# ---------------------------------------------------------------- jobs


def test_job_round_trips_exactly_through_the_wire() -> None:
    job = pretrain()
    back = convert.job_from_proto(wire(convert.job_to_proto(job)))
    assert back == job
    assert back.propagation == job.propagation and back.tolerations == job.tolerations
    assert back.tasks[0].template_json == job.tasks[0].template_json


def test_unset_optional_fields_take_volcano_defaults() -> None:
    job = convert.job_from_proto(small_spec())
    # no namespace stays none: the service gives it the queue's default namespace
    assert (job.queue, job.namespace, job.min_available, job.max_retry, job.priority) == (
        "default", QUEUE_DEFAULT_NAMESPACE, None, 3, 0)
    assert job.network_topology is None and job.propagation is None
    assert job.tasks[0].resources == Resources({GPU: 8, MEMORY: 64 * GI})


def test_unset_priority_is_resolved_from_the_class_and_explicit_priority_wins() -> None:
    assert convert.job_from_proto(small_spec(priority_class="high-priority")).priority == PRIORITY_CLASSES["high"]
    assert convert.job_from_proto(small_spec(priority_class="custom", priority=7)).priority == 7


def test_explicit_zero_min_available_on_a_task_survives_the_round_trip() -> None:
    job = Job("j", "default", (Task("a", 2, Resources(), min_available=0), Task("b", 1, Resources())))
    assert convert.job_from_proto(wire(convert.job_to_proto(job))).tasks[0].min_available == 0


def _set(path: str, value: object) -> Callable[[types_pb2.JobSpec], None]:
    """A mutation of one field, ``tasks.0.replicas`` style (map entries under ``resources``)."""
    def mutate(spec: types_pb2.JobSpec) -> None:
        *parents, leaf = path.split(".")
        target: Any = spec
        for part in parents:
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        if parents and parents[-1] == "resources":
            target[leaf] = value
        else:
            setattr(target, leaf, value)
    return mutate


def _add_task(spec: types_pb2.JobSpec) -> None:
    spec.tasks.add(name="worker", replicas=1)


def _both_affinities(spec: types_pb2.JobSpec) -> None:
    spec.propagation.cluster_affinity.cluster_names.append("a")
    spec.propagation.cluster_affinities.add(name="x")


def _bad_toleration(spec: types_pb2.JobSpec) -> None:
    spec.tolerations.add(key="k", operator="Maybe")


def _bad_policy(spec: types_pb2.JobSpec) -> None:
    spec.tasks[0].policies.add(action="RebootNode", events=["PodFailed"])


def _zero_weight(spec: types_pb2.JobSpec) -> None:
    spec.propagation.replica_scheduling.static_weights.add(cluster="a", weight=0)


def _tier_zero(spec: types_pb2.JobSpec) -> None:
    spec.network_topology.highest_tier_allowed = 0


BAD_JOBS = [
    pytest.param(_set("tasks.0.resources.memory", "8Gx"), "spec.tasks[0].resources.memory", "malformed",
                 id="a malformed quantity names the task resource"),
    pytest.param(_set("tasks.0.replicas", 0), "spec.tasks[0].replicas", ">= 1", id="a task without replicas"),
    pytest.param(_set("name", "Small_Job"), "spec.name", "DNS label", id="the job name becomes pod names"),
    pytest.param(_set("queue", "Research"), "spec.queue", "DNS label", id="a queue name with capitals"),
    pytest.param(_set("min_available", 3), "spec.minAvailable", "total replicas", id="a gang larger than the job"),
    pytest.param(_add_task, "spec.tasks[1].name", "duplicate", id="two tasks with one name"),
    pytest.param(_tier_zero, "spec.networkTopology.highestTierAllowed", ">= 1", id="tier 0 does not exist"),
    pytest.param(_bad_policy, "spec.tasks[0].policies[0].action", "RebootNode", id="an unknown restart action"),
    pytest.param(_set("priority_class", "hgih"), "spec.priorityClass", "priority class 'hgih' not found",
                 id="an unknown class with no explicit priority"),
    pytest.param(_both_affinities, "spec.propagation.clusterAffinities", "mutually exclusive",
                 id="clusterAffinity and clusterAffinities together"),
    pytest.param(_bad_toleration, "spec.tolerations[0].operator", "Equal or Exists", id="a toleration operator"),
    pytest.param(_zero_weight, "spec.propagation.replicaScheduling.weightPreference.staticWeightList[0].weight",
                 ">= 1", id="a static cluster weight of zero"),
    pytest.param(_set("tasks.0.replicas", -3), "spec.tasks[0].replicas", ">= 1", id="negative replicas"),
    pytest.param(_set("min_success", 0), "spec.minSuccess", "between 1 and the total replicas (2)",
                 id="an explicit zero minSuccess (Volcano's CRD minimum is 1)"),
    pytest.param(_set("min_success", 3), "spec.minSuccess", "between 1 and the total replicas (2)",
                 id="more successes than the job has pods could never complete it"),
]


@pytest.mark.parametrize(("mutate", "path", "rule"), BAD_JOBS)
def test_bad_job_spec_is_refused_with_the_full_field_path(
    mutate: Callable[[types_pb2.JobSpec], None], path: str, rule: str
) -> None:
    spec = small_spec()
    mutate(spec)
    with pytest.raises(InvalidInput) as info:
        convert.job_from_proto(wire(spec))
    assert info.value.path == path
    assert rule in info.value.rule


def test_paths_root_wherever_the_spec_sits() -> None:
    spec = small_spec()
    spec.tasks[0].replicas = 0
    with pytest.raises(InvalidInput) as info:
        convert.job_from_proto(spec, "work.spec")
    assert info.value.path == "work.spec.tasks[0].replicas"


# ---------------------------------------------------------------- snapshots


def snapshot() -> ClusterSnapshot:
    nodes = tuple(
        Node(f"gpu-{i}", Resources({GPU: 8, MEMORY: 1024 * GI, "cpu": 96_000}),
             Resources({GPU: 8 - i % 2, MEMORY: 900 * GI, "cpu": 90_500}),
             labels={"leaf": f"l{i // 2}"}, taints=(Taint("nvidia.com/gpu", "", "NoSchedule"),) if i == 0 else (),
             ready=i != 3, unschedulable=i == 2)
        for i in range(4)
    )
    hypernodes = (
        HyperNodeSpec("leaf-0", 1, (HyperNodeMember("Node", MemberSelector(regex="^gpu-[01]$")),), "leaf"),
        HyperNodeSpec("leaf-1", 1, (HyperNodeMember("Node", MemberSelector(labels={"leaf": "l1"})),), "leaf"),
        HyperNodeSpec("spine", 2, (HyperNodeMember("HyperNode", MemberSelector(exact_name="leaf-0")),
                                   HyperNodeMember("HyperNode", MemberSelector(exact_name="leaf-1"))), "spine"),
    )
    return ClusterSnapshot("gpu-eu-1", nodes, hypernodes, labels={"region": "eu"},
                           taints=(Taint("federation.io/draining", "yes", "PreferNoSchedule"),),
                           taken_at=1_700_000_000.25)


def test_snapshot_round_trips_with_its_hypernode_tree() -> None:
    snap = snapshot()
    msg = types_pb2.ClusterSnapshot.FromString(convert.snapshot_to_proto(snap).SerializeToString())
    back = convert.snapshot_from_proto(msg)
    assert back == snap
    assert back.tree.domains["spine"].nodes == frozenset({"gpu-0", "gpu-1", "gpu-2", "gpu-3"})
    assert back.tree.domains["leaf-1"].nodes == frozenset({"gpu-2", "gpu-3"})


def test_an_empty_label_match_stays_a_label_selector() -> None:
    spec = HyperNodeSpec("empty", 1, (HyperNodeMember("Node", MemberSelector(labels={})),))
    snap = ClusterSnapshot("c", (Node("n", Resources(), Resources()),), (spec,))
    assert convert.snapshot_from_proto(convert.snapshot_to_proto(snap)).hypernodes == (spec,)


def test_snapshot_summary_counts_what_cluster_list_shows() -> None:
    summary = convert.snapshot_summary_to_proto(snapshot(), tree_error="")
    assert (summary.nodes, summary.ready_nodes, summary.hypernodes, summary.max_tier) == (4, 3, 3, 2)
    assert summary.allocatable[GPU] == "32" and summary.free[GPU] == "15"  # gpu-2 cordoned, gpu-3 not ready
    assert convert.timestamp_from_proto(summary.taken_at) == 1_700_000_000.25


def _snap_msg() -> types_pb2.ClusterSnapshot:
    return convert.snapshot_to_proto(snapshot())


def _unknown_member(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[2].members[0].exact_name = "leaf-9"


def _no_selector(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[0].members[0].ClearField("selector")


def _no_member_type(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[0].members[0].type = types_pb2.MEMBER_TYPE_UNSPECIFIED


def _regex_hypernode_member(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[2].members[1].regex = "leaf-.*"


def _bad_regex(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[0].members[0].regex = "gpu-(["


def _parent_not_above_child(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[0].tier = 2


def _no_members(msg: types_pb2.ClusterSnapshot) -> None:
    del msg.hyper_nodes[1].members[:]


def _bad_free(msg: types_pb2.ClusterSnapshot) -> None:
    msg.nodes[1].free["memory"] = "900Gx"


def _duplicate_node(msg: types_pb2.ClusterSnapshot) -> None:
    msg.nodes[1].name = "gpu-0"


def _bad_taint(msg: types_pb2.ClusterSnapshot) -> None:
    msg.nodes[0].taints[0].effect = "NoWay"


def _no_cluster(msg: types_pb2.ClusterSnapshot) -> None:
    msg.cluster = ""


def _duplicate_hypernode(msg: types_pb2.ClusterSnapshot) -> None:
    msg.hyper_nodes[1].name = "leaf-0"


BAD_SNAPSHOTS = [
    pytest.param(_unknown_member, "snapshot.hyperNodes[2].spec.members[0]", "unknown member HyperNode",
                 id="a spine naming a leaf that does not exist"),
    pytest.param(_no_selector, "snapshot.hyperNodes[0].spec.members[0].selector", "exactly one",
                 id="a member without a selector"),
    pytest.param(_no_member_type, "snapshot.hyperNodes[0].spec.members[0].type", "Node or HyperNode",
                 id="a member without a type"),
    pytest.param(_regex_hypernode_member, "snapshot.hyperNodes[2].spec.members[1].selector", "exactMatch",
                 id="a HyperNode member chosen by regex"),
    pytest.param(_bad_regex, "snapshot.hyperNodes[0].spec.members[0].selector.regexMatch.pattern",
                 "regular expression", id="a regex that does not compile"),
    pytest.param(_parent_not_above_child, "snapshot.hyperNodes[0].spec.tier", "lower tier",
                 id="a leaf at the same tier as its spine"),
    pytest.param(_no_members, "snapshot.hyperNodes[1].spec.members", "must not be empty", id="an empty HyperNode"),
    pytest.param(_duplicate_hypernode, "snapshot.hyperNodes[1].metadata.name", "duplicate",
                 id="two HyperNodes with one name"),
    pytest.param(_bad_free, "snapshot.nodes[1].free.memory", "malformed", id="a malformed free quantity"),
    pytest.param(_duplicate_node, "snapshot.nodes[1].name", "duplicate", id="a node reported twice"),
    pytest.param(_bad_taint, "snapshot.nodes[0].taints[0].effect", "NoSchedule", id="an unknown taint effect"),
    pytest.param(_no_cluster, "snapshot.cluster", "must not be empty", id="a snapshot without its cluster name"),
]


@pytest.mark.parametrize(("mutate", "path", "rule"), BAD_SNAPSHOTS)
def test_bad_snapshot_is_refused_whole_with_the_field_path(
    mutate: Callable[[types_pb2.ClusterSnapshot], None], path: str, rule: str
) -> None:
    msg = _snap_msg()
    mutate(msg)
    with pytest.raises(InvalidInput) as info:
        convert.snapshot_from_proto(msg)
    assert info.value.path == path
    assert rule in info.value.rule


# ---------------------------------------------------------------- queues


def test_queue_round_trips_including_absent_capability() -> None:
    capped = Queue("research", weight=3, priority=10, capability=Resources({GPU: 512}), guarantee=Resources({GPU: 64}),
                   deserved=Resources({GPU: 256}), reclaimable=False, parent="org", owners=("nlp", "vision"))
    free = Queue("default")
    for queue in (capped, free):
        msg = queues_pb2.Queue.FromString(convert.queue_to_proto(queue).SerializeToString())
        assert convert.queue_from_proto(msg) == queue
    assert not convert.queue_to_proto(free).HasField("capability")


def test_queue_defaults_for_a_minimal_message() -> None:
    queue = convert.queue_from_proto(queues_pb2.Queue(name="q"))
    assert (queue.weight, queue.reclaimable, queue.capability, queue.deserved, queue.parent) == (
        1, True, None, None, None)


def test_an_explicit_empty_capability_is_a_cap_of_nothing() -> None:
    msg = queues_pb2.Queue(name="q", capability=queues_pb2.ResourceList())
    assert convert.queue_from_proto(msg).capability == Resources()


BAD_QUEUES = [
    pytest.param(queues_pb2.Queue(name="Q"), "queue.name", "DNS label", id="a queue name with capitals"),
    pytest.param(queues_pb2.Queue(name="q", weight=70000), "queue.weight", "65535", id="a weight out of range"),
    pytest.param(queues_pb2.Queue(name="q", capability=queues_pb2.ResourceList(quantities={"cpu": "4x"})),
                 "queue.capability.quantities.cpu", "malformed", id="a malformed capability"),
    pytest.param(queues_pb2.Queue(name="q", capability=queues_pb2.ResourceList(quantities={"cpu": "1"}),
                                  guarantee={"cpu": "2"}), "queue.guarantee", "capability",
                 id="a guarantee above the capability"),
    pytest.param(queues_pb2.Queue(name="q", parent="q"), "queue.parent", "own parent", id="a queue its own parent"),
]


@pytest.mark.parametrize(("msg", "path", "rule"), BAD_QUEUES)
def test_bad_queue_is_refused_with_the_field_path(msg: queues_pb2.Queue, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        convert.queue_from_proto(msg)
    assert info.value.path == path
    assert rule in info.value.rule


# ---------------------------------------------------------------- placements, work, states


def placement() -> Placement:
    pods = (PodAssignment("master", 0, "gpu-0"), *(PodAssignment("worker", i, f"gpu-{i + 1}") for i in range(15)))
    return Placement("llama-pretrain", "gpu-eu-1", "leaf-0", 1, pods)


def test_placement_round_trips() -> None:
    assert convert.placement_from_proto(convert.placement_to_proto(placement())) == placement()


def test_work_carries_the_full_spec_and_placement() -> None:
    work = Work("w-1", pretrain(), 3, placement())
    msg = agent_pb2.Work.FromString(convert.work_to_proto(work).SerializeToString())
    assert (msg.job, msg.cluster, msg.version) == ("llama-pretrain", "gpu-eu-1", 3)
    back = convert.work_from_proto(msg)
    assert (back.work_id, back.version, back.cluster) == ("w-1", 3, "gpu-eu-1")
    assert back.job == pretrain() and back.placement == placement()
    assert back == work


def test_work_whose_cluster_disagrees_with_its_placement_is_refused() -> None:
    msg = convert.work_to_proto(Work("w-1", pretrain(), 1, placement()))
    msg.cluster = "gpu-us-2"
    with pytest.raises(InvalidInput) as info:
        convert.work_from_proto(msg)
    assert info.value.path == "work.cluster"


def test_work_whose_name_disagrees_with_its_spec_is_refused() -> None:
    msg = convert.work_to_proto(Work("w-1", pretrain(), 1, placement()))
    msg.job = "someone-else"
    with pytest.raises(InvalidInput) as info:
        convert.work_from_proto(msg)
    assert info.value.path == "work.job"


def test_work_spec_errors_are_rooted_at_the_work() -> None:
    msg = convert.work_to_proto(Work("w-1", pretrain(), 1, placement()))
    msg.spec.tasks[1].resources["memory"] = "8Gx"
    with pytest.raises(InvalidInput) as info:
        convert.work_from_proto(msg)
    assert info.value.path == "work.spec.tasks[1].resources.memory"


@pytest.mark.parametrize("name", ["Running", "running", "JOB_STATE_RUNNING"])
def test_job_state_names_map_to_the_enum(name: str) -> None:
    assert convert.job_state_from_name(name) == jobs_pb2.JOB_STATE_RUNNING
    assert convert.job_state_name(jobs_pb2.JOB_STATE_RUNNING) == "running"


def test_unknown_job_state_is_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        convert.job_state_from_name("Exploded", "filter.state")
    assert info.value.path == "filter.state"


def test_timestamps_keep_sub_second_precision() -> None:
    assert convert.timestamp_from_proto(convert.timestamp_to_proto(1_700_000_000.125)) == 1_700_000_000.125


def test_a_zero_job_min_available_is_unset_as_in_a_manifest() -> None:
    """``min_available: 0`` over gRPC means what ``spec.minAvailable: 0`` means in a Volcano
    manifest (Volcano's job admission fills a zero in): the gang is the tasks' minimums."""
    spec = small_spec()
    spec.min_available = 0
    job = convert.job_from_proto(wire(spec))
    assert job.min_available is None and job.gang_size == job.total_replicas


def test_a_zero_max_retry_is_three_as_in_a_manifest() -> None:
    """``max_retry: 0`` over gRPC means what ``spec.maxRetry: 0`` means in a Volcano manifest:
    Volcano's job admission writes 3 over a zero (0 meant "fail at the first restart" here,
    which ``max_retry: 1`` says)."""
    spec = small_spec()
    spec.max_retry = 0
    assert convert.job_from_proto(wire(spec)).max_retry == DEFAULT_MAX_RETRY
    spec.max_retry = 1
    assert convert.job_from_proto(wire(spec)).max_retry == 1


def test_min_success_round_trips_and_unset_is_none() -> None:
    """minSuccess travels as an explicit field: unset is no minSuccess, a value is kept."""
    assert convert.job_from_proto(wire(small_spec())).min_success is None
    spec = small_spec()
    spec.min_success = 1
    job = convert.job_from_proto(wire(spec))
    assert job.min_success == 1
    assert convert.job_from_proto(wire(convert.job_to_proto(job))) == job
