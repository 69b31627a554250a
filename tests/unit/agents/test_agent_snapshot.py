"""Snapshot building: free resources and Volcano-style HyperNode label discovery."""

from __future__ import annotations

import pytest
from agentkit import LABEL_KEYS, LEAF, SPINE, fabric, gpu, node

from agents.core.records import PodRecord
from agents.core.snapshot import HOSTNAME_LABEL, build_snapshot, discover_hypernodes, to_nodes
from federation.domain.errors import InvalidInput
from federation.domain.resources import Resources
from federation.domain.states import PodPhase
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector


def pod(name: str, node_name: str | None, phase: str = PodPhase.RUNNING, gpus: int = 2,
        ns: str = "default") -> PodRecord:
    return PodRecord(name, ns, node=node_name, phase=phase, requests=gpu(gpus, cpu=1000))


FREE_CASES = [
    pytest.param([], 8, id="empty-node-is-all-free"),
    pytest.param([pod("a", "n00")], 6, id="running-pod-holds-its-requests"),
    pytest.param([pod("a", "n00", PodPhase.PENDING)], 6, id="bound-but-not-started-pod-holds-room"),
    pytest.param([pod("a", "n00", PodPhase.SUCCEEDED), pod("b", "n00", PodPhase.FAILED)], 8,
                 id="terminal-pods-free-their-room"),
    pytest.param([pod("a", None, PodPhase.PENDING)], 8, id="unbound-pod-holds-nothing"),
    pytest.param([pod("a", "n00", ns="other")], 6, id="other-schedulers-pods-count-too"),
    pytest.param([pod("a", "n00", gpus=6), pod("b", "n00", gpus=6)], 0, id="over-committed-node-is-full-not-negative"),
    pytest.param([pod("a", "n01")], 8, id="pods-on-other-nodes-do-not-count"),
]


@pytest.mark.parametrize(("pods", "free_gpus"), FREE_CASES)
def test_free_is_allocatable_minus_live_bound_requests(pods: list[PodRecord], free_gpus: int) -> None:
    nodes = to_nodes([node("n00"), node("n01")], pods)
    assert nodes[0].name == "n00"
    assert nodes[0].free.gpus == free_gpus
    assert nodes[0].allocatable == Resources.of(gpu=8, cpu=64000)


def test_label_discovery_builds_leaves_at_tier1_and_spines_at_tier2() -> None:
    specs = {s.name: s for s in discover_hypernodes(fabric(), LABEL_KEYS)}
    assert sorted(specs) == ["t1-l0", "t1-l1", "t1-l2", "t1-l3", "t2-s0", "t2-s1"]
    leaf = specs["t1-l0"]
    assert (leaf.tier, leaf.tier_name) == (1, LEAF)
    assert [(m.type, m.selector.exact_name) for m in leaf.members] == [("Node", "n00"), ("Node", "n01")]
    spine = specs["t2-s1"]
    assert (spine.tier, spine.tier_name) == (2, SPINE)
    assert [(m.type, m.selector.exact_name) for m in spine.members] == [("HyperNode", "t1-l2"), ("HyperNode", "t1-l3")]


def test_discovered_tree_resolves_to_domains_with_a_virtual_root() -> None:
    result = build_snapshot("c1", fabric(), [], label_keys=LABEL_KEYS)
    assert result.snapshot is not None and not result.error
    tree = result.snapshot.tree
    assert tree.domains["t2-s0"].nodes == frozenset({"n00", "n01", "n02", "n03"})
    assert tree.domains["t1-l3"].parent == "t2-s1"
    assert tree.max_tier == 3  # two spines, no common HyperNode: virtual root above them


def test_trailing_hostname_label_names_the_node_level_and_creates_no_hypernode() -> None:
    specs = discover_hypernodes(fabric(), (*LABEL_KEYS, HOSTNAME_LABEL))
    assert {s.tier for s in specs} == {1, 2}


def test_node_missing_a_label_stays_in_the_lower_tiers_only() -> None:
    nodes = [*fabric(), node("n99", leaf="l9")]  # no spine label
    specs = {s.name: s for s in discover_hypernodes(nodes, LABEL_KEYS)}
    assert "t1-l9" in specs
    assert all(m.selector.exact_name != "t1-l9" for s in specs.values() for m in s.members)


def test_leaf_under_two_spines_fails_the_whole_discovery() -> None:
    nodes = [node("a", leaf="l0", spine="s0"), node("b", leaf="l0", spine="s1")]
    with pytest.raises(InvalidInput, match="two parents"):
        discover_hypernodes(nodes, LABEL_KEYS)
    result = build_snapshot("c1", nodes, [], label_keys=LABEL_KEYS)
    assert result.snapshot is None
    assert "two parents" in result.error


def test_label_values_are_sanitised_into_distinct_dns_names() -> None:
    nodes = [node("a", leaf="Rack_A"), node("b", leaf="rack-a")]
    names = sorted(s.name for s in discover_hypernodes(nodes, (LEAF,)))
    assert names[0] == "t1-rack-a"
    assert names[1].startswith("t1-rack-a-") and len(names[1]) == len("t1-rack-a-") + 6


def test_duplicate_label_keys_are_refused() -> None:
    with pytest.raises(InvalidInput, match="duplicate"):
        discover_hypernodes(fabric(), (LEAF, LEAF))


def test_invalid_explicit_tree_is_reported_and_never_half_used() -> None:
    loop = (
        HyperNodeSpec("a", 2, (HyperNodeMember("HyperNode", MemberSelector(exact_name="b")),)),
        HyperNodeSpec("b", 1, (HyperNodeMember("HyperNode", MemberSelector(exact_name="a")),)),
    )
    result = build_snapshot("c1", fabric(), [], loop)
    assert result.snapshot is None
    assert result.error.startswith("invalid HyperNode tree:")


def test_discovered_name_clashing_with_an_explicit_hypernode_is_an_invalid_tree() -> None:
    explicit = (HyperNodeSpec("t1-l0", 1, (HyperNodeMember("Node", MemberSelector(exact_name="n00")),)),)
    result = build_snapshot("c1", fabric(), [], explicit, label_keys=LABEL_KEYS)
    assert result.snapshot is None and "duplicate HyperNode" in result.error


def test_snapshot_without_topology_is_one_flat_domain_and_reports_free() -> None:
    result = build_snapshot("c1", fabric(), [pod("a", "n00")], now=42.0)
    assert result.snapshot is not None
    assert result.snapshot.taken_at == 42.0
    assert result.snapshot.free.gpus == 8 * 8 - 2
    assert len(result.snapshot.tree.domains) == 1
