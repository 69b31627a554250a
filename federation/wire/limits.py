"""Bounds on every request, checked on the wire message before any work (docs/design/limits.md).

Why a separate pass over the proto before ``job_from_proto``: the domain checks meaning
(``minAvailable <= replicas``), this module checks cost. A billion replicas is a valid
integer and a perfectly shaped Task, yet the planner builds one vector per replica and the
server died (issue 10). Counting fields is O(fields) and cannot itself be slow, so it runs
first; only then are quantities, templates and trees parsed, each bounded too.

Every refusal is ``InvalidInput`` naming the field path and the limit, so the client sees
INVALID_ARGUMENT ``spec.tasks[0].replicas: 1000000000 is over the limit of 10000 replicas
per task`` and the CLI prints that line and exits 2. Operators change the defaults with
``federation serve`` flags (``ServeLimits`` below); the names match the flags.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from federation.domain.errors import InvalidInput
from federation.domain.job_volumes import ACCESS_MODES, MAX_JOB_VOLUMES, MAX_MOUNT_PATH
from federation.domain.names import dns_label, dns_subdomain, label_value, qualified_name
from federation.domain.nodes import TAINT_EFFECTS
from federation.domain.patterns import PATTERN_MAX_CHARS
from federation.v1 import agent_pb2, clusters_pb2, types_pb2

MIB = 1024 * 1024
# Fixed, not ``Limits`` fields: agents must agree with them (docs/design/limits.md).
AGENT_ID_MAX_CHARS = 512  # a pod name (<= 253) plus a process id and a start time, with room
STATUS_MAX_EVENTS = 256  # recovery events per WorkStatus; the agent sends more in several reports
# A protobuf Timestamp's own range ends at 9999-12-31T23:59:59Z; Python's datetime ends there too.
TIMESTAMP_MAX_SECONDS = 253_402_300_799


@dataclass(frozen=True)
class Limits:
    """Every bound the service enforces on input; defaults sized for the largest real jobs
    and clusters we know of (a 10,000-pod job, a 15,000-node cluster) with headroom."""

    max_tasks_per_job: int = 64
    max_replicas_per_task: int = 10_000
    max_replicas_per_job: int = 10_000
    max_tier: int = 16
    max_template_bytes: int = 256 * 1024
    max_template_depth: int = 64
    max_labels: int = 64
    max_policies: int = 32
    max_tolerations: int = 64
    max_plugin_args: int = 64
    max_string_chars: int = 4096  # plugin args, messages: any free-text field
    max_cluster_names: int = 1024  # per propagation list
    max_job_dependencies: int = 64  # a job's `after` (JobFlow dependsOn): jobs it waits for
    max_snapshot_nodes: int = 20_000
    max_snapshot_hypernodes: int = 20_000
    max_hypernode_members: int = 20_000
    max_node_labels: int = 512
    max_node_taints: int = 128
    max_job_events: int = 1000  # restarts and warnings the clusters' status reports store per job
    max_request_bytes: int = 4 * MIB  # every RPC but the agent stream
    max_agent_message_bytes: int = 64 * MIB  # one agent stream message (a 15,000-node snapshot is ~10 MiB)

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} must be a positive integer, got {value!r}")

    @property
    def max_snapshot_members(self) -> int:
        """Members over all HyperNodes of one snapshot. A real tree lists each node once
        (in its leaf, by name at most) and each HyperNode once (in its parent), so it never
        needs more than the nodes and HyperNodes a snapshot may hold; HyperNodes times
        members per HyperNode (400 million) only the 64 MiB message bounded, and a million
        members took 8.6 s of CPU to convert. Derived, not a flag of its own, so
        raising either count raises it too."""
        return self.max_snapshot_nodes + self.max_snapshot_hypernodes

    @property
    def max_selected_nodes(self) -> int:
        """Nodes the members of all HyperNodes of one snapshot select together, a node
        counted once for each HyperNode holding it (``domain.topology.build_tree``). In a
        Volcano tree each node is in one leaf and each HyperNode in one parent, of a higher
        tier, so a node is held once per tier at most: tiers run from 0 to ``max_tier``.
        Overlapping HyperNodes had no bound: 2,000 selecting all 20,000 nodes each built
        2,000 sets of 20,000 names (13 s of CPU, 4 GB). The nodes the ``labelMatch``
        selectors examine together are held to the same number."""
        return self.max_snapshot_nodes * (self.max_tier + 1)


DEFAULT_LIMITS = Limits()


def _over(path: str, value: int, limit: int, what: str) -> InvalidInput:
    return InvalidInput(path, f"{value} is over the limit of {limit} {what}")


def _count(path: str, items: Sized, limit: int, what: str) -> None:
    n = len(items)
    if n > limit:
        raise _over(path, n, limit, what)


def _text(path: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidInput(path, f"is {len(value)} characters, over the limit of {limit}")


def _timestamp(path: str, stamp: Timestamp) -> None:
    """Unix time between 1970 and the year 9999: anything else is no clock reading, and
    ``datetime.fromtimestamp`` raises on it (a snapshot taken in year 31,690,708 was dropped
    with a traceback instead of being refused)."""
    if not 0 <= stamp.seconds <= TIMESTAMP_MAX_SECONDS or not 0 <= stamp.nanos < 1_000_000_000:
        raise InvalidInput(path, f"{stamp.seconds}s {stamp.nanos}ns is not a time between 1970-01-01 and "
                                 "9999-12-31 (Unix seconds, nanos below one second)")


def check_labels(labels: Mapping[str, str], path: str, limit: int) -> None:
    """Kubernetes label keys (qualified names) and values, at most ``limit`` of them."""
    _count(path, labels, limit, "labels")
    for key, value in labels.items():
        key_path = f"{path}[{key[:80]!r}]"
        qualified_name(key, key_path, "label key")
        label_value(value, key_path)


def _taints(taints: Sequence[types_pb2.Taint], path: str, limit: int, what: str) -> None:
    """Kubernetes' taint rules: key a qualified name, value a label value, effect one of three.
    Taints are few (a node has 0-5), so grammars are checked, not only lengths: a taint is
    stored with the cluster and listed to every tenant (a 5 MB key made ListClusters 5 MB)."""
    _count(path, taints, limit, what)
    for i, t in enumerate(taints):
        qualified_name(t.key, f"{path}[{i}].key", "taint key")
        label_value(t.value, f"{path}[{i}].value")
        if t.effect not in ("", *TAINT_EFFECTS):
            raise InvalidInput(f"{path}[{i}].effect", f"{t.effect[:80]!r} is not one of {', '.join(TAINT_EFFECTS)}")
        if t.HasField("time_added") and not (math.isfinite(t.time_added) and t.time_added >= 0):
            raise InvalidInput(f"{path}[{i}].timeAdded", f"{t.time_added} is not a time (Unix seconds)")


def _tolerations(items: Iterable[types_pb2.Toleration], path: str, limits: Limits) -> None:
    tolerations = list(items)
    _count(path, tolerations, limits.max_tolerations, "tolerations")
    for i, t in enumerate(tolerations):
        if t.key:
            qualified_name(t.key, f"{path}[{i}].key", "toleration key")
        if t.value:
            label_value(t.value, f"{path}[{i}].value")


def _policies(items: Iterable[types_pb2.LifecyclePolicy], path: str, limits: Limits) -> None:
    policies = list(items)
    _count(path, policies, limits.max_policies, "policies")
    for i, p in enumerate(policies):
        _count(f"{path}[{i}].events", p.events, 16, "events")
        _text(f"{path}[{i}].action", p.action, 64)


def _propagation(msg: types_pb2.PropagationPolicy, path: str, limits: Limits) -> None:
    _text(f"{path}.name", msg.name, 253)
    affinities = [(f"{path}.clusterAffinity", msg.cluster_affinity)] if msg.HasField("cluster_affinity") else []
    _count(f"{path}.clusterAffinities", msg.cluster_affinities, 64, "affinity terms")
    affinities += [(f"{path}.clusterAffinities[{i}].affinity", t.affinity)
                   for i, t in enumerate(msg.cluster_affinities)]
    for where, affinity in affinities:
        _count(f"{where}.clusterNames", affinity.cluster_names, limits.max_cluster_names, "cluster names")
        _count(f"{where}.exclude", affinity.exclude, limits.max_cluster_names, "cluster names")
        check_labels(affinity.match_labels, f"{where}.labelSelector.matchLabels", limits.max_labels)
        for i, name in enumerate([*affinity.cluster_names, *affinity.exclude]):
            _text(f"{where}.clusterNames[{i}]", name, 253)
    _tolerations(msg.cluster_tolerations, f"{path}.clusterTolerations", limits)
    _count(f"{path}.spreadConstraints", msg.spread_constraints, 16, "spread constraints")
    _count(f"{path}.replicaScheduling.staticWeightList", msg.replica_scheduling.static_weights,
           limits.max_cluster_names, "weights")


def _volumes(volumes: Sequence[types_pb2.JobVolume], path: str) -> None:
    """Counts and lengths of ``spec.volumes`` (fixed bounds, docs/design/limits.md); the
    grammars and Volcano's rules are the domain's (domain/job_volumes.py)."""
    _count(path, volumes, MAX_JOB_VOLUMES, "volumes per job")
    for i, v in enumerate(volumes):
        _text(f"{path}[{i}].mountPath", v.mount_path, MAX_MOUNT_PATH)
        _text(f"{path}[{i}].volumeClaimName", v.claim_name, 253)
        claim = f"{path}[{i}].volumeClaim"
        _count(f"{claim}.accessModes", v.claim.access_modes, len(ACCESS_MODES), "access modes")
        for j, mode in enumerate(v.claim.access_modes):
            _text(f"{claim}.accessModes[{j}]", mode, 64)
        _text(f"{claim}.storageClassName", v.claim.storage_class_name, 253)
        _text(f"{claim}.volumeMode", v.claim.volume_mode, 64)
        source = v.claim.data_source
        for name, value in (("apiGroup", source.api_group), ("kind", source.kind), ("name", source.name)):
            _text(f"{claim}.dataSource.{name}", value, 253)


def _topology(nt: types_pb2.NetworkTopology, path: str, limits: Limits) -> None:
    if nt.HasField("highest_tier_allowed") and nt.highest_tier_allowed > limits.max_tier:
        raise _over(f"{path}.highestTierAllowed", nt.highest_tier_allowed, limits.max_tier,
                    "tiers (the deepest tier any HyperNode tree may have)")
    if nt.HasField("highest_tier_name"):
        _text(f"{path}.highestTierName", nt.highest_tier_name, 253)


def check_job_spec(msg: types_pb2.JobSpec, limits: Limits = DEFAULT_LIMITS, path: str = "spec") -> None:
    """Refuse a JobSpec that breaks a bound or a Kubernetes name rule, before it is converted.

    Checks only what is cheap to check (counts, lengths, name grammars on bounded
    strings); quantities, templates and pod security are checked afterwards by their own
    bounded parsers.
    """
    if msg.name:
        dns_label(msg.name, f"{path}.name")
    if msg.namespace:
        dns_label(msg.namespace, f"{path}.namespace")
    if msg.queue:
        dns_label(msg.queue, f"{path}.queue")
    if msg.priority_class:
        dns_subdomain(msg.priority_class, f"{path}.priorityClass")
    _count(f"{path}.tasks", msg.tasks, limits.max_tasks_per_job, "tasks per job")
    total = 0
    for i, task in enumerate(msg.tasks):
        tpath = f"{path}.tasks[{i}]"
        if task.replicas > limits.max_replicas_per_task:
            raise _over(f"{tpath}.replicas", task.replicas, limits.max_replicas_per_task, "replicas per task")
        total += max(task.replicas, 0)
        _count(f"{tpath}.resources", task.resources, 64, "resources")
        _count(f"{tpath}.dependsOn.name", task.depends_on, limits.max_tasks_per_job, "tasks")
        for j, name in enumerate(task.depends_on):
            _text(f"{tpath}.dependsOn.name[{j}]", name, 63)
        _policies(task.policies, f"{tpath}.policies", limits)
        if task.partition_policy.HasField("network_topology"):  # its counts are bounded by the replicas
            _topology(task.partition_policy.network_topology, f"{tpath}.partitionPolicy.networkTopology", limits)
        size = len(task.template_json)
        if size > limits.max_template_bytes:
            raise InvalidInput(f"{tpath}.template", f"is {size} bytes of JSON, over the limit of "
                                                    f"{limits.max_template_bytes} bytes")
    size = len(msg.workload.body_json)
    if size > limits.max_template_bytes:  # a workload's body carries its pod template
        raise InvalidInput(f"{path}.workload.bodyJson", f"is {size} bytes of JSON, over the limit of "
                                                        f"{limits.max_template_bytes} bytes")
    if total > limits.max_replicas_per_job:
        raise _over(f"{path}.tasks", total, limits.max_replicas_per_job, "replicas per job (sum over tasks)")
    if msg.HasField("network_topology"):
        _topology(msg.network_topology, f"{path}.networkTopology", limits)
    _policies(msg.policies, f"{path}.policies", limits)
    _count(f"{path}.plugins", msg.plugins, 16, "plugins")
    for name, args in msg.plugins.items():
        _text(f"{path}.plugins", name, 63)
        _count(f"{path}.plugins.{name}", args.args, limits.max_plugin_args, "arguments")
        for j, arg in enumerate(args.args):
            _text(f"{path}.plugins.{name}[{j}]", arg, limits.max_string_chars)
    check_labels(msg.labels, f"{path}.labels", limits.max_labels)
    _count(f"{path}.after", msg.after, limits.max_job_dependencies, "jobs to wait for")
    for i, name in enumerate(msg.after):
        dns_label(name, f"{path}.after[{i}]")
    _tolerations(msg.tolerations, f"{path}.tolerations", limits)
    _volumes(msg.volumes, f"{path}.volumes")
    if msg.HasField("propagation"):
        _propagation(msg.propagation, f"{path}.propagation", limits)


def _members(hypernodes: Sequence[types_pb2.HyperNode], path: str, limits: Limits) -> None:
    """The members of all HyperNodes together, counted before any member is looked at:
    the first HyperNode that brings them over ``max_snapshot_members`` is named."""
    total = 0
    for i, hn in enumerate(hypernodes):
        total += len(hn.members)
        if total > limits.max_snapshot_members:
            raise InvalidInput(f"{path}[{i}].spec.members",
                               f"brings the snapshot's HyperNode members to {total}, over the limit of "
                               f"{limits.max_snapshot_members} (nodes plus HyperNodes a snapshot may hold: a "
                               "tree lists each node and each HyperNode once)")


def check_snapshot(msg: types_pb2.ClusterSnapshot, limits: Limits = DEFAULT_LIMITS,
                   path: str = "snapshot") -> None:
    """Bound an agent's snapshot: node and HyperNode counts, per-node labels and taints,
    member lists (each and all together) and regex lengths, and its ``takenAt``. Lengths only, not grammars, for node
    labels: they come from a kube-apiserver that validated them, and 15,000 nodes x 50 labels
    of regex matching would cost more than the rest of the snapshot. Taints are few and
    are checked in full (``_taints``)."""
    _timestamp(f"{path}.takenAt", msg.taken_at)
    _count(f"{path}.nodes", msg.nodes, limits.max_snapshot_nodes, "nodes per snapshot")
    _count(f"{path}.hyperNodes", msg.hyper_nodes, limits.max_snapshot_hypernodes, "HyperNodes per snapshot")
    _members(msg.hyper_nodes, f"{path}.hyperNodes", limits)
    check_labels(msg.labels, f"{path}.labels", limits.max_labels)
    _taints(msg.taints, f"{path}.taints", limits.max_node_taints, "taints")
    for i, node in enumerate(msg.nodes):
        if len(node.name) > 253:
            raise InvalidInput(f"{path}.nodes[{i}].name", "is longer than 253 characters")
        if len(node.labels) > limits.max_node_labels:
            raise _over(f"{path}.nodes[{i}].labels", len(node.labels), limits.max_node_labels, "labels per node")
        _taints(node.taints, f"{path}.nodes[{i}].taints", limits.max_node_taints, "taints per node")
        for key, value in node.labels.items():
            if len(key) > 317 or len(value) > 63:
                raise InvalidInput(f"{path}.nodes[{i}].labels[{key[:80]!r}]",
                                   "label key over 317 or value over 63 characters")
    for i, hn in enumerate(msg.hyper_nodes):
        hpath = f"{path}.hyperNodes[{i}]"
        if len(hn.name) > 253:
            raise InvalidInput(f"{hpath}.metadata.name", "is longer than 253 characters")
        if hn.tier > limits.max_tier:
            raise _over(f"{hpath}.spec.tier", hn.tier, limits.max_tier, "tiers")
        _count(f"{hpath}.spec.members", hn.members, limits.max_hypernode_members, "members")
        for j, member in enumerate(hn.members):
            if member.WhichOneof("selector") == "regex" and len(member.regex) > PATTERN_MAX_CHARS:
                raise InvalidInput(f"{hpath}.spec.members[{j}].selector.regexMatch.pattern",
                                   f"is {len(member.regex)} characters, over the limit of {PATTERN_MAX_CHARS}")


def check_hello(msg: agent_pb2.Hello, path: str = "hello") -> None:
    """Bound the hello before the cluster is registered: both fields are stored with the
    registration and written into every log line of the stream (a 5 MB ``agent_id`` grew
    the log by 20 MB and made ListClusters too big for a tenant's default client).

    The cluster name follows Karmada's rule for Cluster objects (a DNS-1123 label; Karmada
    further caps it at 48 for a namespace prefix we do not add). The agent id is free text
    (a pod name, a process id, a start time): bounded, and printable only, so it cannot
    forge a line of a text log."""
    if not msg.cluster:
        raise InvalidInput(f"{path}.cluster", "must not be empty")
    dns_label(msg.cluster, f"{path}.cluster")
    _text(f"{path}.agentId", msg.agent_id, AGENT_ID_MAX_CHARS)
    if not msg.agent_id.isprintable():
        raise InvalidInput(f"{path}.agentId", "must be printable characters (no newlines or control characters)")


def check_taint_request(msg: clusters_pb2.TaintClusterRequest, limits: Limits = DEFAULT_LIMITS) -> None:
    """Bound ``TaintCluster`` before it is applied. Admin taints are stored with the cluster
    and listed to every tenant, like the cluster taints of a snapshot, so they share that
    cap (``max_node_taints``); unbounded, 8,000 taints in one request (167 KB) once held
    the event loop for 4.4 s."""
    _count("add", msg.add, limits.max_node_taints, "taints")
    _count("remove", msg.remove, limits.max_node_taints, "taints to remove")


def _status_pods(pods: Sequence[agent_pb2.PodStatus], path: str, limits: Limits) -> None:
    # A pod and its replacement are both listed while the old one terminates: twice the replicas.
    _count(path, pods, 2 * limits.max_replicas_per_job, "pods (twice the replicas a job may have)")
    for i, pod in enumerate(pods):
        _text(f"{path}[{i}].task", pod.task, 63)
        _text(f"{path}[{i}].node", pod.node, 253)
        _text(f"{path}[{i}].phase", pod.phase, 64)
        _text(f"{path}[{i}].message", pod.message, limits.max_string_chars)


def _status_events(events: Sequence[agent_pb2.WorkEvent], path: str, limits: Limits) -> None:
    # Each event is a store transaction and a job event: 5,000 took 11.7 s and set restarts=5000.
    _count(path, events, STATUS_MAX_EVENTS, "events per report (the agent sends more in several reports)")
    for i, event in enumerate(events):
        _text(f"{path}[{i}].action", event.action, 64)
        _text(f"{path}[{i}].reason", event.reason, limits.max_string_chars)
        _text(f"{path}[{i}].task", event.task, 63)


def check_status(msg: agent_pb2.WorkStatus, limits: Limits = DEFAULT_LIMITS, path: str = "status") -> None:
    """Bound an agent's ``WorkStatus`` before any store work: its message and event reasons
    are stored in the tenant's job (two 8 MB texts made GetJob 16 MB), and its events each
    cost a transaction. A legitimate report carries one PodStatus per pod of the Work and
    at most one event per pod per reconcile pass; the agent clips its texts to
    ``max_string_chars`` and splits more events than ``STATUS_MAX_EVENTS`` over several
    reports (agents/runtime.py), so only a broken or hostile agent is refused."""
    _text(f"{path}.workId", msg.work_id, 64)
    _text(f"{path}.job", msg.job, 253)
    _text(f"{path}.message", msg.message, limits.max_string_chars)
    _status_pods(msg.pods, f"{path}.pods", limits)
    _status_events(msg.events, f"{path}.events", limits)
