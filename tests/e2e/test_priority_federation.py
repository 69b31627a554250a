"""A job's priority reaches the member cluster on real kube-apiservers (agents/core/priority.py):
a PriorityClass applied to the federation is created in the cluster the job lands in and
its pods carry ``priorityClassName`` and ``priority`` (admitted by Kubernetes' Priority
plugin); where the cluster already defines the class with another value, the pods carry
the cluster's value and the job gets a Warning event saying both."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from fixtures_federation import eventually, unique
from test_agent_federation import CLUSTERS, Federation, _running, federation, job_header, task_yaml

pytestmark = pytest.mark.e2e
__all__ = ["federation"]  # the fixture, imported for this module's tests

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def _class_doc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


def _pod_priorities(fed: Federation, cluster: str, job: str) -> list[tuple[str, int]]:
    raw = fed.control_plane.request(cluster, "GET", f"/api/v1/namespaces/default/pods?labelSelector="
                                                    f"federation.io%2Fjob%3D{job}")
    return sorted((p["spec"].get("priorityClassName", ""), p["spec"].get("priority", 0)) for p in raw["items"])


async def _submit(fed: Federation, name: str, priority_class: str) -> str:
    path = fed.tmp / f"{name}.yaml"
    path.write_text(job_header(name, 2, 1) + f"  priorityClassName: {priority_class}\n  tasks:\n"
                    + task_yaml("worker", 2, 1))
    await fed.fedctl("submit", "-f", str(path))
    job = await fed.state(name, "JOB_STATE_RUNNING")
    cluster = str(job["cluster"])
    await eventually(f"{name}'s pods running", lambda: _running(fed, cluster, name, 2), 90)
    return cluster


async def test_the_jobs_priority_class_is_ensured_in_its_cluster_and_carried_by_its_pods(
        federation: Federation) -> None:
    fed = federation
    created, theirs = unique("prio-new"), unique("prio-theirs")
    classes = fed.tmp / "classes.yaml"
    classes.write_text("---\n".join(f"""\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: {name}
value: {value}
""" for name, value in ((created, 12345), (theirs, 500))))
    await fed.fedctl("apply", "-f", str(classes))
    for cluster in CLUSTERS:  # every member cluster defines `theirs` otherwise
        fed.control_plane.request(cluster, "POST", CLASSES, _class_doc(theirs, 42))
    try:
        name = unique("prio-a")
        cluster = await _submit(fed, name, created)
        made = fed.control_plane.request(cluster, "GET", f"{CLASSES}/{created}")
        assert made["value"] == 12345 and made["metadata"]["labels"]["federation.io/managed"] == "true"
        assert _pod_priorities(fed, cluster, name) == [(created, 12345)] * 2

        other = unique("prio-b")
        cluster = await _submit(fed, other, theirs)
        assert _pod_priorities(fed, cluster, other) == [(theirs, 42)] * 2
        events = [(e.type, e.message) for e in fed.store.jobs.events_since(0, job=other).events]
        assert any(t == "Warning" and "has value 42, the federation's is 500" in m for t, m in events), events
        assert (await fed.job(other))["spec"].get("priority") in (500, "500")  # the federation plans with its own
    finally:
        for cluster in CLUSTERS:
            for name in (created, theirs):
                with contextlib.suppress(Exception):
                    fed.control_plane.request(cluster, "DELETE", f"{CLASSES}/{name}")
