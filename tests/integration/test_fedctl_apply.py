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


OBJECTS = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: urgent, labels: {team: llm}}
spec:
  queue: research
  priorityClassName: high-priority
  tasks:
  - replicas: 1
    name: worker
    template: {spec: {containers: [{name: c, image: busybox}]}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: llm}
spec:
  resourceSelectors:
  - apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    labelSelector: {matchExpressions: [{key: team, operator: In, values: [llm]}]}
  placement: {clusterAffinity: {clusterNames: [east]}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: everything}
spec:
  resourceSelectors: [{apiVersion: batch.volcano.sh/v1alpha1, kind: Job}]
  placement: {clusterAffinity: {clusterNames: [west]}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-priority}
value: 1000000
description: overrides the built-in class of the same name
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
"""


def test_apply_policies_and_priority_classes_then_get_list_delete(db_url: str, tmp_path: Path) -> None:
    _migrate(db_url)
    path = tmp_path / "objects.yaml"
    path.write_text(OBJECTS)
    with serve(db_url, tmp_path) as srv:
        s = srv.address
        out = fedctl(s, "apply", "-f", str(path))
        assert out.code == 0, out
        assert out.out.splitlines() == ["priorityclass/high-priority created", "queue/research created",
                                        "propagationpolicy/default/llm created",
                                        "clusterpropagationpolicy/everything created", "job/urgent created"]
        assert fedctl(s, "get", "job", "urgent", "-o", "json").json()["effectivePriority"] == 1000000
        assert fedctl(s, "apply", "-f", str(path)).out.splitlines()[:4] == [
            "priorityclass/high-priority unchanged", "queue/research unchanged",
            "propagationpolicy/default/llm unchanged", "clusterpropagationpolicy/everything unchanged"]
        policies = fedctl(s, "list", "policies", "-o", "json").json()["policies"]
        assert [(p["kind"], p["namespace"], p["name"]) for p in policies] == [
            ("ClusterPropagationPolicy", "", "everything"), ("PropagationPolicy", "default", "llm")]
        shown = fedctl(s, "get", "propagationpolicy", "llm")
        assert shown.code == 0 and "propagationpolicy/default/llm" in shown.out, shown
        assert "high-priority" in fedctl(s, "list", "priorityclasses").out
        assert fedctl(s, "delete", "clusterpropagationpolicy", "everything").out.strip() \
            == "clusterpropagationpolicy/everything deleted"
        missing = fedctl(s, "get", "clusterpropagationpolicy", "everything")
        assert missing.code == 1 and "NOT_FOUND" in missing.err
        assert fedctl(s, "delete", "priorityclass", "high-priority").code == 0
        # A class that exists nowhere is refused by the server, naming the field.
        unknown = tmp_path / "unknown.yaml"
        unknown.write_text(JOB.format(name="odd", queue="research").replace("spec:\n", "spec:\n  priorityClassName: "
                                                                            "nope\n", 1))
        refused = fedctl(s, "apply", "-f", str(unknown))
        assert refused.code == 2 and "spec.priorityClass: priority class 'nope' not found" in refused.err, refused


def test_published_manifests_apply_as_their_users_write_them(db_url: str, tmp_path: Path) -> None:
    """volcano-global's example (Queue + Job, then its PropagationPolicy) and Volcano's
    PriorityClass guide (two classes + a Job), read in place from the shared corpus."""
    from tests.fixtures.corpus import corpus as find_corpus

    corpus = find_corpus()

    _migrate(db_url)
    default = tmp_path / "default-queue.yaml"
    default.write_text(QUEUE.format(name="default", weight=1))
    files = [corpus / "volcano-jobs" / "volcano-global__docs__deploy__exmaple__mindspore-cpu.yaml",
             corpus / "karmada" / "volcano-global__docs__deploy__exmaple__propagationpolicy.yaml",
             corpus / "volcano-jobs"
             / "volcano__docs__user-guide__how_to_configure_priorityclass_for_job.md__L12-56.yaml",
             default]
    with serve(db_url, tmp_path) as srv:
        out = fedctl(srv.address, "apply", "--atomic", *[a for f in files for a in ("-f", str(f))])
        assert out.code == 0, out
        assert out.out.splitlines() == [
            "priorityclass/job-priority created", "priorityclass/task-priority created", "queue/test created",
            "queue/default created", "propagationpolicy/default/mindspore-cpu created", "job/mindspore-cpu created",
            "job/job created"]
        assert fedctl(srv.address, "get", "job", "job", "-o", "json").json()["effectivePriority"] == 1
        explained = fedctl(srv.address, "explain", "mindspore-cpu", "-o", "json")
        assert explained.code == 0, explained
