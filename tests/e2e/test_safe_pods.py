"""Safe pods on real kube-apiservers (issue 10): a tenant's privileged pod, hostPath pod or
pod in kube-system is refused at submission (``fedctl`` exit 2 naming the field) and
nothing reaches either member cluster, while an ordinary job in the same queue runs —
so the agents were up and would have created whatever had been let through."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures_federation import eventually, unique
from test_agent_federation import CLUSTERS, Federation, _gone, _running, federation, job_header, task_yaml

from agents.core.records import LABEL_JOB

pytestmark = pytest.mark.e2e
__all__ = ["federation"]  # the fixture, imported for this module's tests


def _hostile(name: str, namespace: str = "", container_extra: str = "", spec_extra: str = "") -> str:
    header = job_header(name, 1, 0)
    if namespace:
        header = header.replace(f"  name: {name}\n", f"  name: {name}\n  namespace: {namespace}\n", 1)
    task = task_yaml("worker", 1, 1)
    if container_extra:
        task = task.replace("              image: ghcr.io/example/train:1.0\n",
                            "              image: ghcr.io/example/train:1.0\n" + container_extra, 1)
    if spec_extra:
        task = task.replace("          containers:\n", spec_extra + "          containers:\n", 1)
    return header + "  tasks:\n" + task


CASES = [
    ("privileged", {"container_extra": "              securityContext:\n                privileged: true\n"},
     "spec.tasks[0].template.spec.containers[0].securityContext.privileged: a privileged container"),
    ("hostpath", {"spec_extra": "          volumes:\n            - name: root\n              hostPath:\n"
                                "                path: /\n"},
     "spec.tasks[0].template.spec.volumes[0].hostPath: a hostPath volume"),
    ("kube-system", {"namespace": "kube-system"},
     "spec.namespace: kube-system (a Kubernetes system namespace) is not a namespace of queue e2e"),
]


def _pods_anywhere(fed: Federation, name: str) -> list[Any]:
    return [p for c in CLUSTERS
            for p in fed.control_plane.request(c, "GET", f"/api/v1/pods?labelSelector={LABEL_JOB}%3D{name}")["items"]]


async def test_privileged_hostpath_and_kube_system_pods_are_refused_and_reach_no_cluster(
        federation: Federation) -> None:
    fed = federation
    refused = []
    for kind, parts, message in CASES:
        name = unique(f"e2e-{kind}")
        path = fed.tmp / f"{name}.yaml"
        path.write_text(_hostile(name, **parts))
        code, _, err = await fed.fedctl_result("submit", "-f", str(path))
        assert code == 2 and message in err and "(INVALID_ARGUMENT)" in err, (code, err)
        refused.append(name)
    ordinary = unique("e2e-ordinary")
    await fed.submit(ordinary, replicas=1, gpus=1)
    job = await fed.state(ordinary, "JOB_STATE_RUNNING")
    await eventually("the ordinary pod runs", lambda: _running(fed, job["cluster"], ordinary, 1), 60)
    try:
        for name in refused:
            assert not _pods_anywhere(fed, name), name
            code, _, err = await fed.fedctl_result("get", "job", name)  # never stored
            assert code == 1 and "NOT_FOUND" in err, (code, err)
        system = [p["metadata"]["name"] for c in CLUSTERS for p in fed.control_plane.request(
            c, "GET", f"/api/v1/namespaces/kube-system/pods?labelSelector={LABEL_JOB}")["items"]]
        assert system == []
    finally:
        await _gone(fed, ordinary)
