"""``fedctl apply -f FILE|DIR`` against ``federation serve`` (SQLite and PostgreSQL), as
real processes: several documents, dependency order, one line per object, ``--atomic``."""

from __future__ import annotations

from pathlib import Path

import yaml
from fedctlkit import fedctl, federation, serve

JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}}}
spec:
  queue: {queue}
  tasks:
  - name: worker
    replicas: 2
    template: {{spec: {{containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]}}}}
"""
QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {name}}}
spec: {{weight: {weight}}}
"""


def _migrate(db_url: str) -> None:
    if not db_url.startswith("sqlite"):
        assert federation("db", "upgrade", "--db", db_url).code == 0


def test_apply_orders_documents_and_reports_one_line_each(db_url: str, tmp_path: Path) -> None:
    _migrate(db_url)
    files = tmp_path / "manifests"
    files.mkdir()
    # The Job comes before its Queue in the file: apply still creates the queue first.
    (files / "a-train.yaml").write_text(JOB.format(name="train", queue="research") + "---\n"
                                        + QUEUE.format(name="research", weight=2))
    (files / "b-more.yml").write_text(JOB.format(name="eval", queue="research"))
    (files / "notes.txt").write_text("not a manifest")
    with serve(db_url, tmp_path) as srv:
        first = fedctl(srv.address, "apply", "-f", str(files))
        assert first.code == 0, first
        assert first.out.splitlines() == ["queue/research created", "job/train created", "job/eval created"]
        again = fedctl(srv.address, "apply", "-f", str(files))
        assert again.out.splitlines() == ["queue/research unchanged", "job/train unchanged", "job/eval unchanged"]
        (files / "a-train.yaml").write_text(QUEUE.format(name="research", weight=5))
        changed = fedctl(srv.address, "apply", "-f", str(files / "a-train.yaml"))
        assert changed.out.splitlines() == ["queue/research configured"], changed
        assert fedctl(srv.address, "get", "queue", "research", "-o", "json").json()["weight"] == 5
        # submit -f keeps working beside apply.
        single = tmp_path / "single.yaml"
        single.write_text(JOB.format(name="solo", queue="research"))
        assert "job/solo created" in fedctl(srv.address, "submit", "-f", str(single)).out


def test_apply_without_atomic_applies_the_valid_documents(db_url: str, tmp_path: Path) -> None:
    _migrate(db_url)
    path = tmp_path / "mixed.yaml"
    bad = yaml.safe_load(JOB.format(name="bad", queue="q"))
    bad["spec"]["tasks"][0]["replicas"] = 0
    path.write_text(QUEUE.format(name="q", weight=1) + "---\n" + yaml.safe_dump(bad) + "---\n"
                    + JOB.format(name="good", queue="q") + "---\n" + JOB.format(name="lost", queue="nowhere"))
    with serve(db_url, tmp_path) as srv:
        out = fedctl(srv.address, "apply", "-f", str(path))
        assert out.code == 2, out
        assert out.out.splitlines() == ["queue/q created", "job/good created"]
        errors = out.err.splitlines()
        assert len(errors) == 2, out.err
        assert errors[0].startswith("job/bad error:") and "documents[1].spec.tasks[0].replicas" in errors[0]
        assert errors[1].startswith("job/lost error:") and "unknown queue 'nowhere'" in errors[1]


def test_apply_atomic_is_all_or_nothing(db_url: str, tmp_path: Path) -> None:
    _migrate(db_url)
    path = tmp_path / "set.yaml"
    path.write_text(QUEUE.format(name="team", weight=1) + "---\n" + JOB.format(name="one", queue="team") + "---\n"
                    + JOB.format(name="two", queue="elsewhere"))
    with serve(db_url, tmp_path) as srv:
        out = fedctl(srv.address, "apply", "--atomic", "-f", str(path))
        assert out.code == 2, out
        assert "job/two error:" in out.err and out.out.splitlines() == ["queue/team rolled back"]
        assert out.err.strip().splitlines()[-1] == "nothing applied (--atomic)"
        assert fedctl(srv.address, "list", "queues", "-o", "json").json()["queues"] == []
        assert fedctl(srv.address, "list", "jobs", "-o", "json").json()["jobs"] == []
        # A locally invalid document refuses the whole set before anything is sent.
        path.write_text(QUEUE.format(name="team", weight=1) + "---\nkind: Ray\napiVersion: ray.io/v1\n")
        refused = fedctl(srv.address, "apply", "--atomic", "-f", str(path))
        assert refused.code == 2 and "kind 'Ray' not supported" in refused.err
        assert fedctl(srv.address, "list", "queues", "-o", "json").json()["queues"] == []
        fixed = JOB.format(name="two", queue="team")
        path.write_text(QUEUE.format(name="team", weight=1) + "---\n" + JOB.format(name="one", queue="team")
                        + "---\n" + fixed)
        ok = fedctl(srv.address, "apply", "--atomic", "-f", str(path))
        assert ok.code == 0 and ok.out.splitlines() == ["queue/team created", "job/one created", "job/two created"]
