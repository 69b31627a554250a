"""A snapshot's HyperNodes are bounded together: the members they list, the nodes they
select, and the nodes their labelMatch selectors examine (docs/design/limits.md).

Every bound is sized so that a Volcano tree (each node in one leaf, each HyperNode in one
parent of a higher tier, tiers 0 to ``max_tier``) passes at its largest; the hostile
shapes are the ones measured: HyperNodes overlapping on the whole cluster, millions of
members, and labelMatch selectors that look at half the cluster to select nothing. Costs
are counted (selections computed, sets merged), never timed.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.nodes import Node
from federation.domain.resources import Resources
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector, _NodeSelection, build_tree
from federation.v1 import types_pb2
from federation.wire.convert import snapshot_from_proto
from federation.wire.limits import Limits, check_snapshot

R = Resources.of(cpu=8000)
NODE, HYPER = types_pb2.MEMBER_TYPE_NODE, types_pb2.MEMBER_TYPE_HYPERNODE


def cluster(n: int, **labels: str) -> tuple[Node, ...]:
    return tuple(Node(f"n{i}", R, R, labels={"rack": f"r{i // 4}", **labels}) for i in range(n))


def by_regex(pattern: str) -> HyperNodeMember:
    return HyperNodeMember("Node", MemberSelector(regex=pattern))


def by_labels(**labels: str) -> HyperNodeMember:
    return HyperNodeMember("Node", MemberSelector(labels=labels))


def by_name(name: str) -> HyperNodeMember:
    return HyperNodeMember("Node", MemberSelector(exact_name=name))


def child(name: str) -> HyperNodeMember:
    return HyperNodeMember("HyperNode", MemberSelector(exact_name=name))


def refusal(specs: list[HyperNodeSpec], nodes: tuple[Node, ...], cap: int) -> InvalidInput:
    with pytest.raises(InvalidInput) as err:
        build_tree(specs, nodes, max_selected_nodes=cap)
    return err.value


def deepest_real_tree(n: int, tiers: range) -> list[HyperNodeSpec]:
    """A Volcano tree holding every node at every tier: one leaf of all ``n`` nodes by name
    at the lowest tier, then one HyperNode per tier above it, each the parent of the last."""
    low, *above = tiers
    specs = [HyperNodeSpec(f"t{low}", low, tuple(by_name(f"n{i}") for i in range(n)))]
    specs += [HyperNodeSpec(f"t{t}", t, (child(f"t{t - 1}"),)) for t in above]
    return specs


# ---------------------------------------------------------------- nodes selected by all HyperNodes


def test_overlapping_hypernodes_are_refused_at_the_first_one_past_the_cap() -> None:
    """Each HyperNode selects all 100 nodes twice (a regex and a label every node has):
    200 per HyperNode, so with a cap of 1,000 the sixth (index 5) passes it."""
    nodes = cluster(100, common="yes")
    specs = [HyperNodeSpec(f"h{k}", 1, (by_regex(".*"), by_labels(common="yes"))) for k in range(50)]
    err = refusal(specs, nodes, 1000)
    assert err.path == "hyperNodes[5]"
    assert err.rule.startswith("the members of HyperNode 'h5' bring the nodes selected by all HyperNodes to 1100, "
                               "over the limit of 1000")
    assert len(build_tree(specs[:5], nodes, max_selected_nodes=1000).domains["h4"].nodes) == 100  # at the cap


def test_the_refusal_comes_before_the_next_selection_is_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """One HyperNode of a regex and many distinct label selectors, each selecting every
    node: the cap is checked after each selection, so the members after it are never
    selected and nothing is merged."""
    nodes = cluster(50, **{f"k{i}": "v" for i in range(40)})
    computed: list[Mapping[str, str]] = []
    real = _NodeSelection._labelled

    def counting(self: _NodeSelection, wanted: Mapping[str, str], path: str) -> frozenset[str]:
        computed.append(wanted)
        return real(self, wanted, path)

    monkeypatch.setattr(_NodeSelection, "_labelled", counting)
    spec = HyperNodeSpec("h", 1, (by_regex(".*"), *(by_labels(**{f"k{i}": "v"}) for i in range(40))))
    assert refusal([spec], nodes, 120).path == "hyperNodes[0]"
    assert len(computed) == 2  # 50 + 50 + 50 passes 120: the other 38 selectors were never run


def test_a_repeated_selector_or_child_is_merged_and_counted_once() -> None:
    """20,000 references to one selector (or one child) used to merge the same set 20,000
    times; now the HyperNode shares it and counts it once."""
    nodes = cluster(200)
    specs = [HyperNodeSpec("leaf", 1, tuple(by_regex("^n") for _ in range(5000))),
             HyperNodeSpec("spine", 2, tuple(child("leaf") for _ in range(5000)))]
    tree = build_tree(specs, nodes, max_selected_nodes=400)  # 200 + 200: at the cap
    assert tree.domains["spine"].nodes is tree.domains["leaf"].nodes
    assert len(tree.domains["leaf"].nodes) == 200
    assert refusal(specs, nodes, 399).path == "hyperNodes[1]"


def test_hypernodes_sharing_one_selector_count_each_holding() -> None:
    """A set shared by many HyperNodes costs no memory, but every planning round walks each
    domain: each HyperNode holding the nodes counts them."""
    nodes = cluster(100)
    specs = [HyperNodeSpec(f"x{k}", 1, (by_regex("^n"),)) for k in range(30)]
    assert refusal(specs, nodes, 2999).path == "hyperNodes[29]"
    build_tree(specs, nodes, max_selected_nodes=3000)


@pytest.mark.parametrize("max_tier", [1, 4, 16])
def test_the_deepest_real_tree_the_limits_allow_is_accepted_at_the_edge(max_tier: int) -> None:
    """Every node at every tier from 0 to max_tier, in a snapshot at the node limit: exactly
    the derived cap (nodes x (max_tier + 1)). One node more at any tier is refused."""
    limits = Limits(max_snapshot_nodes=300, max_tier=max_tier)
    assert limits.max_selected_nodes == 300 * (max_tier + 1)
    msg = types_pb2.ClusterSnapshot(cluster="c")
    msg.taken_at.seconds = 1
    for i in range(300):
        msg.nodes.add(name=f"n{i}", allocatable={"cpu": "8"}, free={"cpu": "8"}, ready=True)
    for spec in deepest_real_tree(300, range(max_tier + 1)):
        hn = msg.hyper_nodes.add(name=spec.name, tier=spec.tier)
        for m in spec.members:
            hn.members.add(type=NODE if m.type == "Node" else HYPER, exact_name=m.selector.exact_name or "")
    check_snapshot(msg, limits)
    snap = snapshot_from_proto(msg, limits=limits)
    assert len(snap.tree.domains[f"t{max_tier}"].nodes) == 300
    extra = msg.hyper_nodes.add(name="other", tier=max_tier)
    extra.members.add(type=NODE, exact_name="n0")
    with pytest.raises(InvalidInput) as err:
        snapshot_from_proto(msg, limits=limits)
    assert err.value.path == f"snapshot.hyperNodes[{max_tier + 1}]"


def test_real_trees_use_a_fraction_of_the_default_cap() -> None:
    """Volcano's documented shapes at the default node limit: leaves of 16 by name (with a
    redundant regex beside the names, as Volcano's 1.11 example writes one), spines of 16
    leaves, one core; and leaves by a rack label. Neither comes near the cap."""
    limits = Limits()
    nodes = tuple(Node(f"node-{i}", R, R, labels={"rack": f"r{i // 16}"}) for i in range(limits.max_snapshot_nodes))
    leaves = [HyperNodeSpec(f"leaf-{k}", 1, (*(by_name(f"node-{i}") for i in range(16 * k, 16 * k + 16)),
                                             by_regex(f"^node-{16 * k}$")))
              for k in range(len(nodes) // 16)]
    spines = [HyperNodeSpec(f"spine-{s}", 2, tuple(child(f"leaf-{k}") for k in range(16 * s, min(16 * s + 16,
                                                                                                  len(leaves)))))
              for s in range((len(leaves) + 15) // 16)]
    core = HyperNodeSpec("core", 3, tuple(child(s.name) for s in spines))
    tree = build_tree([core, *spines, *leaves], nodes, max_selected_nodes=limits.max_selected_nodes // 4)
    assert tree.domains["core"].nodes == {n.name for n in nodes}
    racks = [HyperNodeSpec(f"rack-{k}", 1, (by_labels(rack=f"r{k}"),)) for k in range(len(nodes) // 16)]
    build_tree([*racks, HyperNodeSpec("top", 2, tuple(child(r.name) for r in racks))], nodes,
               max_selected_nodes=limits.max_selected_nodes // 4)


def test_a_snapshot_read_back_from_the_store_is_not_counted_again() -> None:
    """It was accepted at the edge, maybe under higher limits than this process has."""
    from federation.domain.clusters import ClusterSnapshot

    specs = [HyperNodeSpec(f"x{k}", 1, (by_regex("^n"), by_labels(rack="r0"))) for k in range(30)]
    assert refusal(specs, cluster(100), 1000).path == "hyperNodes[9]"  # 104 each
    assert len(ClusterSnapshot("c", cluster(100), tuple(specs)).tree.domains) == 30


# ---------------------------------------------------------------- labelMatch examining


def test_label_selectors_that_examine_much_to_select_nothing_are_refused_naming_the_member() -> None:
    """Half the nodes carry a0..a7, the other half b0..b7: a selector of seven a-labels and
    one b-label looks at the first half seven times and selects none. Selected-node
    counting never sees it; examining is counted."""
    nodes = tuple(Node(f"n{i}", R, R, labels={f"{'a' if i < 50 else 'b'}{k}": "v" for k in range(8)})
                  for i in range(100))

    def sneaky(s: int) -> HyperNodeMember:
        return by_labels(**{f"a{k}": "v" for k in range(8) if k != s % 8}, **{f"b{s // 8}": "v"})

    spec = HyperNodeSpec("h", 1, tuple(sneaky(s) for s in range(64)))
    err = refusal([spec], nodes, 1000)  # each examines 7 x 50 = 350: six a-labels, then the b-label
    assert err.path == "hyperNodes[0].spec.members[2].selector.labelMatch"
    assert "labelMatch selectors examine 1050 nodes together, over the limit of 1000" in err.rule
    assert build_tree([spec], nodes).domains["h"].nodes == frozenset()  # what it meant: nothing


def test_a_label_selector_repeated_is_examined_once_and_one_label_examines_what_it_selects() -> None:
    nodes = cluster(400)  # 4 nodes a rack
    specs = [HyperNodeSpec(f"rack-{k}", 1, (by_labels(rack=f"r{k}"),) * 3) for k in range(100)]
    # 100 racks x 4 nodes: 400 examined, 400 selected; repeats are free.
    build_tree(specs, nodes, max_selected_nodes=400)
    assert refusal(specs, nodes, 399).path == "hyperNodes[99].spec.members[0].selector.labelMatch"


# ---------------------------------------------------------------- members of all HyperNodes


def test_the_members_of_all_hypernodes_are_bounded_by_nodes_plus_hypernodes() -> None:
    limits = Limits(max_snapshot_nodes=100, max_snapshot_hypernodes=20)
    assert limits.max_snapshot_members == 120
    msg = types_pb2.ClusterSnapshot(cluster="c")
    for k in range(4):
        hn = msg.hyper_nodes.add(name=f"h{k}", tier=1)
        for j in range(30):
            hn.members.add(type=NODE, exact_name=f"n{j}")
    check_snapshot(msg, limits)  # 120: at the limit
    msg.hyper_nodes.add(name="h4", tier=1).members.add(type=NODE, exact_name="n0")
    with pytest.raises(InvalidInput) as err:
        check_snapshot(msg, limits)
    assert err.value.path == "snapshot.hyperNodes[4].spec.members"
    assert err.value.rule.startswith("brings the snapshot's HyperNode members to 121, over the limit of 120")


def test_the_derived_bounds_follow_the_limits_they_come_from() -> None:
    assert (Limits().max_snapshot_members, Limits().max_selected_nodes) == (40_000, 340_000)
    raised = Limits(max_snapshot_nodes=50_000, max_snapshot_hypernodes=30_000, max_tier=3)
    assert (raised.max_snapshot_members, raised.max_selected_nodes) == (80_000, 200_000)
