"""Job specs and propagation policies: ``types_pb2.JobSpec`` <-> ``domain.Job``.

proto -> domain validates everything the domain validates, with full field paths rooted
at the request field (``spec.tasks[1].replicas``, ``spec.tasks[0].resources.memory``).
Unset proto3 ``optional`` fields take the Volcano defaults (minAvailable = all replicas,
maxRetry = 3); an unset priority is resolved from ``priority_class`` through the
built-in table in ``federation.domain.manifests`` so gRPC and YAML submissions agree.
domain -> proto always sets the resolved priority and maxRetry, so a round trip through
the wire is exact.
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.domain.errors import InvalidInput
from federation.domain.job_volumes import ClaimSource, ClaimSpec, JobVolume
from federation.domain.jobs import (
    DEFAULT_MAX_RETRY,
    WORKLOAD_GANG_PATH,
    Job,
    LifecyclePolicy,
    NetworkTopology,
    PartitionPolicy,
    Task,
)
from federation.domain.manifests import resolve_priority_class
from federation.domain.policies import PriorityClass
from federation.domain.propagation import (
    ClusterAffinity,
    ClusterAffinityTerm,
    PropagationPolicy,
    ReplicaScheduling,
    SpreadConstraint,
)
from federation.domain.selectors import LabelRequirement
from federation.domain.workloads import Workload
from federation.v1 import types_pb2
from federation.wire.base import (
    build,
    resources_from_proto,
    resources_to_proto,
    toleration_from_proto,
    toleration_to_proto,
)

# ---------------------------------------------------------------- lifecycle policies


def policy_to_proto(policy: LifecyclePolicy) -> types_pb2.LifecyclePolicy:
    msg = types_pb2.LifecyclePolicy(action=policy.action, events=list(policy.events))
    if policy.exit_code is not None:
        msg.exit_code = policy.exit_code
    if policy.timeout_seconds is not None:
        msg.timeout_seconds = policy.timeout_seconds
    return msg


def policy_from_proto(msg: types_pb2.LifecyclePolicy, path: str) -> LifecyclePolicy:
    return build(
        path,
        LifecyclePolicy,
        action=msg.action,
        events=tuple(msg.events),
        exit_code=msg.exit_code if msg.HasField("exit_code") else None,
        timeout_seconds=msg.timeout_seconds if msg.HasField("timeout_seconds") else None,
    )


# ---------------------------------------------------------------- propagation


def _affinity_to_proto(affinity: ClusterAffinity) -> types_pb2.ClusterAffinity:
    return types_pb2.ClusterAffinity(
        cluster_names=list(affinity.cluster_names), match_labels=dict(affinity.match_labels),
        exclude=list(affinity.exclude),
        match_expressions=[types_pb2.LabelRequirement(key=r.key, operator=r.operator, values=list(r.values))
                           for r in affinity.match_expressions],
    )


def _affinity_from_proto(msg: types_pb2.ClusterAffinity, path: str) -> ClusterAffinity:
    return ClusterAffinity(
        cluster_names=tuple(msg.cluster_names), match_labels=dict(sorted(msg.match_labels.items())),
        exclude=tuple(msg.exclude),
        match_expressions=tuple(
            build(f"{path}.labelSelector.matchExpressions[{i}]", LabelRequirement, key=r.key, operator=r.operator,
                  values=tuple(r.values))
            for i, r in enumerate(msg.match_expressions)),
    )


def propagation_to_proto(policy: PropagationPolicy) -> types_pb2.PropagationPolicy:
    msg = types_pb2.PropagationPolicy(
        name=policy.name,
        cluster_affinities=[
            types_pb2.ClusterAffinityTerm(name=t.name, affinity=_affinity_to_proto(t.affinity))
            for t in policy.cluster_affinities
        ],
        cluster_tolerations=[toleration_to_proto(t) for t in policy.cluster_tolerations],
        spread_constraints=[
            types_pb2.SpreadConstraint(
                spread_by_field=s.spread_by_field, spread_by_label=s.spread_by_label,
                min_groups=s.min_groups, max_groups=s.max_groups,
            )
            for s in policy.spread_constraints
        ],
    )
    if policy.cluster_affinity is not None:
        msg.cluster_affinity.CopyFrom(_affinity_to_proto(policy.cluster_affinity))
    if policy.replica_scheduling is not None:
        rs = policy.replica_scheduling
        msg.replica_scheduling.CopyFrom(types_pb2.ReplicaScheduling(
            type=rs.type, division_preference=rs.division_preference, dynamic_weight=rs.dynamic_weight,
            static_weights=[types_pb2.StaticClusterWeight(cluster=c, weight=w) for c, w in rs.static_weights],
        ))
    return msg


def propagation_from_proto(msg: types_pb2.PropagationPolicy, path: str) -> PropagationPolicy:
    spreads = tuple(
        build(f"{path}.spreadConstraints[{i}]", SpreadConstraint,
              spread_by_field=s.spread_by_field if (s.spread_by_field or s.spread_by_label) else "cluster",
              spread_by_label=s.spread_by_label, min_groups=s.min_groups, max_groups=s.max_groups)
        for i, s in enumerate(msg.spread_constraints)
    )
    scheduling = None
    if msg.HasField("replica_scheduling"):
        rs = msg.replica_scheduling
        scheduling = build(
            f"{path}.replicaScheduling", ReplicaScheduling,
            type=rs.type or "Divided", division_preference=rs.division_preference or "Aggregated",
            static_weights=tuple((w.cluster, int(w.weight)) for w in rs.static_weights),
            dynamic_weight=rs.dynamic_weight,
        )
    tolerations = tuple(
        toleration_from_proto(t, f"{path}.clusterTolerations[{i}]") for i, t in enumerate(msg.cluster_tolerations)
    )
    # Built before the try: their errors are already rooted at ``path``, the except below would root them twice.
    affinity = (_affinity_from_proto(msg.cluster_affinity, f"{path}.clusterAffinity")
                if msg.HasField("cluster_affinity") else None)
    terms = tuple(
        build(f"{path}.clusterAffinities[{i}]", ClusterAffinityTerm,
              t.name, _affinity_from_proto(t.affinity, f"{path}.clusterAffinities[{i}]"))
        for i, t in enumerate(msg.cluster_affinities)
    )
    try:
        return PropagationPolicy(
            name=msg.name,
            cluster_affinity=affinity,
            cluster_affinities=terms,
            cluster_tolerations=tolerations,
            spread_constraints=spreads,
            replica_scheduling=scheduling,
        )
    except InvalidInput as exc:  # the domain says "placement.X"; the wire has no placement level
        raise InvalidInput(f"{path}.{exc.path.removeprefix('placement.')}", exc.rule) from None


# ---------------------------------------------------------------- volumes


def volume_to_proto(volume: JobVolume) -> types_pb2.JobVolume:
    msg = types_pb2.JobVolume(mount_path=volume.mount_path, claim_name=volume.claim_name)
    claim = volume.claim
    if claim is not None:
        msg.claim.access_modes.extend(claim.access_modes)
        msg.claim.storage_bytes = claim.storage_bytes
        msg.claim.volume_mode = claim.volume_mode or ""
        if claim.storage_class is not None:
            msg.claim.storage_class_name = claim.storage_class
        if claim.data_source is not None:
            source = claim.data_source
            msg.claim.data_source.CopyFrom(types_pb2.VolumeClaimSource(
                api_group=source.api_group, kind=source.kind, name=source.name))
    return msg


def volume_from_proto(msg: types_pb2.JobVolume, path: str) -> JobVolume:
    claim = None
    if msg.HasField("claim"):
        c, where = msg.claim, f"{path}.volumeClaim"
        source = (build(f"{where}.dataSource", ClaimSource, kind=c.data_source.kind, name=c.data_source.name,
                        api_group=c.data_source.api_group) if c.HasField("data_source") else None)
        claim = build(where, ClaimSpec, access_modes=tuple(c.access_modes), storage_bytes=c.storage_bytes,
                      storage_class=c.storage_class_name if c.HasField("storage_class_name") else None,
                      volume_mode=c.volume_mode or None, data_source=source)
    return build(path, JobVolume, mount_path=msg.mount_path, claim_name=msg.claim_name, claim=claim)


# ---------------------------------------------------------------- tasks and jobs


def task_to_proto(task: Task) -> types_pb2.TaskSpec:
    msg = types_pb2.TaskSpec(
        name=task.name, replicas=task.replicas, resources=resources_to_proto(task.resources),
        policies=[policy_to_proto(p) for p in task.policies], template_json=task.template_json,
        depends_on=list(task.depends_on), depends_on_any=task.depends_on_any,
    )
    if task.min_available is not None:
        msg.min_available = task.min_available
    if task.max_retry is not None:
        msg.max_retry = task.max_retry
    pp = task.partition_policy
    if pp is not None:
        msg.partition_policy.total_partitions = pp.total_partitions
        msg.partition_policy.partition_size = pp.partition_size
        msg.partition_policy.min_partitions = pp.min_partitions
        if pp.network_topology is not None:
            msg.partition_policy.network_topology.CopyFrom(topology_to_proto(pp.network_topology))
    return msg


def topology_to_proto(nt: NetworkTopology) -> types_pb2.NetworkTopology:
    msg = types_pb2.NetworkTopology(mode=nt.mode)
    if nt.highest_tier_allowed is not None:
        msg.highest_tier_allowed = nt.highest_tier_allowed
    if nt.highest_tier_name is not None:
        msg.highest_tier_name = nt.highest_tier_name
    return msg


def topology_from_proto(nt: types_pb2.NetworkTopology, path: str) -> NetworkTopology:
    return build(
        path, NetworkTopology,
        mode=nt.mode or "hard",
        highest_tier_allowed=nt.highest_tier_allowed if nt.HasField("highest_tier_allowed") else None,
        highest_tier_name=nt.highest_tier_name if nt.HasField("highest_tier_name") else None,
    )


def partition_policy_from_proto(msg: types_pb2.PartitionPolicy, path: str) -> PartitionPolicy:
    topology = (topology_from_proto(msg.network_topology, f"{path}.networkTopology")
                if msg.HasField("network_topology") else None)
    return build(path, PartitionPolicy, total_partitions=msg.total_partitions, partition_size=msg.partition_size,
                 min_partitions=msg.min_partitions, network_topology=topology)


def task_from_proto(msg: types_pb2.TaskSpec, path: str, template_json: str = "") -> Task:
    """A wire task; ``template_json`` is its template when the message carries none (a
    workload's task takes the workload's pod template)."""
    return build(
        path, Task,
        name=msg.name,
        replicas=msg.replicas,
        resources=resources_from_proto(msg.resources, f"{path}.resources"),
        min_available=msg.min_available if msg.HasField("min_available") else None,
        policies=tuple(policy_from_proto(p, f"{path}.policies[{i}]") for i, p in enumerate(msg.policies)),
        max_retry=msg.max_retry if msg.HasField("max_retry") else None,
        template_json=msg.template_json or template_json,
        depends_on=tuple(msg.depends_on),
        depends_on_any=msg.depends_on_any,
        partition_policy=(partition_policy_from_proto(msg.partition_policy, f"{path}.partitionPolicy")
                          if msg.HasField("partition_policy") else None),
    )


def job_to_proto(job: Job) -> types_pb2.JobSpec:
    """A domain job as the wire JobSpec (priority and maxRetry always explicit)."""
    msg = types_pb2.JobSpec(
        name=job.name, namespace=job.namespace, queue=job.queue,
        tasks=[task_to_proto(t) for t in job.tasks],
        priority=job.priority, priority_class=job.priority_class,
        policies=[policy_to_proto(p) for p in job.policies],
        plugins={name: types_pb2.PluginArgs(args=list(args)) for name, args in job.plugins},
        max_retry=job.max_retry, labels=dict(job.labels),
        tolerations=[toleration_to_proto(t) for t in job.tolerations], after=list(job.after),
        volumes=[volume_to_proto(v) for v in job.volumes],
    )
    if job.min_available is not None:
        msg.min_available = job.min_available
    if job.min_success is not None:
        msg.min_success = job.min_success
    if job.ttl_seconds_after_finished is not None:
        msg.ttl_seconds_after_finished = job.ttl_seconds_after_finished
    if job.network_topology is not None:
        msg.network_topology.CopyFrom(topology_to_proto(job.network_topology))
    if job.propagation is not None:
        msg.propagation.CopyFrom(propagation_to_proto(job.propagation))
    if job.workload is not None:
        msg.workload.kind, msg.workload.body_json = job.workload.kind, job.workload.body_json
    if job.topology_wait_seconds is not None:
        msg.topology_wait_seconds = job.topology_wait_seconds
    return msg


def _job_error(exc: InvalidInput, root: str) -> InvalidInput:
    """Domain ``Job`` paths are manifest-shaped (``metadata.name``, ``spec.queue``)."""
    if exc.path == "metadata.name":
        return InvalidInput(f"{root}.name", exc.rule)
    if exc.path == WORKLOAD_GANG_PATH:  # it sits in the workload's body on the wire
        return InvalidInput(f"{root}.workload.bodyJson.{exc.path}", exc.rule)
    if exc.path.startswith("spec."):
        return InvalidInput(root + exc.path[len("spec"):], exc.rule)
    if exc.path.startswith("metadata.annotations[federation.io/topology-wait]"):
        return InvalidInput(f"{root}.topologyWaitSeconds", exc.rule)
    return exc.under(root)


def job_from_proto(msg: types_pb2.JobSpec, path: str = "spec",
                   classes: Mapping[str, PriorityClass] | None = None) -> Job:
    """Validate a wire JobSpec into a domain Job; errors carry paths below ``path``.

    Without an explicit ``priority`` the class resolves through ``classes`` (the
    PriorityClasses applied to the federation), then the built-in table."""
    topology = (topology_from_proto(msg.network_topology, f"{path}.networkTopology")
                if msg.HasField("network_topology") else None)
    if msg.HasField("priority"):
        priority, priority_class = msg.priority, msg.priority_class
    else:
        priority, priority_class = build(f"{path}.priorityClass", resolve_priority_class, msg.priority_class, classes)
    workload = (build(f"{path}.workload", Workload, kind=msg.workload.kind, body_json=msg.workload.body_json)
                if msg.HasField("workload") else None)
    template = workload.template_json if workload is not None else ""
    tasks = tuple(task_from_proto(t, f"{path}.tasks[{i}]", template) for i, t in enumerate(msg.tasks))
    policies = tuple(policy_from_proto(p, f"{path}.policies[{i}]") for i, p in enumerate(msg.policies))
    propagation = (
        propagation_from_proto(msg.propagation, f"{path}.propagation") if msg.HasField("propagation") else None
    )
    tolerations = tuple(toleration_from_proto(t, f"{path}.tolerations[{i}]") for i, t in enumerate(msg.tolerations))
    volumes = tuple(volume_from_proto(v, f"{path}.volumes[{i}]") for i, v in enumerate(msg.volumes))
    try:  # only Job's own checks raise here; nested values were validated (and rooted) above
        return Job(
            name=msg.name,
            queue=msg.queue or "default",
            tasks=tasks,
            # 0 is unset, as a manifest's ``spec.minAvailable: 0`` (Volcano's admission fills both in).
            min_available=msg.min_available or None,
            priority=priority,
            priority_class=priority_class,
            network_topology=topology,
            policies=policies,
            plugins=tuple((name, tuple(msg.plugins[name].args)) for name in sorted(msg.plugins)),
            max_retry=msg.max_retry or DEFAULT_MAX_RETRY,  # 0 is unset, as a manifest's (Volcano's admission)
            propagation=propagation,
            namespace=msg.namespace,  # "" = the queue's default, resolved by service/admission.py
            labels=tuple(sorted(msg.labels.items())),
            tolerations=tolerations,
            workload=workload,
            after=tuple(msg.after),
            topology_wait_seconds=msg.topology_wait_seconds if msg.HasField("topology_wait_seconds") else None,
            # Unlike minAvailable, a 0 is not unset: Volcano's CRD refuses it (minimum 1), so do we.
            min_success=msg.min_success if msg.HasField("min_success") else None,
            ttl_seconds_after_finished=msg.ttl_seconds_after_finished
            if msg.HasField("ttl_seconds_after_finished") else None,
            volumes=volumes,
        )
    except InvalidInput as exc:
        raise _job_error(exc, path) from None
