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
from federation.domain.patterns import MatchBudget, PatternCostError, compile_pattern, select_names

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


def build_tree(specs: Sequence[HyperNodeSpec], nodes: Sequence[Node],
               budget: MatchBudget | None = None, max_selected_nodes: int | None = None) -> HyperNodeTree:
    """Validate HyperNode specs against the cluster's nodes and resolve them to domains.

    Rejects (``InvalidInput`` naming ``hyperNodes[i]...``): duplicate names, a HyperNode
    member that does not exist, a HyperNode with two parents, a member HyperNode whose
    tier is not lower than its parent's, cycles, ``regexMatch`` patterns that break a
    matching bound (``patterns.select_names``; ``budget`` bounds their CPU time), and
    HyperNodes whose members select more than ``max_selected_nodes`` nodes together
    (``_resolve``).
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
    _check_acyclic(by_name, parent, index)
    for child, par in parent.items():
        if by_name[child].tier >= by_name[par].tier:
            raise InvalidInput(
                f"hyperNodes[{index[child]}].spec.tier",
                f"member HyperNode {child!r} (tier {by_name[child].tier}) must have a lower tier than its parent "
                f"{par!r} (tier {by_name[par].tier})",
            )

    select = _NodeSelection(nodes, _regex_members(specs), budget, max_selected_nodes)
    resolved = _resolve(specs, index, select, max_selected_nodes)
    domains = {
        s.name: Domain(s.name, s.tier, resolved[s.name], parent.get(s.name), s.tier_name) for s in specs
    }
    all_nodes = frozenset(n.name for n in nodes)
    if not any(d.nodes >= all_nodes for d in domains.values()):
        top = max(s.tier for s in specs) + 1
        for name, dom in list(domains.items()):
            if dom.parent is None:
                domains[name] = Domain(dom.name, dom.tier, dom.nodes, ROOT_DOMAIN, dom.tier_name)
        domains[ROOT_DOMAIN] = Domain(ROOT_DOMAIN, top, all_nodes)
    return HyperNodeTree(domains)


def _resolve(specs: Sequence[HyperNodeSpec], index: Mapping[str, int], select: _NodeSelection,
             max_selected_nodes: int | None) -> dict[str, frozenset[str]]:
    """The nodes of each HyperNode: the union of what its members select.

    Children have lower tiers than their parents (checked before), so ascending tier
    resolves every child before its parent: no recursion, however deep the tree. A member
    selecting the same set as an earlier member of the HyperNode (a repeated selector or
    child) adds nothing and is not merged again, and a HyperNode of one distinct part
    shares that set: 20,000 leaves of one selector hold one set.

    ``max_selected_nodes`` bounds the nodes selected by all HyperNodes together, a node
    counted once for each HyperNode holding it, as each part is selected and before it is
    merged: HyperNodes that overlap (thousands, each selecting every node by a regex and a
    label) cost a set of the whole cluster each, seconds and gigabytes. In a Volcano tree
    each node is in one leaf and each HyperNode in one parent of a higher tier, so a
    HyperNode's members select disjoint nodes and the total is at most the nodes times the
    tiers (members that overlap within one HyperNode, as ``exactMatch node-0`` beside
    ``regexMatch node-[01]``, count their overlap twice). The HyperNode whose members
    bring the total past the bound is named.
    """
    resolved: dict[str, frozenset[str]] = {}
    selected = 0
    for spec in sorted(specs, key=lambda s: s.tier):
        parts: dict[int, frozenset[str]] = {}
        for j, member in enumerate(spec.members):
            part = (resolved[member.selector.exact_name or ""] if member.type == "HyperNode"
                    else select(member.selector, f"hyperNodes[{index[spec.name]}].spec.members[{j}].selector"))
            if id(part) in parts:
                continue
            parts[id(part)] = part
            selected += len(part)
            if max_selected_nodes is not None and selected > max_selected_nodes:
                raise InvalidInput(
                    f"hyperNodes[{index[spec.name]}]",
                    f"the members of HyperNode {spec.name!r} bring the nodes selected by all HyperNodes to "
                    f"{selected}, over the limit of {max_selected_nodes} (a node counts once for each HyperNode "
                    "holding it; a tree holds each node once per tier)")
        distinct = list(parts.values())
        resolved[spec.name] = distinct[0] if len(distinct) == 1 else frozenset().union(*distinct)
    return resolved


def _check_acyclic(by_name: Mapping[str, HyperNodeSpec], parent: Mapping[str, str], index: Mapping[str, int]) -> None:
    """Reject a cycle of HyperNode memberships, in time linear in the number of HyperNodes.

    Each walk up the parents stops at a HyperNode an earlier walk already cleared, so
    every HyperNode is visited once (walking every chain to its top was quadratic: a
    19,999-long chain took 40 s before the tier check rejected it). The first walk that
    meets its own path reports what the full walks did: its start and the repeated one.
    """
    cleared: set[str] = set()
    for name in by_name:
        path = [name]
        on_path = {name}
        cursor = parent.get(name)
        while cursor is not None and cursor not in cleared:
            if cursor in on_path:
                raise InvalidInput(f"hyperNodes[{index[name]}]", f"cycle through HyperNode {cursor!r}")
            path.append(cursor)
            on_path.add(cursor)
            cursor = parent.get(cursor)
        cleared.update(path)


def _regex_members(specs: Sequence[HyperNodeSpec]) -> dict[str, str]:
    """Each distinct Node-member pattern and the field path of its first use, in order."""
    first: dict[str, str] = {}
    for i, spec in enumerate(specs):
        for j, member in enumerate(spec.members):
            regex = member.selector.regex
            if member.type == "Node" and regex is not None and regex not in first:
                first[regex] = f"hyperNodes[{i}].spec.members[{j}].selector.regexMatch.pattern"
    return first


class _NodeSelection:
    """The nodes a Node member's selector picks, each distinct selector resolved once.

    Why: every member used to scan every node, so a snapshot of N nodes with one
    exactMatch leaf per node cost N^2 (35 s for 19,999, redone by every planning round).
    ``exactMatch`` is a name lookup; all distinct ``regexMatch`` patterns are matched
    together, one RE2 Set pass per node name (one pass per pattern cost 70 ms each on
    20,000 nodes: 70 s for a 1,000-leaf tree); ``labelMatch`` intersects per-label
    indexes, smallest first, and never scans the nodes. Results are frozensets shared
    between members.

    ``max_examined`` bounds the nodes the distinct ``labelMatch`` selectors look at
    together: a selector looks at the nodes of its rarest label once per further label,
    and one whose labels each hold half the cluster but never together selects nothing
    while examining 10,000 nodes 31 times (~35 ms each: a minute for 1,024 such selectors,
    which the selected-nodes bound does not see). A real selector (a rack, a hostname)
    examines about the nodes it selects.
    """

    def __init__(self, nodes: Sequence[Node], patterns: Mapping[str, str], budget: MatchBudget | None,
                 max_examined: int | None = None) -> None:
        self._nodes = nodes
        self._names = frozenset(n.name for n in nodes)
        self._by_label: dict[tuple[str, str], set[str]] | None = None
        self._done: dict[object, frozenset[str]] = {}
        self._max_examined = max_examined
        self._examined = 0
        if not patterns:
            return
        try:
            found = select_names(list(patterns), [n.name for n in nodes], budget)
        except PatternCostError as exc:
            raise InvalidInput(list(patterns.values())[exc.index], exc.rule) from None
        self._done.update(zip(patterns, found, strict=True))

    def __call__(self, sel: MemberSelector, path: str) -> frozenset[str]:
        """The nodes ``sel`` selects; ``path`` names it if its labelMatch breaks ``max_examined``."""
        if sel.exact_name is not None:
            return frozenset((sel.exact_name,)) if sel.exact_name in self._names else frozenset()
        if sel.regex is not None:  # every Node member's pattern was matched up front
            return self._done[sel.regex]
        key = tuple(sorted((sel.labels or {}).items()))
        found = self._done.get(key)
        if found is None:
            found = self._labelled(sel.labels or {}, f"{path}.labelMatch")
            self._done[key] = found
        return found

    def _labelled(self, wanted: Mapping[str, str], path: str) -> frozenset[str]:
        if not wanted:  # an empty labelMatch selects nothing, as in Volcano
            return frozenset()
        if self._by_label is None:
            self._by_label = {}
            for n in self._nodes:
                for pair in n.labels.items():
                    self._by_label.setdefault(pair, set()).add(n.name)
        empty: set[str] = set()
        sets = sorted((self._by_label.get(pair, empty) for pair in wanted.items()), key=len)
        found = sets[0]
        for other in sets[1:]:  # each step looks at the nodes found so far, the smaller side
            if not found:
                break
            self._examine(len(found), path)
            found = found & other
        self._examine(len(found), path)  # and copies what it keeps
        return frozenset(found)

    def _examine(self, count: int, path: str) -> None:
        self._examined += count
        if self._max_examined is not None and self._examined > self._max_examined:
            raise InvalidInput(path, f"the snapshot's distinct labelMatch selectors examine {self._examined} nodes "
                                     f"together, over the limit of {self._max_examined} (a selector examines the "
                                     "nodes of its rarest label once per further label); use fewer labels or "
                                     "exactMatch")
