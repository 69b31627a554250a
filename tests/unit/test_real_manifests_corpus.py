"""Every published manifest in ``../shared/real-manifests`` (Volcano, volcano-global,
Karmada; ``SOURCES.tsv`` gives each file's origin) is honoured or refused with a clear
reason naming the field — nothing crashes. Read in place, never copied into the repo.

Documents go through what a user runs: ``fedctl apply``'s local parse (every kind it
knows, and a named refusal for the others); HyperNodes, which ``apply`` refuses because
each member cluster's agent reads them, also through the agent's reader. The folder is
found relative to the repository (``../shared/real-manifests`` from the main checkout, or
from a worktree's parent) or through ``$FEDERATION_REAL_MANIFESTS``; a missing folder
fails the test rather than skipping it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from agents.k8s.convert import hypernode_spec
from federation.cli import apply
from federation.domain.errors import InvalidInput
from tests.fixtures.corpus import CORPUS, corpus

_FIELD = re.compile(r"(documents\[\d+\]|invalid YAML)")

# A missing corpus still yields one case per test, which then fails (never an empty, skipped set).
FILES = sorted(CORPUS.rglob("*.yaml")) or [CORPUS / "volcano-jobs" / "corpus-not-found.yaml"]


@pytest.fixture(autouse=True)
def _corpus_is_there() -> None:
    corpus()


def outcome(path: Path) -> list[str]:
    """The refusal lines for one file (empty: every document accepted)."""
    _, refused = apply.read([str(path)], lambda p: Path(p).read_text(encoding="utf-8"))
    return [line.text for line in refused]


def test_the_corpus_is_all_there() -> None:
    listed = [line.split("\t")[0] for line in (CORPUS / "SOURCES.tsv").read_text().splitlines()[1:] if line]
    assert len(FILES) == 122 and sorted(listed) == sorted(str(p.relative_to(CORPUS)) for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_file_is_honoured_or_refused_naming_the_field(path: Path) -> None:
    for line in outcome(path):
        assert _FIELD.search(line), line  # the refusal names a document field (or the YAML position)
        assert "unknown" not in line.split(": ", 2)[-1], line  # "not supported", never "unknown"


@pytest.mark.parametrize("path", [p for p in FILES if p.parent.name == "hypernodes"] or FILES,
                         ids=lambda p: p.name)
def test_hypernodes_are_read_by_the_agent_or_refused_naming_the_field(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is None:
            continue
        try:
            spec = hypernode_spec(doc)
        except InvalidInput as exc:
            assert exc.path.startswith("hyperNodes["), exc
        else:
            assert spec.name == doc["metadata"]["name"]


@pytest.mark.parametrize("name", [
    "volcano__example__invalid_jobs__duplicatedPolicyEvent-webhook-deny.yaml",
    "volcano__example__invalid_jobs__duplicatedTaskName-webhook-deny.yaml",
    "volcano__example__invalid_jobs__minAvailable-webhook-deny.yaml",
])
def test_volcanos_own_invalid_examples_are_refused(name: str) -> None:
    assert outcome(CORPUS / "volcano-jobs" / name)


@pytest.mark.parametrize("name", [
    "volcano-jobs/volcano__example__hierarchical-jobs__jobs.yaml",  # four Jobs in one file
    "volcano-jobs/volcano-global__docs__deploy__exmaple__mindspore-cpu.yaml",  # Queue + Job
    "karmada/volcano-global__docs__deploy__exmaple__propagationpolicy.yaml",
    "volcano-jobs/volcano__docs__user-guide__how_to_configure_priorityclass_for_job.md__L12-56.yaml",
    "karmada/karmada-website__docs__userguide__scheduling__propagation-policy.md__L164-180.yaml",  # matchExpressions
    "karmada/karmada-website__docs__userguide__scheduling__propagation-policy.md__L854-882.yaml",  # priorities
    "karmada/karmada-website__docs__userguide__scheduling__propagation-policy.md__L565-587.yaml",  # static weights
])
def test_the_issues_examples_are_accepted(name: str) -> None:
    assert outcome(CORPUS / name) == []


def summary() -> dict[str, list[str]]:
    """file -> refusal lines, for every refused file (``python -m`` prints it for the report)."""
    return {str(p.relative_to(CORPUS)): lines for p in FILES if (lines := outcome(p))}


def reason_of(line: str) -> str:
    """The refused field of a refusal line, indices dropped (``spec.tasks.partitionPolicy``),
    or ``invalid YAML``: what the report groups the refused files by."""
    text = line.split(" error: ", 1)[-1]
    if "invalid YAML" in text:
        return "invalid YAML"
    found = re.search(r"documents\[\d+\]\.([^:]+):", text)
    field = re.sub(r"\[\d+\]", "", found.group(1)) if found else text
    return re.sub(r"annotations\[([^]]+)\]", r"annotations[\1]", field)


if __name__ == "__main__":
    refused = summary()
    print(f"{len(FILES)} files: {len(FILES) - len(refused)} accepted, {len(refused)} refused")
    groups: dict[str, list[str]] = {}
    for name, lines in refused.items():
        groups.setdefault(f"{name.split('/')[0]}: {reason_of(lines[0])}", []).append(name)
    for reason, names in sorted(groups.items(), key=lambda kv: (kv[0].split(":")[0], -len(kv[1]), kv[0])):
        print(f"{len(names):3d}  {reason}")
    if "-v" in sys.argv:
        for name, lines in refused.items():
            print(f"{name}\n  {lines[0].split(' error: ', 1)[-1].replace(str(CORPUS / name), '')}")
