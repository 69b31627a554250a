"""A tainted cluster on real kube-apiservers: the agent of ``east`` dies, the service taints
``east`` ``cluster.karmada.io/unreachable:NoExecute``; the job without a toleration leaves
for ``west`` after the service's failover grace, the one tolerating the taint for
``tolerationSeconds`` stays that long and then leaves, the one tolerating it for ever
stays. A new agent for ``east`` clears the taint, deletes the pods of the jobs that left
and keeps the staying job's pods untouched (propagation/taints.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fixtures_federation import eventually, unique
from test_agent_federation import Federation, _running, _uids, volcano_job

from federation.propagation.taints import UNREACHABLE
from federation.v1 import clusters_pb2

pytestmark = pytest.mark.e2e

AGENT_GRACE = 3.0
FAILOVER_GRACE = 2.0
PATIENCE = 20  # the patient job's tolerationSeconds


def policy_yaml(name: str, seconds: int | None, tolerate: bool) -> str:
    """An inline policy: east first, west only when east cannot hold the job (Karmada's
    ordered clusterAffinities), and maybe a toleration of the unreachable taint."""
    toleration = ""
    if tolerate:
        toleration = f"""\
    clusterTolerations:
      - key: {UNREACHABLE}
        operator: Exists
        effect: NoExecute
"""
        if seconds is not None:
            toleration += f"        tolerationSeconds: {seconds}\n"
    return f"""\
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: {name}
spec:
  placement:
    clusterAffinities:
      - affinityName: first
        clusterNames: [east]
      - affinityName: fallback
        clusterNames: [west]
{toleration}"""


@pytest_asyncio.fixture
async def federation(control_plane: Any, tmp_path: Path) -> AsyncIterator[Federation]:
    fed = Federation(control_plane, tmp_path, agent_grace_seconds=AGENT_GRACE,
                     failover_grace_seconds=FAILOVER_GRACE)
    try:
        yield await fed.start()
    finally:
        await fed.stop()


async def _on(fed: Federation, name: str, cluster: str) -> bool:
    job = await fed.job(name)
    return bool(job.get("state") == "JOB_STATE_RUNNING" and job.get("cluster") == cluster)


async def _unreachable_since(fed: Federation) -> float | None:
    assert fed.client is not None
    for cluster in await fed.client.list_clusters():
        if cluster.name == "east":
            for taint in cluster.taints:
                if taint.key == UNREACHABLE and taint.effect == "NoExecute":
                    return taint.time_added
    return None


async def _both_reported(fed: Federation) -> bool:
    """Both agents are connected and have sent a snapshot: until then ``east`` cannot hold
    anything and the ordered affinities would rightly send a job to ``west``."""
    assert fed.client is not None
    ready = {c.name for c in await fed.client.list_clusters()
             if c.health == clusters_pb2.CLUSTER_HEALTH_HEALTHY and c.HasField("last_snapshot")}
    return ready >= {"east", "west"}


async def test_a_tainted_cluster_keeps_its_tolerating_job_and_the_others_leave_after_their_toleration(
        federation: Federation) -> None:
    fed = federation
    await eventually("east and west reported", partial(_both_reported, fed), 60, interval=0.5)
    plain, patient, loyal = unique("plain"), unique("patient"), unique("loyal")
    jobs = {plain: (None, False), patient: (PATIENCE, True), loyal: (None, True)}
    for name, (seconds, tolerate) in jobs.items():
        path = fed.tmp / f"{name}.yaml"
        path.write_text(volcano_job(name, replicas=1, gpus=1) + policy_yaml(name, seconds, tolerate))
        await fed.fedctl("submit", "-f", str(path))
    for name in jobs:
        await eventually(f"{name} running in east", partial(_on, fed, name, "east"), 90, interval=0.5)
        await eventually(f"{name}'s pod running in east", partial(_running, fed, "east", name, 1), 90)
    loyal_pods = _uids(fed, "east", loyal)

    await fed.kill("east-a")  # SIGKILL: silent from now on; its pods keep running in east
    seen = await eventually("east tainted unreachable", lambda: _unreachable_since(fed), AGENT_GRACE + 60)
    assert seen is not None  # eventually returns only a truthy answer
    since = seen
    await eventually("plain re-placed in west", lambda: _on(fed, plain, "west"), FAILOVER_GRACE + 60,
                     interval=0.5)
    # plain left after the failover grace; patient tolerates the taint for PATIENCE seconds
    assert time.time() < since + PATIENCE, "too slow to see patient stay; raise PATIENCE"
    assert (await fed.job(patient)).get("cluster") == "east"
    await eventually("plain's pod running in west", lambda: _running(fed, "west", plain, 1), 90)
    await eventually("patient re-placed in west", lambda: _on(fed, patient, "west"), PATIENCE + 60,
                     interval=0.5)
    assert time.time() >= since + PATIENCE
    await eventually("patient's pod running in west", lambda: _running(fed, "west", patient, 1), 90)
    assert await _on(fed, loyal, "east")  # tolerates for ever

    fed.start_agent("east", "east-b")  # a new agent: its hello clears the taint, its sync fences the rest
    await eventually("east untainted", lambda: _untainted(fed), 90, interval=0.5)
    await eventually("the pods of the jobs that left are deleted from east",
                     lambda: _gone_from_east(fed, plain, patient), 90)
    assert _uids(fed, "east", loyal) == loyal_pods  # untouched, never recreated
    assert await _on(fed, loyal, "east")


async def _untainted(fed: Federation) -> bool:
    return await _unreachable_since(fed) is None


async def _gone_from_east(fed: Federation, *jobs: str) -> bool:
    return all(not _uids(fed, "east", job) for job in jobs)

