"""The whole real-manifests corpus (``../shared/real-manifests``, read in place) through
``fedctl apply`` against ``federation serve``, as a new user would submit it: every
object gets one line, applied or refused with a reason (a field path and "not supported",
a YAML position, or the server's reason and gRPC code), and nothing crashes — neither
the CLI nor the server, which still answers afterwards."""

from __future__ import annotations

import re
from pathlib import Path

from fedctlkit import fedctl, federation, serve

from tests.fixtures.corpus import corpus as find_corpus

APPLIED = re.compile(r"[a-z]+/[\w./-]+ (created|configured|unchanged)")
REFUSED = re.compile(r"\S+ error: .*(documents\[\d+\]|invalid YAML|\([A-Z_]+\)$)")


def test_the_whole_corpus_is_applied_or_refused_with_a_reason_and_nothing_crashes(db_url: str,
                                                                                   tmp_path: Path) -> None:
    corpus = find_corpus()
    if not db_url.startswith("sqlite"):
        assert federation("db", "upgrade", "--db", db_url).code == 0
    default = tmp_path / "default.yaml"  # the queue most examples name
    default.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: default}\n"
                       "spec: {weight: 1}\n")
    folders = sorted(p for p in corpus.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["hypernodes", "karmada", "queues", "volcano-jobs"]
    with serve(db_url, tmp_path) as srv:
        assert fedctl(srv.address, "apply", "-f", str(default)).code == 0
        out = fedctl(srv.address, "apply", *[a for d in folders for a in ("-f", str(d))])
        assert out.code == 2, out  # some documents are refused: exit 2, never a crash (1)
        assert "Traceback" not in out.err
        applied, refused = out.out.splitlines(), out.err.splitlines()
        assert all(APPLIED.fullmatch(line) for line in applied), applied
        assert all(REFUSED.match(line) for line in refused), [r for r in refused if not REFUSED.match(r)]
        assert all("unknown" not in line.split(": ", 2)[-1] or "unknown queue" in line for line in refused)
        assert len(applied) > 50 and len(refused) > 40  # both outcomes, in numbers, not a vacuous pass
        assert srv.proc.poll() is None
        listed = fedctl(srv.address, "list", "jobs", "-o", "json")
        assert listed.code == 0 and "Traceback" not in srv.log.read_text()
