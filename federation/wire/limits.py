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

from collections.abc import Iterable, Mapping, Sized
from dataclasses import dataclass

from federation.domain.errors import InvalidInput
from federation.domain.names import dns_label, dns_subdomain, label_value, qualified_name
from federation.domain.patterns import PATTERN_MAX_CHARS
from federation.v1 import types_pb2

MIB = 1024 * 1024


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
    max_snapshot_nodes: int = 20_000
    max_snapshot_hypernodes: int = 20_000
    max_hypernode_members: int = 20_000
    max_node_labels: int = 512
    max_node_taints: int = 128
    max_request_bytes: int = 4 * MIB  # every RPC but the agent stream
    max_agent_message_bytes: int = 64 * MIB  # one agent stream message (a 15,000-node snapshot is ~10 MiB)

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} must be a positive integer, got {value!r}")


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


def check_labels(labels: Mapping[str, str], path: str, limit: int) -> None:
    """Kubernetes label keys (qualified names) and values, at most ``limit`` of them."""
    _count(path, labels, limit, "labels")
    for key, value in labels.items():
        key_path = f"{path}[{key[:80]!r}]"
        qualified_name(key, key_path, "label key")
        label_value(value, key_path)


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
        _policies(task.policies, f"{tpath}.policies", limits)
        size = len(task.template_json)
        if size > limits.max_template_bytes:
            raise InvalidInput(f"{tpath}.template", f"is {size} bytes of JSON, over the limit of "
                                                    f"{limits.max_template_bytes} bytes")
    if total > limits.max_replicas_per_job:
        raise _over(f"{path}.tasks", total, limits.max_replicas_per_job, "replicas per job (sum over tasks)")
    if msg.HasField("network_topology"):
        nt = msg.network_topology
        if nt.HasField("highest_tier_allowed") and nt.highest_tier_allowed > limits.max_tier:
            raise _over(f"{path}.networkTopology.highestTierAllowed", nt.highest_tier_allowed, limits.max_tier,
                        "tiers (the deepest tier any HyperNode tree may have)")
        if nt.HasField("highest_tier_name"):
            _text(f"{path}.networkTopology.highestTierName", nt.highest_tier_name, 253)
    _policies(msg.policies, f"{path}.policies", limits)
    _count(f"{path}.plugins", msg.plugins, 16, "plugins")
    for name, args in msg.plugins.items():
        _text(f"{path}.plugins", name, 63)
        _count(f"{path}.plugins.{name}", args.args, limits.max_plugin_args, "arguments")
        for j, arg in enumerate(args.args):
            _text(f"{path}.plugins.{name}[{j}]", arg, limits.max_string_chars)
    check_labels(msg.labels, f"{path}.labels", limits.max_labels)
    _tolerations(msg.tolerations, f"{path}.tolerations", limits)
    if msg.HasField("propagation"):
        _propagation(msg.propagation, f"{path}.propagation", limits)


def check_snapshot(msg: types_pb2.ClusterSnapshot, limits: Limits = DEFAULT_LIMITS,
                   path: str = "snapshot") -> None:
    """Bound an agent's snapshot: node and HyperNode counts, per-node labels and taints,
    member lists and regex lengths. Lengths only, not grammars, for node labels: they come
    from a kube-apiserver that validated them, and 15,000 nodes x 50 labels of regex
    matching would cost more than the rest of the snapshot."""
    _count(f"{path}.nodes", msg.nodes, limits.max_snapshot_nodes, "nodes per snapshot")
    _count(f"{path}.hyperNodes", msg.hyper_nodes, limits.max_snapshot_hypernodes, "HyperNodes per snapshot")
    check_labels(msg.labels, f"{path}.labels", limits.max_labels)
    _count(f"{path}.taints", msg.taints, limits.max_node_taints, "taints")
    for i, node in enumerate(msg.nodes):
        if len(node.name) > 253:
            raise InvalidInput(f"{path}.nodes[{i}].name", "is longer than 253 characters")
        if len(node.labels) > limits.max_node_labels:
            raise _over(f"{path}.nodes[{i}].labels", len(node.labels), limits.max_node_labels, "labels per node")
        if len(node.taints) > limits.max_node_taints:
            raise _over(f"{path}.nodes[{i}].taints", len(node.taints), limits.max_node_taints, "taints per node")
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
