"""Volcano's default node and HyperNode scores, for the ``volcano-greedy`` baseline.

Modelled from volcano-sh/volcano at ed72c7c (2026-08-20); no code is copied. With the
plugins of ``installer/helm/chart/volcano/config/volcano-scheduler.conf`` plus
``network-topology-aware`` (which HyperNode scheduling needs; the CI configuration
``volcano-scheduler-ci.conf`` adds it with default arguments), the score of a node for one
pod is the sum of (``pkg/scheduler/util/scheduler_helper.go`` ``PrioritizeNodes``):

* **nodeorder** (``pkg/scheduler/plugins/nodeorder/nodeorder.go``, default weights):
  Kubernetes' NodeResourcesLeastAllocated over CPU and memory (weights 50/50, weight 1),
  an integer score that *prefers empty nodes*, and NodeResourcesBalancedAllocation over
  CPU, memory and ``nvidia.com/gpu`` (weight 1; Kubernetes counts a scalar resource only
  for pods that request it). Node affinity, taint toleration, pod
  affinity, topology spread and image locality score every node alike here and are left out.
* **binpack** (``pkg/scheduler/plugins/binpack/binpack.go``): weight 1 over CPU and memory
  only (GPUs count only when listed in ``binpack.resources``). Its score is the exact
  complement of LeastAllocated's, so with default weights the two cancel up to
  LeastAllocated's integer rounding: **Volcano's default configuration does not bin-pack
  nodes**. That rounding is kept, because it is what breaks many ties.
* **network-topology-aware** (``pkg/scheduler/plugins/network-topology-aware/
  network_topology_aware.go``): for a job with a ``networkTopology``, the tier score of the
  lowest common HyperNode of the node's leaf and the HyperNode holding the job's pods placed
  so far (nothing for the first pod), the ties at the top broken by the share of the job's
  tasks already in the node's leaf; for a job without one, a HyperNode bin-pack averaged
  over tiers with weight 0.8^(tier-1) (``hypernode.binpack.normal-pod``, on by default).
  Its tiers include the virtual ``<cluster-top-hypernode>`` one above the highest real
  tier (``pkg/scheduler/framework/session.go`` ``addClusterTopHyperNode``).

The best node wins; equal scores are broken **at random**
(``SelectBestNodeAndScore``), as are equal HyperNode scores (``SelectBestHyperNodeAndScore``
and the map walk of ``selectBestHyperNodeForJob``). The model draws those ties from a
``random.Random`` seeded with ``SEED`` and the round's time, so a run is reproducible and
other seeds give the spread of the real scheduler over repeated runs.

A HyperNode's score for a gang (``HyperNodeOrderFn``) is the bin-pack of its summed requests
over CPU and memory (``hypernode.binpack.cpu``/``memory``, weight 1; 0 when they overflow).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Node
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.domain.topology import ROOT_DOMAIN, HyperNodeTree

MAX_NODE_SCORE = 100
LEAST_ALLOCATED = ((CPU, 50), (MEMORY, 50))
BALANCED = (CPU, MEMORY, GPU)
BINPACK = (CPU, MEMORY)
FADING = 0.8
TOP = "<cluster-top-hypernode>"
#: Seed of the random tie-breaks (``tie_breaker``); the bench uses 0.
SEED = 0

T = TypeVar("T")


def tie_breaker(now: float) -> random.Random:
    """The round's source of random tie-breaks (deterministic: ``SEED`` and the round time)."""
    return random.Random(f"volcano:{SEED}:{now!r}")


def pick(scored: Sequence[tuple[float, T]], rng: random.Random) -> T | None:
    """The item of highest score, a uniformly random one among equal scores."""
    if not scored:
        return None
    best = max(s for s, _ in scored)
    top = [item for s, item in scored if math.isclose(s, best, rel_tol=0.0, abs_tol=1e-9)]
    return top[0] if len(top) == 1 else top[rng.randrange(len(top))]


@dataclass(frozen=True)
class Levels:
    """Volcano's session view of one cluster's HyperNodes: the real ones plus the virtual top."""

    tiers: tuple[int, ...]
    members: dict[str, frozenset[str]]
    tier_of: dict[str, int]
    of_node: dict[tuple[int, str], str]

    @property
    def min_tier(self) -> int:
        return self.tiers[0]

    @property
    def max_tier(self) -> int:
        return self.tiers[-1]

    def leaf(self, node: str) -> str | None:
        """``FindHyperNodeForNode``: the node's HyperNode of the lowest tier, if any."""
        return self.of_node.get((self.min_tier, node))

    def lca(self, a: str, b: str) -> str:
        """The lowest HyperNode holding both ``a`` and ``b`` (the top holds everything)."""
        both = self.members[a] | self.members[b]
        node = next(iter(self.members[b]))
        for tier in self.tiers:
            name = self.of_node.get((tier, node))
            if name is not None and both <= self.members[name]:
                return name
        return TOP

    def tier_score(self, tier: int) -> float:
        """``scoreHyperNodeWithTier``: (maxTier - tier) / (maxTier - minTier), in [0, 1]."""
        if self.min_tier == self.max_tier:
            return 1.0
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return 0.0


_LEVELS: dict[int, tuple[HyperNodeTree, Levels]] = {}


def levels(cluster: ClusterSnapshot) -> Levels:
    """The cluster's ``Levels``, remembered by tree identity (trees are immutable)."""
    tree = cluster.tree
    hit = _LEVELS.get(id(tree))
    if hit is not None and hit[0] is tree:
        return hit[1]
    real = [d for d in tree.domains.values() if d.name != ROOT_DOMAIN]
    top_tier = max((d.tier for d in real), default=0) + 1
    members = {d.name: d.nodes for d in real}
    members[TOP] = frozenset(n.name for n in cluster.nodes)
    tier_of = {d.name: d.tier for d in real}
    tier_of[TOP] = top_tier
    of_node = {(d.tier, n): d.name for d in real for n in d.nodes}
    of_node.update({(top_tier, n): TOP for n in members[TOP]})
    found = Levels(tuple(sorted(set(tier_of.values()))), members, tier_of, of_node)
    if len(_LEVELS) > 10_000:
        _LEVELS.clear()
    _LEVELS[id(tree)] = (tree, found)
    return found


def _ratio_mean(used: Resources, alloc: Resources, request: Resources, keys: Iterable[str]) -> float | None:
    """Mean over the requested ``keys`` of (used + request) / allocatable; None on overflow."""
    total, weight = 0.0, 0
    for key in keys:
        want = request.get(key)
        if want <= 0:
            continue
        cap = alloc.get(key)
        if cap > 0 and used.get(key) + want > cap:
            return None
        total += (used.get(key) + want) / cap if cap > 0 else 0.0
        weight += 1
    return total / weight if weight else 0.0


def least_allocated(node: Node, have: Resources, request: Resources) -> int:
    """Kubernetes NodeResourcesLeastAllocated (CPU and memory, 50/50), integer as there."""
    total, weight = 0, 0
    for key, w in LEAST_ALLOCATED:
        cap = node.allocatable.get(key)
        if cap <= 0:
            continue
        after = cap - have.get(key) + request.get(key)
        total += (0 if after > cap else (cap - after) * MAX_NODE_SCORE // cap) * w
        weight += w
    return total // weight if weight else 0


def balanced_allocation(node: Node, have: Resources, request: Resources) -> int:
    """Kubernetes NodeResourcesBalancedAllocation: (1 - std of the usage fractions) x 100."""
    fractions = []
    for key in BALANCED:
        cap = node.allocatable.get(key)
        if cap > 0 and (key in (CPU, MEMORY) or request.get(key) > 0):  # a scalar only when requested
            fractions.append(min(1.0, (cap - have.get(key) + request.get(key)) / cap))
    if len(fractions) < 2:
        return MAX_NODE_SCORE
    mean = sum(fractions) / len(fractions)
    std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1.0 - std) * MAX_NODE_SCORE)


def binpack(node: Node, have: Resources, request: Resources) -> float:
    """Volcano's binpack plugin with default weights (CPU and memory), 0..100."""
    used = node.allocatable - have
    ratio = _ratio_mean(used, node.allocatable, request, BINPACK)
    return 0.0 if ratio is None else ratio * MAX_NODE_SCORE


class DryRun:
    """One Volcano statement for one job in one cluster: tentative node free, HyperNode
    usage (the network-topology-aware plugin's resource cache, which allocation events
    update) and the pods placed so far."""

    def __init__(self, cluster: ClusterSnapshot, free: dict[str, Resources], topology: bool, tasks: int) -> None:
        self.levels = levels(cluster)
        self.alloc = {n.name: n.allocatable for n in cluster.nodes}
        self.free = dict(free)
        self.topology = topology
        self.tasks = max(tasks, 1)
        self.placed: list[str] = []
        self.allocated: str | None = None
        # HyperNode allocatable and used, for the resources its bin-pack reads (``BINPACK``).
        self._hn: dict[str, tuple[tuple[int, ...], list[int]]] = {}

    def _hypernode(self, name: str) -> tuple[tuple[int, ...], list[int]]:
        found = self._hn.get(name)
        if found is None:
            alloc = [0] * len(BINPACK)
            used = [0] * len(BINPACK)
            for n in self.levels.members[name]:
                have = self.alloc.get(n)
                if have is None:
                    continue
                free = self.free[n]
                for i, key in enumerate(BINPACK):
                    alloc[i] += have.get(key)
                    used[i] += have.get(key) - free.get(key)
            found = self._hn[name] = (tuple(alloc), used)
        return found

    def _hypernode_ratio(self, name: str, request: Resources) -> float | None:
        """Mean over CPU and memory requested of (used + request) / allocatable of the
        HyperNode; None when the request overflows it."""
        alloc, used = self._hypernode(name)
        total, weight = 0.0, 0
        for i, key in enumerate(BINPACK):
            want = request.get(key)
            if want <= 0:
                continue
            if alloc[i] > 0 and used[i] + want > alloc[i]:
                return None
            total += (used[i] + want) / alloc[i] if alloc[i] > 0 else 0.0
            weight += 1
        return total / weight if weight else 0.0

    def hypernode_score(self, name: str, request: Resources) -> float:
        """``getSubJobHyperNodeBinPackingScore`` (CPU and memory), x 100; 0 on overflow."""
        ratio = self._hypernode_ratio(name, request)
        return 0.0 if ratio is None else ratio * MAX_NODE_SCORE

    def _normal_pod(self, node: str, request: Resources) -> float:
        lv = self.levels
        total = weights = 0.0
        for tier in range(lv.min_tier, lv.max_tier + 1):
            w = FADING ** (tier - 1)
            name = lv.of_node.get((tier, node))
            if name is None:
                score = 1.0
            else:
                ratio = self._hypernode_ratio(name, request)
                score = 0.0 if ratio is None else ratio
            total += w * score
            weights += w
        return total / weights * MAX_NODE_SCORE if weights > 0 else 0.0

    def _topology(self, nodes: Sequence[Node]) -> dict[str, float]:
        lv = self.levels
        if self.allocated is None:
            return {}
        scores: dict[str, float] = {}
        for node in nodes:
            leaf = lv.leaf(node.name)
            if leaf is None:
                scores[node.name] = 0.0
            elif leaf == self.allocated:
                scores[node.name] = 1.0
            else:
                scores[node.name] = lv.tier_score(lv.tier_of[lv.lca(leaf, self.allocated)])
        best = max(scores.values(), default=0.0)
        tops = [n for n, s in scores.items() if s == best]
        if len(tops) > 1:
            for name in tops:
                leaf = lv.leaf(name)
                here = lv.members[leaf] if leaf is not None else frozenset()
                scores[name] += sum(1 for p in self.placed if p in here) / self.tasks
        return {n: s * MAX_NODE_SCORE for n, s in scores.items()}

    def scores(self, nodes: Sequence[Node], request: Resources) -> list[tuple[float, Node]]:
        """Each fitting node's summed score for one pod (``PrioritizeNodes``)."""
        topo = self._topology(nodes) if self.topology else {}
        out = []
        for node in nodes:
            have = self.free[node.name]
            value = least_allocated(node, have, request) + balanced_allocation(node, have, request) \
                + binpack(node, have, request)
            value += topo.get(node.name, 0.0) if self.topology else self._normal_pod(node.name, request)
            out.append((value, node))
        return out

    def place(self, node: str, request: Resources) -> None:
        """Allocate one pod on ``node``: free, HyperNode usage and the job's HyperNode move."""
        self.free[node] = self.free[node] - request
        lv = self.levels
        for tier in lv.tiers:
            name = lv.of_node.get((tier, node))
            if name is not None and name in self._hn:
                used = self._hn[name][1]
                for i, key in enumerate(BINPACK):
                    used[i] += request.get(key)
        self.placed.append(node)
        leaf = lv.leaf(node)
        if leaf is not None:
            self.allocated = leaf if self.allocated is None else lv.lca(self.allocated, leaf)
