"""A two-step Volcano JobFlow through ``fedctl apply`` on real kube-apiservers: the second
job is held (saying what it waits for) while the first runs, and is bound in a HyperNode
only once the first succeeded. The first step's pods finish through the status
subresource, as a kubelet would report them (kwok completes only pods owned by a batch Job)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from fixtures_federation import eventually, unique
from test_agent_federation import CLUSTERS, Federation, _gone, _running, federation, task_yaml

pytestmark = pytest.mark.e2e
__all__ = ["federation"]  # the fixture, imported for this module's tests


def flow_yaml(name: str) -> str:
    def template(step: str, replicas: int) -> str:
        return f"""\
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata:
  name: {step}
spec:
  queue: e2e
  minAvailable: {replicas}
  tasks:
{task_yaml("worker", replicas, 2)}"""

    return "---\n".join([template("prepare", 1), template("train", 2), f"""\
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata:
  name: {name}
spec:
  jobRetainPolicy: retain
  flows:
    - name: prepare
    - name: train
      dependsOn:
        targets: [prepare]
"""])


def _succeed(control_plane: Any, cluster: str, pod: str) -> None:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    control_plane.request(cluster, "PATCH", f"/api/v1/namespaces/default/pods/{pod}/status", {"status": {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "trainer", "image": "ghcr.io/example/train:1.0", "imageID": "", "ready": False,
                               "restartCount": 0, "state": {"terminated": {
                                   "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}}]}},
        content_type="application/merge-patch+json")


async def test_two_step_jobflow_releases_the_second_job_when_the_first_succeeds(federation: Federation) -> None:
    fed = federation
    name = unique("flow")
    path = fed.tmp / f"{name}.yaml"
    path.write_text(flow_yaml(name))
    out = await fed.fedctl("apply", "-f", str(path))
    assert f"jobflow/{name} submitted (job/{name}-prepare created, job/{name}-train created)" in out, out
    first, second = f"{name}-prepare", f"{name}-train"
    try:
        job = await fed.state(first, "JOB_STATE_RUNNING")
        cluster = job["cluster"]
        await eventually("the first step's pod Running", lambda: _running(fed, cluster, first, 1), 60)
        held = await fed.job(second)
        assert held["state"] == "JOB_STATE_PENDING" and f"waiting for {first}" in held.get("message", ""), held
        for c in CLUSTERS:
            assert not await fed.backends[c].list_pods({"federation.io/job": second})

        _succeed(fed.control_plane, cluster, f"{first}-worker-0")
        await fed.state(first, "JOB_STATE_SUCCEEDED")
        released = await fed.state(second, "JOB_STATE_RUNNING")
        where = released["cluster"]
        await eventually("the second step's gang Running", lambda: _running(fed, where, second, 2), 60)
        pods = [p for p in await fed.backends[where].list_pods({"federation.io/job": second}) if not p.deleting]
        assert {p.node for p in pods} <= fed.trees[where].members[released["hypernode"]]
    finally:
        await _gone(fed, second)
        # A finished job keeps its terminal pods for inspection (and cannot be cancelled): tidy up.
        for c in CLUSTERS:
            for pod in await fed.backends[c].list_pods({"federation.io/job": first}):
                await fed.backends[c].delete_pod(pod.namespace, pod.name)
