"""fedctl's edge inputs end in one line naming the field or flag and exit 2, never a traceback.

Deeply nested YAML (PyYAML composes recursively), YAML aliases that recurse or chain past
the depth limit, integers outside the proto field they travel as (int32 or int64), a
token gRPC cannot send as metadata, and a timeout that is not a positive finite number.
None of these needs a server: each is refused before the first call.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from federation.cli.fedctl import main
from federation.domain.errors import InvalidInput
from federation.domain.manifests import (
    MANIFEST_MAX_DEPTH,
    MANIFEST_MAX_VALUES,
    load_documents,
    load_manifests,
    load_queues,
)
from federation.domain.manifests_fields import INT32, INT64, integer

JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: j
  annotations: {{"federation.io/priority": "{priority}"}}
spec:
  queue: research
  tasks: [{{name: w, replicas: {replicas}, template: {{spec: {{containers: [{{name: c, image: busybox}}]}}}}}}]
"""
QUEUE = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: %d}\n"


def _nested(levels: int) -> str:
    return "a: " + "[" * levels + "]" * levels + "\n"


def _chain(links: int) -> str:
    return "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, links))


@pytest.mark.parametrize(("text", "path", "rule"), [
    pytest.param(_nested(2000), "documents[0]", f"the limit is {MANIFEST_MAX_DEPTH} levels", id="2000 levels"),
    pytest.param("kind: Queue\n---\n" + _nested(MANIFEST_MAX_DEPTH + 1), "documents[1]", "nested too deep",
                 id="names the document"),
    pytest.param(_chain(MANIFEST_MAX_DEPTH + 5), "documents[0]", "nested too deep", id="an alias chain"),
    pytest.param("a: &a [*a]\n", "documents[0]", "refers to itself", id="a recursive alias"),
    pytest.param("a: &a {b: *a}\n", "documents[0]", "refers to itself", id="a recursive mapping alias"),
])
def test_too_deep_documents_are_refused(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_documents(text)
    assert info.value.path == path and rule in info.value.rule


@pytest.mark.parametrize(("text", "path", "where"), [
    pytest.param("kind: Queue\nspec:\n  weight: 3\n  weight: 7\n", "documents[0]", "'weight' at line 4",
                 id="a repeated spec key"),
    pytest.param("kind: Queue\n---\na: {b: 1, 'b': 2}\n", "documents[1]", "'b' at line 3", id="quoted or not"),
])
def test_a_repeated_key_is_refused_not_silently_replaced(text: str, path: str, where: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_documents(text)
    assert info.value.path == path and f"duplicate key {where}" in info.value.rule


def _laughs(levels: int) -> str:
    """Ten aliases of ten aliases, ``levels`` deep: 10**levels values from a few hundred bytes."""
    return "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, levels))


def test_an_alias_bomb_is_refused_before_anything_walks_it() -> None:
    """A Job whose pod template held this (``env[0].value: *a8``) kept ``fedctl submit``
    busy for over a minute while its memory grew: the template is serialised to JSON."""
    started = time.monotonic()
    with pytest.raises(InvalidInput) as info:
        load_documents("kind: Queue\n---\n" + _laughs(9))
    assert time.monotonic() - started < 2
    assert info.value.path == "documents[1]" and f"over {MANIFEST_MAX_VALUES} values" in info.value.rule
    assert len(load_documents(_laughs(5))[0][1]) == 5  # 10**5 values shared by aliases are fine


def test_merge_keys_and_equal_keys_in_sibling_mappings_are_not_duplicates() -> None:
    [(_, doc)] = load_documents("x: &x {a: 1}\ny: {<<: *x, a: 2}\nz: [{a: 1}, {a: 2}]\n")
    assert doc["y"] == {"a": 2} and doc["z"] == [{"a": 1}, {"a": 2}]


def test_documents_within_the_limit_and_shared_aliases_load() -> None:
    assert load_documents(_nested(MANIFEST_MAX_DEPTH - 1))[0][0] == 0
    [(_, doc)] = load_documents("a: &a [1, 2]\nb: [*a, *a]\n")
    assert doc["b"] == [[1, 2], [1, 2]]


@pytest.mark.parametrize(("value", "wire", "ok"), [
    (2**31 - 1, INT32, True), (-(2**31), INT32, True), (2**31, INT32, False), (-(2**31) - 1, INT32, False),
    (2**31, INT64, True), (2**63 - 1, INT64, True), (2**63, INT64, False),
])
def test_integer_is_bounded_by_its_wire_type(value: int, wire: tuple[int, int], ok: bool) -> None:
    if ok:
        assert integer(value, "x", wire=wire) == value
        return
    with pytest.raises(InvalidInput) as info:
        integer(value, "spec.x", wire=wire)
    assert info.value.path == "spec.x" and "must be between" in info.value.rule


@pytest.mark.parametrize(("replicas", "priority", "path"), [
    (3000000000, 1, "documents[0].spec.tasks[0].replicas"),
    (1, 3000000000, "documents[0].metadata.annotations[federation.io/priority]"),
])
def test_manifest_integers_out_of_int32_name_the_field(replicas: int, priority: int, path: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_manifests(JOB.format(replicas=replicas, priority=priority))
    assert info.value.path == path and "2147483647" in info.value.rule


def test_a_queue_weight_out_of_int32_names_the_field() -> None:
    with pytest.raises(InvalidInput) as info:
        load_queues(QUEUE % 2**32)
    assert info.value.path == "documents[0].spec.weight"


@pytest.mark.parametrize(("argv", "named"), [
    pytest.param(["--token", "a\nb", "list", "jobs"], "--token", id="a newline in the token"),
    pytest.param(["--token", "tök", "list", "jobs"], "--token", id="a non-ASCII token"),
    pytest.param(["--timeout", "-1", "list", "jobs"], "--timeout", id="a negative timeout"),
    pytest.param(["--timeout", "0", "list", "jobs"], "--timeout", id="a zero timeout"),
    pytest.param(["--timeout", "nan", "list", "jobs"], "--timeout", id="a NaN timeout"),
    pytest.param(["--timeout", "inf", "list", "jobs"], "--timeout", id="an infinite timeout"),
    pytest.param(["queue", "create", "q", "--weight", "99999999999999999999"], "--weight", id="weight"),
    pytest.param(["queue", "update", "q", "--priority", "3000000000"], "--priority", id="priority"),
    pytest.param(["watch", "--from", "99999999999999999999"], "--from", id="from"),
    pytest.param(["--timeout", "1e10", "list", "jobs"], "--timeout", id="a timeout past gRPC's deadline range"),
    pytest.param(["--retries", "1000000000", "list", "jobs"], "--retries", id="a billion retries"),
    pytest.param(["--retries", "-1", "list", "jobs"], "--retries", id="negative retries"),
    pytest.param(["--reconnect-max-ms", "99999999999", "list", "jobs"], "--reconnect-max-ms",
                 id="a reconnect back-off past a C int"),
    pytest.param(["--reconnect-max-ms", "0", "list", "jobs"], "--reconnect-max-ms", id="no reconnect back-off"),
    pytest.param(["watch", "--count", "-5"], "--count", id="a negative count"),
    pytest.param(["queue", "create", "q", "--capability", "cpu=8", "--capability", "cpu=16"], "--capability",
                 id="a resource capped twice"),
    pytest.param(["queue", "update", "q", "--guarantee", "cpu=1,memory=1Gi,cpu=2"], "--guarantee",
                 id="a resource guaranteed twice"),
])
def test_bad_flags_exit_2_with_one_line_naming_the_flag(
        argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--server", "127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {named}:")


@pytest.mark.parametrize("command", ["submit", "apply"])
def test_deep_yaml_exits_2_naming_the_document(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(_nested(2000))
    assert main(["--server", "127.0.0.1:1", command, "-f", str(path)]) == 2
    err = capsys.readouterr()
    lines = (err.err + err.out).strip().splitlines()
    assert len(lines) == 1 and "documents[0]: is nested too deep" in lines[0]
