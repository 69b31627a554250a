"""A two-step Volcano JobFlow through the real service (gRPC, rounds, agents on in-memory
clusters, SQLite and PostgreSQL): the second job is planned only once the first
succeeded, saying meanwhile what it waits for; a failed first step cancels the second,
naming the dependency and why it failed."""

from __future__ import annotations

from fleetkit import eventually, fleet, has_snapshot

from federation.client import FederationClient
from federation.domain.manifests import load_jobs
from federation.v1 import jobs_pb2
from federation.wire.jobs import job_to_proto

FLOW = """
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: prepare}
spec:
  queue: research
  tasks:
    - name: worker
      replicas: 1
      template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: 8, cpu: 4}}}]}}
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: train}
spec:
  queue: research
  tasks:
    - name: worker
      replicas: 2
      template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: 8, cpu: 4}}}]}}
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {name: NAME}
spec:
  flows:
    - name: prepare
    - name: train
      dependsOn: {targets: [prepare]}
"""


async def _state(c: FederationClient, name: str) -> int:
    return (await c.get_job(name)).state


async def test_second_step_runs_only_after_the_first_succeeded(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="snapshots")
        first, second = load_jobs(FLOW.replace("NAME", "pipe"))
        assert (first.name, second.name, second.after) == ("pipe-prepare", "pipe-train", ("pipe-prepare",))
        f.runtimes["pipe-prepare"] = 2.0
        f.runtimes["pipe-train"] = 0.5
        async with f.client() as c:
            for job in (first, second):
                await c.submit_job(job_to_proto(job))

            async def first_running() -> bool:
                return await _state(c, "pipe-prepare") == jobs_pb2.JOB_STATE_RUNNING

            await eventually(first_running, what="the first step running")

            async def second_says_it_waits() -> bool:
                # The reason is written by the next planning round, which may trail the first step's start.
                waiting = await c.get_job("pipe-train")
                assert waiting.state == jobs_pb2.JOB_STATE_PENDING, waiting
                return "waiting for pipe-prepare" in waiting.message

            await eventually(second_says_it_waits, what="the second step pending with its reason")

            async def second_done() -> bool:
                return await _state(c, "pipe-train") == jobs_pb2.JOB_STATE_SUCCEEDED

            await eventually(second_done, what="the second step succeeded", timeout=60)
        prepare = [e for e in f.store.jobs.events_since(0, job="pipe-prepare").events if e.type == "Succeeded"]
        placed = [e for e in f.store.jobs.events_since(0, job="pipe-train").events if e.type == "Placed"]
        assert prepare and placed and placed[0].id > prepare[0].id  # one feed: ids order events across jobs


async def test_a_failed_step_cancels_the_rest_of_the_flow_with_the_reason(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="snapshots")
        first, second = load_jobs(FLOW.replace("NAME", "broken"))
        async with f.client() as c:
            for job in (first, second):
                await c.submit_job(job_to_proto(job))

            async def first_running() -> bool:
                return await _state(c, "broken-prepare") == jobs_pb2.JOB_STATE_RUNNING

            await eventually(first_running, what="the first step running")
            record = f.store.jobs.get("broken-prepare")
            assert record.cluster is not None
            f.clusters[record.cluster].fail_pod("broken-prepare-worker-0", exit_code=3)

            async def cancelled() -> bool:
                return await _state(c, "broken-train") == jobs_pb2.JOB_STATE_CANCELLED

            await eventually(cancelled, what="the second step cancelled")
            broken = await c.get_job("broken-train")
            assert broken.reason.startswith("dependency broken-prepare failed"), broken.reason
