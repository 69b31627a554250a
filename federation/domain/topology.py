"""Volcano HyperNode trees: validation and resolution into network domains.

Semantics follow Volcano's ``topology.volcano.sh/v1alpha1`` HyperNode (see
docs/design "Network Topology Aware Scheduling" in volcano-sh/volcano): a lower tier is
a faster domain; members are Nodes or HyperNodes chosen by exactly one selector;
``regexMatch`` and ``labelMatch`` only apply to Node members. A tree is validated as a
whole and rejected with a reason, never half-loaded. A cluster without HyperNodes is one
tier-1 domain holding all its nodes. When no HyperNode covers every node, a virtual root
at ``max tier + 1`` holds them all (Volcano's ``<cluster-top-hypernode>``), so every gang
has some domain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from federation.domain.errors import InvalidInput, require
from federation.domain.nodes import Node
from federation.domain.patterns import compile_pattern

ROOT_DOMAIN = "<cluster-root>"
# Volcano's lowest HyperNode tier: the leaf domains, whose members are nodes.
LEAF_TIER = 1
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class MemberSelector:
    """Exactly one of ``exact_name``, ``regex`` or ``labels`` is set."""

    exact_name: str | None = None
    regex: str | None = None
    labels: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        chosen = [x for x in (self.exact_name, self.regex, self.labels) if x is not None]
        require(len(chosen) == 1, "selector", "exactly one of exactMatch, regexMatch, labelMatch is required")
        if self.regex is not None:
            compile_pattern(self.regex, "selector.regexMatch.pattern")

    def __hash__(self) -> int:
        labels = tuple(sorted(self.labels.items())) if self.labels is not None else None
        return hash((self.exact_name, self.regex, labels))


@dataclass(frozen=True)
class HyperNodeMember:
    type: str  # "Node" or "HyperNode"
    selector: MemberSelector

    def __post_init__(self) -> None:
        require(self.type in ("Node", "HyperNode"), "type", "must be Node or HyperNode")
        if self.type == "HyperNode":
            require(
                self.selector.exact_name is not None,
                "selector",
                "a HyperNode member must use exactMatch (regexMatch/labelMatch apply to Node members only)",
            )


@dataclass(frozen=True)
class HyperNodeSpec:
    name: str
    tier: int
    members: tuple[HyperNodeMember, ...]
    tier_name: str = ""

    def __post_init__(self) -> None:
        require(bool(_NAME.match(self.name or "")), "metadata.name", "must be a DNS subdomain name")
        require(isinstance(self.tier, int) and self.tier >= 0, "spec.tier", "must be an integer >= 0")
        require(len(self.members) > 0, "spec.members", "must not be empty")


@dataclass(frozen=True)
class Domain:
    """A network domain: a HyperNode (or the flat/virtual root) and the nodes under it."""

    name: str
    tier: int
    nodes: frozenset[str]
    parent: str | None = None
    tier_name: str = ""


@dataclass(frozen=True)
class HyperNodeTree:
    """Resolved domains of one cluster, keyed by name."""

    domains: Mapping[str, Domain] = field(default_factory=dict)

    @cached_property
    def by_tier(self) -> tuple[Domain, ...]:
        """Domains ordered by ascending tier, then by size, then name (deterministic)."""
        return tuple(sorted(self.domains.values(), key=lambda d: (d.tier, len(d.nodes), d.name)))

    @cached_property
    def max_tier(self) -> int:
        return max((d.tier for d in self.domains.values()), default=1)

    @cached_property
    def min_tier(self) -> int:
        return min((d.tier for d in self.domains.values()), default=1)

    def tier_for_name(self, tier_name: str) -> int | None:
        """The tier whose HyperNodes carry ``tierName``; None when no HyperNode has it."""
        tiers = [d.tier for d in self.domains.values() if d.tier_name == tier_name]
        return min(tiers) if tiers else None

    def domains_up_to(self, tier: int | None) -> tuple[Domain, ...]:
        return tuple(d for d in self.by_tier if tier is None or d.tier <= tier)

    def lowest_domain_holding(self, node_names: Iterable[str]) -> Domain | None:
        """The lowest-tier domain containing every given node (None if no domain does)."""
        wanted = frozenset(node_names)
        for domain in self.by_tier:
            if wanted <= domain.nodes:
                return domain
        return None

    def tier_holding(self, node_names: Iterable[str]) -> int:
        """Tier of the lowest domain holding every given node; one above the top tier when
        no domain does (nodes outside the tree)."""
        domain = self.lowest_domain_holding(node_names)
        return domain.tier if domain is not None else self.max_tier + 1


def flat_tree(nodes: Sequence[Node]) -> HyperNodeTree:
    root = Domain(ROOT_DOMAIN, 1, frozenset(n.name for n in nodes))
    return HyperNodeTree({root.name: root})


def build_tree(specs: Sequence[HyperNodeSpec], nodes: Sequence[Node]) -> HyperNodeTree:
    """Validate HyperNode specs against the cluster's nodes and resolve them to domains.

    Rejects (``InvalidInput`` naming ``hyperNodes[i]...``): duplicate names, a HyperNode
    member that does not exist, a HyperNode with two parents, a member HyperNode whose
    tier is not lower than its parent's, and cycles.
    """
    if not specs:
        return flat_tree(nodes)
    index: dict[str, int] = {}
    for i, spec in enumerate(specs):
        if spec.name in index:
            raise InvalidInput(f"hyperNodes[{i}].metadata.name", f"duplicate HyperNode {spec.name!r}")
        index[spec.name] = i
    by_name = {s.name: s for s in specs}
    parent: dict[str, str] = {}
    for i, spec in enumerate(specs):
        for j, member in enumerate(spec.members):
            if member.type != "HyperNode":
                continue
            child = member.selector.exact_name or ""
            path = f"hyperNodes[{i}].spec.members[{j}]"
            if child not in by_name:
                raise InvalidInput(path, f"unknown member HyperNode {child!r}")
            if child == spec.name:
                raise InvalidInput(path, f"cycle: HyperNode {spec.name!r} contains itself")
            if child in parent and parent[child] != spec.name:
                raise InvalidInput(path, f"HyperNode {child!r} is a member of both {parent[child]!r} and {spec.name!r}")
            parent[child] = spec.name
    for name in by_name:  # cycle detection by walking parents
        seen = {name}
        cursor = parent.get(name)
        while cursor is not None:
            if cursor in seen:
                raise InvalidInput(f"hyperNodes[{index[name]}]", f"cycle through HyperNode {cursor!r}")
            seen.add(cursor)
            cursor = parent.get(cursor)
    for child, par in parent.items():
        if by_name[child].tier >= by_name[par].tier:
            raise InvalidInput(
                f"hyperNodes[{index[child]}].spec.tier",
                f"member HyperNode {child!r} (tier {by_name[child].tier}) must have a lower tier than its parent "
                f"{par!r} (tier {by_name[par].tier})",
            )

    resolved: dict[str, frozenset[str]] = {}

    def resolve(name: str) -> frozenset[str]:
        if name in resolved:
            return resolved[name]
        members: set[str] = set()
        for member in by_name[name].members:
            sel = member.selector
            if member.type == "HyperNode":
                members |= resolve(sel.exact_name or "")
            elif sel.exact_name is not None:
                members |= {n.name for n in nodes if n.name == sel.exact_name}
            elif sel.regex is not None:
                pattern = compile_pattern(sel.regex, "selector.regexMatch.pattern")
                members |= {n.name for n in nodes if pattern.search(n.name)}
            elif sel.labels:  # an empty labelMatch selects nothing, as in Volcano
                wanted = dict(sel.labels)
                members |= {n.name for n in nodes if all(n.labels.get(k) == v for k, v in wanted.items())}
        resolved[name] = frozenset(members)
        return resolved[name]

    domains = {
        s.name: Domain(s.name, s.tier, resolve(s.name), parent.get(s.name), s.tier_name) for s in specs
    }
    all_nodes = frozenset(n.name for n in nodes)
    if not any(d.nodes >= all_nodes for d in domains.values()):
        top = max(s.tier for s in specs) + 1
        for name, dom in list(domains.items()):
            if dom.parent is None:
                domains[name] = Domain(dom.name, dom.tier, dom.nodes, ROOT_DOMAIN, dom.tier_name)
        domains[ROOT_DOMAIN] = Domain(ROOT_DOMAIN, top, all_nodes)
    return HyperNodeTree(domains)
