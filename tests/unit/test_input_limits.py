"""Issue 10's hostile inputs, refused at the edge with the field path and the limit (pure checks)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.domain.errors import InvalidInput
from federation.domain.names import dns_label, label_value, qualified_name
from federation.domain.nodes import Node
from federation.domain.patterns import compile_pattern
from federation.domain.resources import QUANTITY_MAX, Resources, parse_quantity
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector, build_tree
from federation.v1 import types_pb2
from federation.wire.limits import Limits, check_job_spec, check_snapshot


def _refused(fn: Callable[..., object], *args: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as err:
        fn(*args)
    return err.value


# ---------------------------------------------------------------- quantities


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("8", 8, id="plain integer"),
    pytest.param("64Gi", 64 << 30, id="binary suffix"),
    pytest.param("1e3", 1000, id="decimal exponent"),
    pytest.param("1E", 10**18, id="E alone is exa, not an exponent"),
    pytest.param(".5", 1, id="leading dot rounds up to one byte"),
    pytest.param("5.", 5, id="trailing dot"),
    pytest.param("+2", 2, id="explicit plus sign"),
    pytest.param("1e-999999", 1, id="a tiny positive amount is one unit, at once"),
    pytest.param(str(QUANTITY_MAX), QUANTITY_MAX, id="int64 max is the largest accepted"),
])
def test_kubernetes_quantities_parse(text: str, expected: int) -> None:
    assert parse_quantity("memory", text) == expected


@pytest.mark.parametrize(("text", "rule"), [
    pytest.param("1e999999", "out of range", id="issue 10: 22 s of CPU on the event loop"),
    pytest.param("1e5000", "out of range", id="issue 10: answered INTERNAL"),
    pytest.param("1e1000000", "out of range", id="issue 10: answered INTERNAL too"),
    pytest.param(str(QUANTITY_MAX + 1), "out of range", id="one past int64"),
    pytest.param("1e3Gi", "malformed", id="exponent and suffix together (Kubernetes refuses it)"),
    pytest.param("8Gx", "malformed", id="unknown suffix"),
    pytest.param("1" * 65, "64-character limit", id="too long to be a quantity"),
    pytest.param("-1", "negative", id="negative"),
])
def test_hostile_quantities_are_refused_with_the_rule(text: str, rule: str) -> None:
    err = _refused(parse_quantity, "memory", text, "spec.tasks[0].resources.memory")
    assert err.path == "spec.tasks[0].resources.memory" and rule in err.rule


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.eE+-kKMGTPimnu ", max_size=80))
def test_any_quantity_text_is_parsed_or_refused_never_crashes(text: str) -> None:
    try:
        value = parse_quantity("cpu", text, "q")
    except InvalidInput as exc:
        assert exc.path == "q"
    else:
        assert 0 <= value <= QUANTITY_MAX


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("value", [
    pytest.param("a/b", id="issue 10: a slash"),
    pytest.param("x" * 10_000, id="issue 10: 10k characters"),
    pytest.param("Research", id="uppercase"),
    pytest.param("-a", id="leading dash"),
    pytest.param("", id="empty"),
])
def test_namespaces_must_be_dns_labels(value: str) -> None:
    assert "DNS-1123 label" in _refused(dns_label, value, "spec.namespace").rule


@pytest.mark.parametrize(("check", "value"), [
    pytest.param(qualified_name, "bad key!", id="issue 10: label key with a space and '!'"),
    pytest.param(qualified_name, "bad name//x", id="issue 10: resource name with two slashes"),
    pytest.param(qualified_name, "Example.com/gpu", id="uppercase prefix"),
    pytest.param(qualified_name, "a" * 64, id="name part over 63"),
    pytest.param(label_value, "has space", id="label value with a space"),
    pytest.param(label_value, "v" * 64, id="label value over 63"),
])
def test_label_keys_values_and_resource_names_follow_kubernetes(check: Callable[..., object], value: str) -> None:
    _refused(check, value, "spec.labels")


@pytest.mark.parametrize("value", ["nvidia.com/gpu", "cpu", "hugepages-2Mi", "app.kubernetes.io/name", "a_b.c-d"])
def test_ordinary_qualified_names_pass(value: str) -> None:
    assert qualified_name(value, "p") == value


# ---------------------------------------------------------------- regex


def test_catastrophic_backtracking_patterns_match_in_linear_time() -> None:
    """``(a+)+b`` on 'aaaa…c' backtracks for ever in Python's re; RE2 answers at once."""
    pattern = compile_pattern("(a+)+b", "pattern")
    assert pattern.search("a" * 100_000 + "c") is None


@pytest.mark.parametrize(("pattern", "rule"), [
    pytest.param(r"(a)\1", "invalid regular expression", id="backreference (Go's regexp has none)"),
    pytest.param("(?=a)", "invalid regular expression", id="lookahead"),
    pytest.param("a{1000}{1000}", "invalid regular expression", id="exploding repetition"),
    pytest.param("a" * 2000, "limit", id="too long"),
])
def test_patterns_go_would_refuse_are_refused(pattern: str, rule: str) -> None:
    assert rule in _refused(compile_pattern, pattern, "p").rule


def test_a_tree_with_a_hostile_member_regex_resolves_quickly() -> None:
    nodes = tuple(Node(name="a" * 60 + str(i), allocatable=Resources.of(cpu=1000), free=Resources.of(cpu=1000))
                  for i in range(50))
    spec = HyperNodeSpec("s1", 1, (HyperNodeMember("Node", MemberSelector(regex="(a+)+b")),))
    tree = build_tree((spec,), nodes)
    assert tree.domains["s1"].nodes == frozenset()


# ---------------------------------------------------------------- wire limits


def _spec(**kwargs: object) -> types_pb2.JobSpec:
    msg = types_pb2.JobSpec(name="j", queue="q", tasks=[types_pb2.TaskSpec(name="w", replicas=1,
                                                                           resources={"cpu": "1"})])
    for key, value in kwargs.items():
        setattr(msg, key, value)
    return msg


@pytest.mark.parametrize(("mutate", "path", "rule"), [
    pytest.param(lambda m: setattr(m.tasks[0], "replicas", 1_000_000_000), "spec.tasks[0].replicas",
                 "over the limit of 10000 replicas per task", id="issue 10: a billion replicas"),
    pytest.param(lambda m: [m.tasks.add(name=f"t{i}", replicas=5000) for i in range(2)], "spec.tasks",
                 "replicas per job", id="per-job sum"),
    pytest.param(lambda m: [m.tasks.add(name=f"t{i}", replicas=1) for i in range(64)], "spec.tasks",
                 "tasks per job", id="65 tasks"),
    pytest.param(lambda m: setattr(m, "namespace", "kube system"), "spec.namespace", "DNS-1123",
                 id="namespace grammar"),
    pytest.param(lambda m: m.labels.update({"bad key!": "v"}), "spec.labels['bad key!']", "label key",
                 id="issue 10: label key"),
    pytest.param(lambda m: m.network_topology.__setattr__("highest_tier_allowed", 100),
                 "spec.networkTopology.highestTierAllowed", "over the limit of 16", id="issue 10: tier 100"),
    pytest.param(lambda m: setattr(m.tasks[0], "template_json", " " * (256 * 1024 + 1)), "spec.tasks[0].template",
                 "bytes of JSON", id="template size"),
])
def test_job_specs_over_a_limit_are_refused_naming_the_field(
        mutate: Callable[[types_pb2.JobSpec], object], path: str, rule: str) -> None:
    msg = _spec()
    mutate(msg)
    err = _refused(check_job_spec, msg, Limits(), "spec")
    assert err.path == path and rule in err.rule, err


def test_limits_are_configurable() -> None:
    msg = _spec()
    msg.tasks[0].replicas = 20
    check_job_spec(msg, Limits())
    assert "limit of 16" in _refused(check_job_spec, msg, Limits(max_replicas_per_task=16), "spec").rule
    with pytest.raises(ValueError, match="max_tier"):
        Limits(max_tier=0)


def test_a_15000_node_snapshot_is_within_the_limits() -> None:
    snap = types_pb2.ClusterSnapshot(cluster="big")
    for i in range(15_000):
        snap.nodes.add(name=f"node-{i:05d}", allocatable={"cpu": "128", "memory": "2Ti", "nvidia.com/gpu": "8"},
                       labels={"topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": f"node-{i:05d}"})
    check_snapshot(snap)
    assert snap.ByteSize() < Limits().max_agent_message_bytes
    over = Limits(max_snapshot_nodes=14_999)
    assert _refused(check_snapshot, snap, over, "snapshot").path == "snapshot.nodes"


def test_snapshot_members_and_tiers_are_bounded() -> None:
    snap = types_pb2.ClusterSnapshot(cluster="c")
    hn = snap.hyper_nodes.add(name="s", tier=99)
    hn.members.add(regex="a")
    assert _refused(check_snapshot, snap).path == "snapshot.hyperNodes[0].spec.tier"
    hn.tier = 1
    hn.members.add(regex="x" * 5000)
    assert _refused(check_snapshot, snap).path == "snapshot.hyperNodes[0].spec.members[1].selector.regexMatch.pattern"


@settings(max_examples=200, deadline=None)
@given(replicas=st.integers(min_value=-(2**31), max_value=2**31 - 1),
       namespace=st.text(max_size=300), label=st.text(max_size=100), tier=st.integers(0, 2**31 - 1))
def test_generated_hostile_specs_are_accepted_only_within_bounds(replicas: int, namespace: str, label: str,
                                                                 tier: int) -> None:
    msg = _spec()
    msg.tasks[0].replicas = replicas
    msg.namespace = namespace
    msg.labels[label or "k"] = "v"
    msg.network_topology.highest_tier_allowed = tier
    try:
        check_job_spec(msg)
    except InvalidInput as exc:
        assert exc.path.startswith("spec.")
    else:
        assert replicas <= 10_000 and tier <= 16 and len(namespace) <= 63
        assert json.dumps(namespace)  # the accepted namespace is a plain DNS label


_HOSTILE = st.one_of(st.text(max_size=30), st.sampled_from(
    ["1e300000", "1e-300000", "(a+)+b", r"(a)\1", "kube-system", "a/b", "9" * 70, "", "-1", "1e3Gi", "x" * 300]))


@settings(max_examples=200, deadline=None)
@given(node=_HOSTILE, quantity=_HOSTILE, label=_HOSTILE, regex=_HOSTILE, tier=st.integers(-5, 2**31 - 1))
def test_generated_hostile_snapshots_are_parsed_or_refused_with_a_snapshot_path(
        node: str, quantity: str, label: str, regex: str, tier: int) -> None:
    from federation.wire.convert import snapshot_from_proto

    snap = types_pb2.ClusterSnapshot(cluster="c")
    snap.nodes.add(name=node or "n", allocatable={"memory": quantity}, free={"cpu": "1"}, labels={label or "k": "v"})
    hn = snap.hyper_nodes.add(name="s", tier=tier)
    hn.members.add(type=types_pb2.MEMBER_TYPE_NODE, regex=regex or ".*")
    try:
        check_snapshot(snap)
        snapshot_from_proto(snap, "snapshot")
    except InvalidInput as exc:
        assert exc.path.startswith("snapshot"), exc
