"""Scenario clusters: node groups and Volcano HyperNode manifests into domain snapshots.

The HyperNode manifests are read exactly as a member cluster holds them
(``topology.volcano.sh/v1alpha1`` HyperNode, see volcano-sh/volcano
``staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/hypernode_types.go``), converted
to ``HyperNodeSpec`` and validated as a whole tree by constructing a ``ClusterSnapshot``,
so a scenario with a bad tree is refused with the path of the offending manifest instead
of benchmarking a half-loaded topology.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from federation.domain.clusters import ClusterSnapshot
from federation.domain.errors import InvalidInput
from federation.domain.nodes import Node, Taint
from federation.domain.resources import Resources
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector
from federation.sim import fields as f

HYPERNODE_API = "topology.volcano.sh/v1alpha1"
_CLUSTER_KEYS = ("name", "labels", "taints", "nodeGroups", "hyperNodes")
_GROUP_KEYS = ("namePattern", "count", "allocatable", "labels", "taints")


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes named by ``name_pattern`` with ``{i}`` = 0..count-1."""

    name_pattern: str
    count: int
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()

    def node_names(self) -> tuple[str, ...]:
        return tuple(self.name_pattern.replace("{i}", str(i)) for i in range(self.count))


@dataclass(frozen=True)
class ClusterSpec:
    """One member cluster of a scenario; ``empty`` is its snapshot with nothing running."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    node_groups: tuple[NodeGroup, ...]
    hypernodes: tuple[HyperNodeSpec, ...]
    empty: ClusterSnapshot = field(compare=False, repr=False)

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.empty.nodes


def _taint(value: object, path: str, effects: tuple[str, ...] = ("NoSchedule", "NoExecute")) -> Taint:
    data = f.strict(value, path, ("key", "value", "effect"), required=("key",))
    effect = f.optional(data, "effect", "NoSchedule", f.string, path)
    if effect not in effects:
        raise InvalidInput(f.at(path, "effect"), f"must be {' or '.join(effects)}")
    return Taint(
        key=f.string(data["key"], f.at(path, "key")),
        value=f.optional(data, "value", "", lambda v, p: f.string(v, p, allow_empty=True), path),
        effect=effect,
    )


def _node_group(value: object, path: str) -> NodeGroup:
    data = f.strict(value, path, _GROUP_KEYS, required=("namePattern", "count", "allocatable"))
    pattern = f.string(data["namePattern"], f.at(path, "namePattern"))
    count = f.integer(data["count"], f.at(path, "count"), minimum=1)
    if count > 1 and "{i}" not in pattern:
        raise InvalidInput(f.at(path, "namePattern"), "must contain {i} when count > 1")
    allocatable = Resources.parse(f.mapping(data["allocatable"], f.at(path, "allocatable")), f.at(path, "allocatable"))
    if not allocatable:
        raise InvalidInput(f.at(path, "allocatable"), "must not be empty")
    taints = tuple(_taint(t, f.at(f.at(path, "taints"), j), ("NoSchedule", "NoExecute", "PreferNoSchedule"))
                   for j, t in enumerate(f.listed(data, "taints", path)))
    return NodeGroup(pattern, count, allocatable, f.labelled(data, "labels", path), taints)


def _selector(value: object, path: str) -> MemberSelector:
    data = f.strict(value, path, ("exactMatch", "regexMatch", "labelMatch"))
    if len(data) != 1:
        raise InvalidInput(path, "exactly one of exactMatch, regexMatch, labelMatch is required")
    if "exactMatch" in data:
        sub = f.strict(data["exactMatch"], f.at(path, "exactMatch"), ("name",), required=("name",))
        return MemberSelector(exact_name=f.string(sub["name"], f.at(path, "exactMatch.name")))
    if "regexMatch" in data:
        sub = f.strict(data["regexMatch"], f.at(path, "regexMatch"), ("pattern",), required=("pattern",))
        pattern = f.string(sub["pattern"], f.at(path, "regexMatch.pattern"))
        try:
            return MemberSelector(regex=pattern)
        except InvalidInput as exc:
            raise InvalidInput(f.at(path, "regexMatch.pattern"), exc.rule) from exc
    sub = f.strict(data["labelMatch"], f.at(path, "labelMatch"), ("matchLabels",))
    return MemberSelector(labels=f.labelled(sub, "matchLabels", f.at(path, "labelMatch")))


def _member(value: object, path: str) -> HyperNodeMember:
    data = f.strict(value, path, ("type", "selector"), required=("type", "selector"))
    kind = f.string(data["type"], f.at(path, "type"))
    selector = _selector(data["selector"], f.at(path, "selector"))
    try:
        return HyperNodeMember(kind, selector)
    except InvalidInput as exc:
        raise exc.under(path) from exc


def hypernode(value: object, path: str) -> HyperNodeSpec:
    """One HyperNode manifest as ``HyperNodeSpec`` (``path`` names it for errors)."""
    data = f.strict(value, path, ("apiVersion", "kind", "metadata", "spec"), required=("metadata", "spec"))
    api = f.optional(data, "apiVersion", HYPERNODE_API, f.string, path)
    if api != HYPERNODE_API:
        raise InvalidInput(f.at(path, "apiVersion"), f"must be {HYPERNODE_API}")
    if f.optional(data, "kind", "HyperNode", f.string, path) != "HyperNode":
        raise InvalidInput(f.at(path, "kind"), "must be HyperNode")
    meta = f.strict(data["metadata"], f.at(path, "metadata"), ("name", "labels"), required=("name",))
    f.labelled(meta, "labels", f.at(path, "metadata"))
    spec = f.strict(data["spec"], f.at(path, "spec"), ("tier", "tierName", "members"), required=("tier", "members"))
    members = f.sequence(spec["members"], f.at(path, "spec.members"))
    try:
        return HyperNodeSpec(
            name=f.string(meta["name"], f.at(path, "metadata.name")),
            tier=f.integer(spec["tier"], f.at(path, "spec.tier"), minimum=0),
            members=tuple(_member(m, f.at(f.at(path, "spec.members"), j)) for j, m in enumerate(members)),
            tier_name=f.optional(spec, "tierName", "", f.string, f.at(path, "spec")),
        )
    except InvalidInput as exc:
        if exc.path.startswith(path):
            raise
        raise exc.under(path) from exc


def cluster(value: object, path: str) -> ClusterSpec:
    """One ``clusters[i]`` entry; its tree is validated by building the empty snapshot."""
    data = f.strict(value, path, _CLUSTER_KEYS, required=("name", "nodeGroups"))
    name = f.string(data["name"], f.at(path, "name"))
    groups_raw = f.sequence(data["nodeGroups"], f.at(path, "nodeGroups"))
    if not groups_raw:
        raise InvalidInput(f.at(path, "nodeGroups"), "at least one node group is required")
    groups = tuple(_node_group(g, f.at(f.at(path, "nodeGroups"), j)) for j, g in enumerate(groups_raw))
    taints = tuple(
        _taint(t, f.at(f.at(path, "taints"), j))
        for j, t in enumerate(f.listed(data, "taints", path))
    )
    hyper = tuple(
        hypernode(h, f.at(f.at(path, "hyperNodes"), j))
        for j, h in enumerate(f.listed(data, "hyperNodes", path))
    )
    nodes: list[Node] = []
    for j, group in enumerate(groups):
        for node_name in group.node_names():
            try:
                nodes.append(Node(node_name, group.allocatable, group.allocatable, dict(group.labels),
                                  group.taints))
            except InvalidInput as exc:
                raise InvalidInput(f.at(f.at(path, "nodeGroups"), j) + ".namePattern", exc.rule) from exc
    cluster_labels = f.labelled(data, "labels", path)
    try:
        empty = ClusterSnapshot(name, tuple(nodes), hyper, cluster_labels, taints)
    except InvalidInput as exc:
        if exc.path.startswith("nodes["):
            raise InvalidInput(f.at(path, "nodeGroups"), exc.rule) from exc
        raise exc.under(path) from exc
    return ClusterSpec(name, cluster_labels, taints, groups, hyper, empty)
