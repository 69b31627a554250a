"""Jobs whose manifests name no namespace land in their queue's default namespace, over real
gRPC: ``fedctl submit -f`` and ``fedctl apply -f`` (Volcano Job, JobFlow + JobTemplates,
Deployment, StatefulSet) against ``federation serve`` as real processes (SQLite and
PostgreSQL). Before issue 10's fix the manifest loaders wrote Kubernetes' ``default``, which
the queue below does not allow, so every one of these was refused or misplaced."""

from __future__ import annotations

from pathlib import Path

from fedctlkit import fedctl, federation, serve

QUEUE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: research
  annotations: {federation.io/namespaces: "team-a,shared", federation.io/default-namespace: team-a}
spec: {weight: 1}
"""

JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: %s}
spec:
  queue: research
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
"""

APPLY = QUEUE + "---\n" + JOB % "applied" + """\
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {name: pipe}
spec:
  flows: [{name: prep}, {name: train, dependsOn: {targets: [prep]}}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: prep}
spec:
  queue: research
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: train}
spec:
  queue: research
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
""" + "".join(f"""\
---
apiVersion: apps/v1
kind: {kind}
metadata: {{name: {name}}}
spec:
  replicas: 2
  podManagementPolicy: Parallel
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}}}
      annotations: {{scheduling.volcano.sh/group-min-member: "2", scheduling.volcano.sh/queue-name: research}}
    spec: {{containers: [{{name: c, image: nginx}}]}}
""" for kind, name in (("Deployment", "web"), ("StatefulSet", "db")))


def test_every_way_in_gives_a_job_without_namespace_its_queues_default(db_url: str, tmp_path: Path) -> None:
    if not db_url.startswith("sqlite"):
        assert federation("db", "upgrade", "--db", db_url).code == 0
    (tmp_path / "all.yaml").write_text(APPLY)
    (tmp_path / "submit.yaml").write_text(JOB % "submitted")
    (tmp_path / "elsewhere.yaml").write_text(JOB.replace("metadata: {name: %s}", "metadata: {name: %s, namespace: "
                                                         "default}") % "elsewhere")
    with serve(db_url, tmp_path) as srv:
        applied = fedctl(srv.address, "apply", "-f", str(tmp_path / "all.yaml"))
        assert applied.code == 0, applied
        submitted = fedctl(srv.address, "submit", "-f", str(tmp_path / "submit.yaml"))
        assert submitted.code == 0, submitted
        jobs = fedctl(srv.address, "list", "jobs", "-o", "json").json()["jobs"]
        assert {j["id"]: j["spec"]["namespace"] for j in jobs} == dict.fromkeys(
            ("applied", "pipe-prep", "pipe-train", "web", "db", "submitted"), "team-a")
        # naming Kubernetes' default explicitly is still checked against the queue
        refused = fedctl(srv.address, "submit", "-f", str(tmp_path / "elsewhere.yaml"))
        assert refused.code == 2 and "spec.namespace: default is not a namespace of queue research" in refused.err, \
            refused
