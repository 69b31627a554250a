"""An agent restarted mid-job on a real kube-apiserver takes up the job where the old one
left it, from the runtime state saved on the job's Service (agents/core/checkpoints.py):
the restart already spent counts against maxRetry, a Service deleted under the running
agent is made again carrying it, and a pod deleted while no agent ran is PodEvicted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import (
    POD_FAIL_LABEL,
    Tree,
    WorkDriver,
    backend_for,
    cleanup,
    eventually,
    gpu_job,
    label_pod,
    pod_uids,
    unique,
    work_for,
)
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from agents.core.checkpoints import ANNOTATION_CHECKPOINT
from federation.domain.jobs import LifecyclePolicy

pytestmark = pytest.mark.e2e
P = LifecyclePolicy


async def live_pods(api: Any, job: str) -> dict[str, str]:
    return await pod_uids(api, job, running=True)


async def test_a_restarted_agent_resumes_max_retry_and_sees_a_pod_deleted_while_it_was_down(
        control_plane: ControlPlane, kube_clients: dict[str, ApiClient]) -> None:
    api = kube_clients["east"]
    job = gpu_job(unique("takeover"), (("worker", 2, 2),), max_retry=2,  # one restart, then Failed
                  policies=(P("RestartPod", events=("PodFailed", "PodEvicted")),))
    with Tree(control_plane, "east") as tree:
        work = work_for(job, "east", tree.leaf_a)
        backend = await backend_for(control_plane, "east")
        first = WorkDriver(backend, work).start()
        try:
            started = await eventually("gang Running", lambda: _both(api, job.name))
            victim = f"{job.name}-worker-0"
            await label_pod(api, "default", victim, {POD_FAIL_LABEL: "true"})

            async def restarted() -> dict[str, str]:
                now = await _both(api, job.name)
                return now if now and now[victim] != started[victim] else {}

            before_stop = await eventually("failed pod restarted (retry 1 of 2)", restarted, 45)
            saved = await eventually("retry saved on the Service", lambda: _saved(api, job.name))
            assert saved["retries"] == 1
            # Someone deletes the job's Service under the running agent: its next pass makes
            # it again before anything else, carrying the retry, and nothing is refused
            # (reconcile, in the same pass, finds it made).
            core = client.CoreV1Api(api)
            gone_uid = (await core.read_namespaced_service(job.name, "default")).metadata.uid
            errors = len(first.errors)
            await core.delete_namespaced_service(job.name, "default")

            async def remade() -> dict[str, Any]:
                svc = await _service(api, job.name)
                return _record(svc) if svc is not None and svc.metadata.uid != gone_uid else {}

            await eventually("Service made again, carrying the retry", remade, 30)
            assert first.errors[errors:] == []
        finally:
            await first.stop()  # the agent process is gone
            await backend.close()

        other = f"{job.name}-worker-1"  # a drain deletes it while no agent runs
        await client.CoreV1Api(api).delete_namespaced_pod(other, "default", grace_period_seconds=0)

        async def deleted() -> bool:
            return other not in await live_pods(api, job.name) and victim in before_stop

        await eventually("pod deleted while no agent ran", deleted, 30)
        backend = await backend_for(control_plane, "east")
        second = WorkDriver(backend, work).start()  # a new process: nothing in memory
        try:
            async def failed() -> bool:
                return second.last is not None and second.last.phase == "Failed"

            await eventually("job Failed: the eviction was the second restart", failed, 45)
            assert second.last is not None
            assert second.last.message.startswith(f"job Failed: maxRetry 2 exhausted after PodEvicted of pod {other}")
        finally:
            await second.stop()
            await cleanup(backend, job.name)
            await backend.close()


async def _both(api: Any, job: str) -> dict[str, str]:
    pods = await live_pods(api, job)
    return pods if len(pods) == 2 else {}


async def _service(api: Any, job: str) -> Any:
    try:
        return await client.CoreV1Api(api).read_namespaced_service(job, "default")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _record(svc: Any) -> dict[str, Any]:
    """The saved record once it holds the one restart, else {}."""
    text = (svc.metadata.annotations or {}).get(ANNOTATION_CHECKPOINT)
    record: dict[str, Any] = json.loads(text) if text else {}
    return record if record.get("retries") == 1 else {}


async def _saved(api: Any, job: str) -> dict[str, Any]:
    svc = await _service(api, job)
    return _record(svc) if svc is not None else {}
