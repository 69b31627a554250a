"""HyperNode trees cost time linear in their size, and snapshot conversion is bounded.

Costs are counted (nodes scanned, parent lookups, decodes), never timed: a 19,999-node
snapshot with one exactMatch leaf per node took 35 s to resolve (every member scanned
every node) and a 19,999-long tier-1 chain took 40 s before it was rejected (every
HyperNode walked its whole parent chain). Correctness is checked against the naive
resolution those replaced.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Iterator, Mapping

import pytest

from federation.domain.clusters import ClusterSnapshot
from federation.domain.errors import InvalidInput
from federation.domain.nodes import Node
from federation.domain.resources import Resources
from federation.domain.topology import (
    HyperNodeMember,
    HyperNodeSpec,
    MemberSelector,
    _check_acyclic,
    build_tree,
)
from federation.service.snapshot_parsing import SnapshotParsing, Superseded
from federation.store.clusters import SnapshotCache
from federation.store.codec import snapshot_to_json

R = Resources.of(gpu=8, cpu=64_000)


class CountingNodes(tuple[Node, ...]):
    """A node tuple that counts the nodes every iteration over it yields."""

    scanned = 0

    def __iter__(self) -> Iterator[Node]:
        for node in super().__iter__():
            CountingNodes.scanned += 1
            yield node


class CountingParents(dict[str, str]):
    lookups = 0

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        CountingParents.lookups += 1
        return super().get(key, default)


def nodes(n: int) -> CountingNodes:
    return CountingNodes(Node(f"n{i}", R, R, labels={"rack": f"r{i // 8}", "zone": f"z{i % 2}"}) for i in range(n))


def node_member(**selector: object) -> HyperNodeMember:
    return HyperNodeMember("Node", MemberSelector(**selector))  # type: ignore[arg-type]


def hyper_member(name: str) -> HyperNodeMember:
    return HyperNodeMember("HyperNode", MemberSelector(exact_name=name))


def scanned(specs: list[HyperNodeSpec], cluster: CountingNodes) -> int:
    CountingNodes.scanned = 0
    build_tree(specs, cluster)
    return CountingNodes.scanned


@pytest.mark.parametrize("n", [500, 4000])
def test_exact_leaves_scan_the_nodes_a_constant_number_of_times(n: int) -> None:
    cluster = nodes(n)
    leaves = [HyperNodeSpec(f"leaf-{i}", 1, (node_member(exact_name=f"n{i}"),)) for i in range(n)]
    spine = HyperNodeSpec("spine", 2, tuple(hyper_member(f"leaf-{i}") for i in range(n)))
    assert scanned([spine, *leaves], cluster) <= 3 * n  # was n * n


def test_a_regex_or_label_selector_repeated_by_many_members_scans_the_nodes_once() -> None:
    n = 2000
    cluster = nodes(n)
    regex = [HyperNodeSpec(f"x{i}", 1, (node_member(regex="^n1"),)) for i in range(n)]
    assert scanned(regex, cluster) <= 3 * n
    labels = [HyperNodeSpec(f"r{i}", 1, (node_member(labels={"rack": f"r{i % 50}", "zone": "z0"}),))
              for i in range(n)]
    assert scanned(labels, cluster) <= 3 * n  # the label index is built once; lookups never scan


def test_members_of_one_selector_share_one_node_set() -> None:
    cluster = nodes(100)
    tree = build_tree([HyperNodeSpec(f"x{i}", 1, (node_member(regex="^n"),)) for i in range(10)], cluster)
    assert len({id(tree.domains[f"x{i}"].nodes) for i in range(10)}) == 1


@pytest.mark.parametrize("n", [1000, 8000])
def test_cycle_check_looks_up_each_parent_a_constant_number_of_times(n: int) -> None:
    specs = {f"h{i}": HyperNodeSpec(f"h{i}", n - i, (node_member(exact_name="n0"),)) for i in range(n)}
    parents = CountingParents({f"h{i + 1}": f"h{i}" for i in range(n - 1)})
    CountingParents.lookups = 0
    _check_acyclic(specs, parents, {name: i for i, name in enumerate(specs)})
    assert CountingParents.lookups <= 2 * n  # was n * n / 2


def test_a_long_tier_one_chain_is_rejected_for_its_tiers() -> None:
    n = 19_999
    chain = [HyperNodeSpec(f"h{i}", 1, (hyper_member(f"h{i + 1}"),)) for i in range(n - 1)]
    chain.append(HyperNodeSpec(f"h{n - 1}", 1, (node_member(exact_name="n0"),)))
    with pytest.raises(InvalidInput, match=r"hyperNodes\[1\]\.spec\.tier"):
        build_tree(chain, nodes(1))


def test_a_deep_valid_tree_resolves_without_recursion() -> None:
    depth = 5000  # deeper than the interpreter's recursion limit; tiers are bounded only on the wire
    chain = [HyperNodeSpec(f"h{i}", depth - i, (hyper_member(f"h{i + 1}"),)) for i in range(depth - 1)]
    chain.append(HyperNodeSpec(f"h{depth - 1}", 1, (node_member(exact_name="n0"),)))
    assert build_tree(chain, nodes(2)).domains["h0"].nodes == {"n0"}


def test_cycles_are_reported_as_before() -> None:
    specs = [HyperNodeSpec("x", 1, (node_member(exact_name="n0"),)),
             HyperNodeSpec("a", 3, (hyper_member("b"), hyper_member("x"))),
             HyperNodeSpec("b", 2, (hyper_member("a"),))]
    # The walk from the first HyperNode reaching the cycle names it and the repeated one.
    with pytest.raises(InvalidInput, match=r"hyperNodes\[0\]: cycle through HyperNode 'a'"):
        build_tree(specs, nodes(1))


def naive(spec: HyperNodeSpec, by_name: Mapping[str, HyperNodeSpec], cluster: tuple[Node, ...]) -> set[str]:
    """The resolution build_tree used to do: every member scans every node."""
    out: set[str] = set()
    for m in spec.members:
        sel = m.selector
        if m.type == "HyperNode":
            out |= naive(by_name[sel.exact_name or ""], by_name, cluster)
        elif sel.exact_name is not None:
            out |= {n.name for n in cluster if n.name == sel.exact_name}
        elif sel.regex is not None:
            import re
            out |= {n.name for n in cluster if re.search(sel.regex, n.name)}
        elif sel.labels:
            out |= {n.name for n in cluster if all(n.labels.get(k) == v for k, v in sel.labels.items())}
    return out


@pytest.mark.parametrize("seed", range(20))
def test_resolution_matches_the_naive_scan(seed: int) -> None:
    rng = random.Random(seed)
    cluster = tuple(nodes(rng.randint(1, 60)))
    leaves: list[HyperNodeSpec] = []
    for i in range(rng.randint(1, 12)):
        members = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["exact", "regex", "labels", "none"])
            if kind == "exact":
                members.append(node_member(exact_name=f"n{rng.randint(0, 70)}"))
            elif kind == "regex":
                members.append(node_member(regex=rng.choice(["^n1", "2$", "n[0-3]+$", "x"])))
            elif kind == "labels":
                members.append(node_member(labels=rng.choice([{"rack": f"r{rng.randint(0, 8)}"}, {"zone": "z1"},
                                                              {"rack": "r1", "zone": "z0"}, {}])))
            else:
                members.append(node_member(labels={"missing": "x"}))
        leaves.append(HyperNodeSpec(f"leaf-{i}", 1, tuple(members)))
    spine = HyperNodeSpec("spine", 2, tuple(hyper_member(s.name) for s in leaves[: len(leaves) // 2 + 1]))
    specs = [spine, *leaves]
    tree = build_tree(specs, cluster)
    by_name = {s.name: s for s in specs}
    for s in specs:
        assert tree.domains[s.name].nodes == naive(s, by_name, cluster), s.name


# ---------------------------------------------------------------- decoded snapshot cache

def raw(snapshot: ClusterSnapshot) -> str:
    return json.dumps(snapshot_to_json(snapshot))


def small(name: str, taken_at: float) -> ClusterSnapshot:
    return ClusterSnapshot(name, tuple(nodes(4)), (HyperNodeSpec("leaf", 1, (node_member(regex="^n"),)),),
                           taken_at=taken_at)


def test_an_unchanged_stored_snapshot_is_decoded_once() -> None:
    cache = SnapshotCache()
    text = raw(small("east", 1.0))
    first = cache.get("east", text)
    assert cache.get("east", text) is first
    assert cache.decoded == 1
    changed = cache.get("east", raw(small("east", 2.0)))
    assert changed is not first and changed is not None and changed.taken_at == 2.0
    assert cache.decoded == 2
    assert cache.get("east", "null") is None


def test_the_cache_keeps_a_bounded_number_of_clusters() -> None:
    cache = SnapshotCache(limit=2)
    texts = {name: raw(small(name, 1.0)) for name in ("a", "b", "c")}
    for name in ("a", "b", "c"):
        cache.get(name, texts[name])
    cache.get("c", texts["c"])
    cache.get("b", texts["b"])
    assert cache.decoded == 3
    cache.get("a", texts["a"])  # dropped as least recently read
    assert cache.decoded == 4


# ---------------------------------------------------------------- conversion executor

async def test_one_conversion_per_cluster_and_a_newer_one_supersedes_the_waiting_one() -> None:
    parsing = SnapshotParsing(workers=2)
    release = threading.Event()
    ran: list[str] = []

    def convert(tag: str) -> str:
        ran.append(tag)
        if tag == "first":
            release.wait(5)
        return tag

    first = asyncio.create_task(parsing.run("east", lambda: convert("first")))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(parsing.run("east", lambda: convert("second")))
    await asyncio.sleep(0)
    third = asyncio.create_task(parsing.run("east", lambda: convert("third")))
    other = await asyncio.wait_for(parsing.run("west", lambda: convert("west")), 5)  # not held up by east
    assert other == "west" and parsing.in_flight() == 1
    with pytest.raises(Superseded):
        await second
    release.set()
    assert await first == "first"
    assert await third == "third"
    assert ran == ["first", "west", "third"]
    assert parsing.in_flight() == 0


async def test_a_cancelled_caller_keeps_the_slot_until_its_thread_ends_and_a_waiter_never_runs() -> None:
    parsing = SnapshotParsing(workers=2)
    release = threading.Event()
    ran: list[str] = []

    def convert(tag: str) -> str:
        ran.append(tag)
        if tag == "running":
            release.wait(5)
        return tag

    running = asyncio.create_task(parsing.run("east", lambda: convert("running")))
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(parsing.run("east", lambda: convert("waiting")))
    await asyncio.sleep(0)
    running.cancel()  # the stream closed: its thread cannot be stopped, so it still counts
    waiting.cancel()  # a queued one is simply dropped
    await asyncio.sleep(0.05)
    assert parsing.in_flight() == 1
    release.set()
    for _ in range(100):
        if parsing.in_flight() == 0:
            break
        await asyncio.sleep(0.01)
    assert parsing.in_flight() == 0
    assert ran == ["running"]
    assert await parsing.run("east", lambda: convert("next")) == "next"


def test_health_taints_and_free_room_change_without_building_the_tree_again() -> None:
    from federation.domain.clusters import ClusterSnapshot
    from federation.domain.nodes import Node, Taint
    from federation.domain.resources import Resources
    from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector

    nodes = tuple(Node(f"n{i}", Resources({"cpu": 8000}), Resources({"cpu": 8000})) for i in range(4))
    members = tuple(HyperNodeMember("Node", MemberSelector(exact_name=f"n{i}")) for i in range(4))
    leaf = HyperNodeSpec("leaf", 1, members)
    snap = ClusterSnapshot("c", nodes, (leaf,))
    changed = snap.keeping_tree(healthy=False, taints=(Taint("k"),), free={"n1": Resources({"cpu": 1000})})
    assert changed.tree is snap.tree
    assert (changed.healthy, changed.taints) == (False, (Taint("k"),))
    assert [n.free for n in changed.nodes] == [Resources({"cpu": 8000}), Resources({"cpu": 1000}),
                                              Resources({"cpu": 8000}), Resources({"cpu": 8000})]
    assert changed == ClusterSnapshot("c", changed.nodes, (leaf,), taints=(Taint("k"),), healthy=False)
    assert snap.healthy and snap.nodes[1].free == Resources({"cpu": 8000})  # the original is unchanged


# ---------------------------------------------------------------- regexMatch patterns together

def regex_leaves(patterns: list[str]) -> list[HyperNodeSpec]:
    return [HyperNodeSpec(f"leaf-{k}", 1, (node_member(regex=p),)) for k, p in enumerate(patterns)]


def test_distinct_patterns_are_matched_in_one_pass_over_the_nodes() -> None:
    n = 2000
    cluster = nodes(n)
    specs = regex_leaves([f"^n{k}[0-9]*$" for k in range(300)])  # a leaf per prefix, as real trees do
    assert scanned(specs, cluster) <= 3 * n  # was one pass per pattern: 300 * n
    tree = build_tree(specs, cluster)
    assert tree.domains["leaf-7"].nodes == {f"n{i}" for i in range(n) if str(i).startswith("7")}


@pytest.mark.parametrize("seed", range(10))
def test_matching_patterns_together_finds_what_each_pattern_finds_alone(seed: int) -> None:
    """RE2's own per-pattern search is the reference (unanchored, as Go's MatchString)."""
    from federation.domain.patterns import compile_pattern

    rng = random.Random(seed)
    cluster = tuple(nodes(rng.randint(1, 300)))
    pool = ["^n1", "2$", "n[0-3]+$", "x", "^n(1|22)[5-9]?$", "", ".", "n1.*7", "^$", r"\d{3}", "(?i)N4", "n0*1$"]
    patterns = list(dict.fromkeys(rng.sample(pool, rng.randint(1, len(pool)))))
    tree = build_tree(regex_leaves(patterns), cluster)
    for k, p in enumerate(patterns):
        expected = {node.name for node in cluster if compile_pattern(p, "p").search(node.name)}
        assert tree.domains[f"leaf-{k}"].nodes == expected, p


def test_a_node_matched_by_too_many_patterns_is_refused_naming_the_pattern_past_the_limit() -> None:
    from federation.domain.patterns import MAX_PATTERNS_PER_NAME

    specs = regex_leaves([f"^n1$|z{k}" for k in range(MAX_PATTERNS_PER_NAME)])
    build_tree(specs, nodes(3))  # at the limit: accepted
    specs.append(HyperNodeSpec("one-more", 1, (node_member(exact_name="n0"), node_member(regex="^n1$|again"))))
    with pytest.raises(InvalidInput) as err:
        build_tree(specs, nodes(3))
    assert err.value.path == f"hyperNodes[{MAX_PATTERNS_PER_NAME}].spec.members[1].selector.regexMatch.pattern"
    assert "'n1' is matched by 65 distinct regexMatch patterns, over the limit of 64" in err.value.rule


def test_patterns_too_large_together_are_refused_naming_the_longest() -> None:
    patterns = [f"a[ab]{{{100 + k % 800}}}c{k}" for k in range(1000)]  # each fine alone (1 MiB each at most)
    patterns[3] = "a[ab]{999}c" + "x" * 10
    with pytest.raises(InvalidInput) as err:
        build_tree(regex_leaves(patterns), nodes(1))
    assert err.value.path == "hyperNodes[3].spec.members[0].selector.regexMatch.pattern"
    assert "need more than 32 MiB of RE2 program together" in err.value.rule


def test_matching_stops_at_its_cpu_budget_read_from_the_given_clock() -> None:
    from federation.domain.patterns import MatchBudget

    readings = iter(range(1000))

    def clock() -> float:  # one second per reading: the second name is over a 1.5 s budget
        return float(next(readings))

    specs = regex_leaves(["^n1", "^n22$"])
    with pytest.raises(InvalidInput) as err:
        build_tree(specs, nodes(40), MatchBudget(1.5, clock))
    assert err.value.path == "hyperNodes[1].spec.members[0].selector.regexMatch.pattern"
    assert "took over 1.5 s of CPU (the limit)" in err.value.rule
    assert build_tree(specs, nodes(40), MatchBudget(100.0, clock)).domains["leaf-1"].nodes == {"n22"}
    ok = ClusterSnapshot("c", tuple(nodes(40)), tuple(specs))  # no budget: read back from the store
    assert ok.tree.domains["leaf-0"].nodes == {"n1", *(f"n{i}" for i in range(10, 20))}


# ---------------------------------------------------------------- storing and parsing a big snapshot

def test_the_store_codec_reads_type_hints_per_type_not_per_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looking up each value's hint origin was most of the 4 s of storing a 20,000-node
    snapshot and the 9 s of reading it back; the work per type is now done once."""
    import typing

    from federation.store.codec import snapshot_from_json

    real = typing.get_origin
    calls = 0

    def counting(tp: object) -> object:
        nonlocal calls
        calls += 1
        return real(tp)

    monkeypatch.setattr(typing, "get_origin", counting)
    per_size = []
    for n in (5, 50, 500):  # the first builds the codec's functions for each type
        snap = ClusterSnapshot("c", tuple(nodes(n)), (HyperNodeSpec("leaf", 1, (node_member(regex="^n"),)),))
        calls = 0
        assert snapshot_from_json(snapshot_to_json(snap)) == snap
        per_size.append(calls)
    assert per_size[2] == per_size[1]  # was two per value: ~14 per node


def test_a_quantity_repeated_by_every_node_is_parsed_once() -> None:
    from federation.domain.resources import _canonical

    _canonical.cache_clear()
    for i in range(500):
        assert Resources.parse({"cpu": "192", "memory": "2048Gi", "nvidia.com/gpu": "8"}, f"nodes[{i}].free") == \
            Resources({"cpu": 192_000, "memory": 2048 << 30, "nvidia.com/gpu": 8})
    assert _canonical.cache_info().misses == 3
    with pytest.raises(InvalidInput) as err:  # a refusal still names its own field
        Resources.parse({"nvidia.com/gpu": "0.5"}, "nodes[7].free")
    assert err.value.path == "nodes[7].free.nvidia.com/gpu" and "not a whole number" in err.value.rule
