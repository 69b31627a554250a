"""Cluster snapshots: what an agent reports and the planner reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field, replace

from federation.domain.errors import InvalidInput, require
from federation.domain.nodes import Node, Taint
from federation.domain.patterns import MatchBudget
from federation.domain.resources import Resources, total
from federation.domain.topology import HyperNodeSpec, HyperNodeTree, build_tree


@dataclass(frozen=True)
class ClusterSnapshot:
    """One member cluster at one instant.

    The HyperNode tree is validated and resolved at construction, so an object of this
    type always holds a usable tree: an invalid tree raises ``InvalidInput`` here and the
    snapshot is refused as a whole. ``match_budget`` bounds the CPU time of its
    ``regexMatch`` patterns where the snapshot arrives (the wire edge), and
    ``max_selected_nodes`` the nodes its HyperNodes select together; a snapshot read
    back from the store was accepted there and is not timed or counted again.
    """

    name: str
    nodes: tuple[Node, ...] = ()
    hypernodes: tuple[HyperNodeSpec, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    healthy: bool = True
    taken_at: float = 0.0
    tree: HyperNodeTree = field(init=False, compare=False, repr=False)
    match_budget: InitVar[MatchBudget | None] = None
    max_selected_nodes: InitVar[int | None] = None

    def __post_init__(self, match_budget: MatchBudget | None, max_selected_nodes: int | None) -> None:
        require(bool(self.name), "cluster", "cluster name must not be empty")
        seen: set[str] = set()
        for i, node in enumerate(self.nodes):
            if node.name in seen:
                raise InvalidInput(f"nodes[{i}].name", f"duplicate node {node.name!r}")
            seen.add(node.name)
        object.__setattr__(self, "tree", build_tree(self.hypernodes, self.nodes, match_budget,
                                                       max_selected_nodes))

    def __hash__(self) -> int:
        return hash((self.name, self.taken_at, len(self.nodes)))

    def keeping_tree(self, *, healthy: bool | None = None, taints: tuple[Taint, ...] | None = None,
                     free: Mapping[str, Resources] | None = None) -> ClusterSnapshot:
        """A copy with another health, other taints or other free room on some nodes, and the
        same resolved tree: none of these changes which nodes a HyperNode holds, and building
        the tree of a 20,000-node cluster again each round cost every cluster's rounds."""
        copy = object.__new__(ClusterSnapshot)
        for name, value in vars(self).items():
            object.__setattr__(copy, name, value)
        if healthy is not None:
            object.__setattr__(copy, "healthy", healthy)
        if taints is not None:
            object.__setattr__(copy, "taints", taints)
        if free:
            object.__setattr__(copy, "nodes", tuple(
                n if n.name not in free else replace(n, free=free[n.name]) for n in self.nodes))
        return copy

    @property
    def allocatable(self) -> Resources:
        return total(n.allocatable for n in self.nodes)

    @property
    def free(self) -> Resources:
        return total(n.free for n in self.nodes if n.usable)

    def node(self, name: str) -> Node | None:
        for n in self.nodes:
            if n.name == name:
                return n
        return None
