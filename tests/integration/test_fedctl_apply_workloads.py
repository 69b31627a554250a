"""``fedctl apply -f`` of a Deployment with Volcano's annotations and of a JobFlow with its
JobTemplates, against ``federation serve`` (SQLite and PostgreSQL) as real processes."""

from __future__ import annotations

from pathlib import Path

from fedctlkit import fedctl, federation, serve

FILE = """apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {name: pipe}
spec:
  flows:
    - name: prep
    - name: train
      dependsOn: {targets: [prep]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve}
spec:
  replicas: 2
  selector: {matchLabels: {app: serve}}
  template:
    metadata:
      labels: {app: serve}
      annotations: {scheduling.volcano.sh/group-min-member: "2", scheduling.volcano.sh/queue-name: research}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "1"}}}]}
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
  tasks: [{name: w, replicas: 2, template: {spec: {containers: [{name: c, image: busybox}]}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 1}
"""


def test_apply_takes_deployments_and_jobflows_in_dependency_order(db_url: str, tmp_path: Path) -> None:
    if not db_url.startswith("sqlite"):
        assert federation("db", "upgrade", "--db", db_url).code == 0
    path = tmp_path / "all.yaml"
    path.write_text(FILE)
    with serve(db_url, tmp_path) as srv:
        done = fedctl(srv.address, "apply", "-f", str(path))
        assert done.code == 0, done
        assert done.out.splitlines() == [
            "queue/research created",
            "jobtemplate/prep kept for this run's JobFlows (not stored)",
            "jobtemplate/train kept for this run's JobFlows (not stored)",
            "job/serve created",
            "jobflow/pipe submitted (job/pipe-prep created, job/pipe-train created)",
        ]
        train = fedctl(srv.address, "get", "job", "pipe-train", "-o", "json").json()
        assert train["spec"]["after"] == ["pipe-prep"]
        serve_job = fedctl(srv.address, "get", "job", "serve", "-o", "json").json()
        assert serve_job["spec"]["workload"]["kind"] == "Deployment"


def test_apply_refuses_a_flow_whose_template_is_missing(db_url: str, tmp_path: Path) -> None:
    if not db_url.startswith("sqlite"):
        assert federation("db", "upgrade", "--db", db_url).code == 0
    path = tmp_path / "flow.yaml"
    path.write_text(FILE.split("---\n")[0])
    with serve(db_url, tmp_path) as srv:
        done = fedctl(srv.address, "apply", "-f", str(path))
        assert done.code == 2, done
        assert "no JobTemplate 'prep'" in done.out + done.err
