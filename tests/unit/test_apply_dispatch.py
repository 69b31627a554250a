"""The ``fedctl apply`` dispatcher without a server: documents to kinds, order, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from federation.cli import apply
from federation.cli.errors import EXIT_USAGE
from federation.cli.fedctl import _read
from federation.domain.errors import InvalidInput

JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  queue: research
  tasks:
  - name: worker
    replicas: 1
    template: {spec: {containers: [{name: c, image: x}]}}
"""
QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
"""


def _parse(text: str) -> tuple[list[apply.Document], list[apply.Line]]:
    return apply.parse_text(text, "f.yaml", apply.registry())


def test_dependency_order_puts_queues_before_jobs_and_keeps_file_order_within_a_rank() -> None:
    docs, errors = _parse(JOB + "---\n" + QUEUE + "---\n" + JOB.replace("train", "eval"))
    assert errors == []
    assert [d.kind.ref(d.obj) for d in apply.in_order(docs)] == ["queue/research", "job/train", "job/eval"]


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("kind: Ray\napiVersion: ray.io/v1\nmetadata: {name: r}\n",
                 "ray/r error: f.yaml: documents[1].kind: kind 'Ray' not supported", id="unknown kind names the field"),
    pytest.param(JOB.replace("batch.volcano.sh/v1alpha1", "batch.volcano.sh/v1"),
                 "job/train error: f.yaml: documents[1].apiVersion: Job apiVersion 'batch.volcano.sh/v1' not supported",
                 id="wrong apiVersion is refused"),
    pytest.param(JOB.replace("replicas: 1", "replicas: 0"),
                 "job/train error: f.yaml: documents[1].spec.tasks[0].replicas", id="invalid field path"),
    pytest.param("a: [", "f.yaml error: invalid YAML", id="syntax error refuses the file"),
])
def test_refused_documents_get_one_line_each(text: str, message: str) -> None:
    docs, errors = _parse(QUEUE + "---\n" + text if not text.startswith("a:") else text)
    assert len(errors) == 1 and errors[0].text.startswith(message), errors
    assert errors[0].code == EXIT_USAGE
    assert [d.kind.kind for d in docs] == ([] if text.startswith("a:") else ["Queue"])


def test_directory_reads_yaml_and_json_files_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(JOB)
    (tmp_path / "a.yml").write_text(QUEUE)
    (tmp_path / "c.json").write_text('{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",'
                                     ' "metadata": {"name": "other"}}')
    (tmp_path / "README.md").write_text("# not a manifest")
    assert [p.name for p in apply.files(str(tmp_path))] == ["a.yml", "b.yaml", "c.json"]
    docs, errors = apply.read([str(tmp_path)], lambda p: Path(p).read_text())
    assert errors == [] and [d.kind.ref(d.obj) for d in apply.in_order(docs)] == [
        "queue/research", "queue/other", "job/train"]


def test_a_missing_path_is_refused_by_the_reader_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        apply.read([str(tmp_path / "absent.yaml")], _read)
    assert info.value.path == "-f" and info.value.rule.endswith("absent.yaml: no such file")


def test_registering_a_kind_twice_is_refused() -> None:
    job = apply.registry()["Job"]
    with pytest.raises(ValueError, match="registered twice"):
        apply.register(job)


@pytest.mark.parametrize(("codes", "expected"), [
    pytest.param([0, 0], 0, id="all applied"),
    pytest.param([0, 1], 1, id="a failure"),
    pytest.param([1, 2, 0], 2, id="bad input wins"),
])
def test_exit_code_is_the_worst_outcome(codes: list[int], expected: int) -> None:
    assert apply.exit_code(apply.Line("x", c) for c in codes) == expected
