"""A Deployment with Volcano's gang and topology annotations through the real service
(gRPC, rounds, agents; SQLite and PostgreSQL): placed as a gang in one tier-1 HyperNode,
created as a Deployment in the chosen cluster, its pods (made here as its ReplicaSet
would: the in-memory cluster runs no controllers) bound inside that HyperNode, the job
Running; cancel withdraws the Deployment."""

from __future__ import annotations

import json

from fleetkit import eventually, fleet, has_snapshot

from agents.core.records import PodManifest
from federation.domain.manifests import load_jobs
from federation.domain.resources import Resources
from federation.v1 import jobs_pb2
from federation.wire.jobs import job_to_proto

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve}
spec:
  replicas: 2
  selector: {matchLabels: {app: serve}}
  template:
    metadata:
      labels: {app: serve}
      annotations: {scheduling.volcano.sh/group-min-member: "2", scheduling.volcano.sh/queue-name: research,
                    volcano.sh/network-topology-mode: hard, volcano.sh/network-topology-highest-tier: "1"}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {nvidia.com/gpu: 8, cpu: 4}}}]}
"""


async def test_deployment_gang_is_placed_in_one_leaf_and_created_as_a_deployment(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="snapshots")
        [job] = load_jobs(DEPLOYMENT)
        async with f.client() as c:
            await c.submit_job(job_to_proto(job))

            def created() -> bool:
                return any(cl.workloads() for cl in f.clusters.values())

            await eventually(created, what="the Deployment created in the chosen cluster")
            [(cluster, made)] = [(n, w) for n, cl in f.clusters.items() for w in cl.workloads()]
            template = json.loads(made.body_json)["spec"]["template"]
            assert template["spec"]["schedulerName"] == "federation-scheduler"
            for suffix in ("x1", "x2"):  # the ReplicaSet's pods
                await f.clusters[cluster].create_pod(PodManifest(
                    f"serve-5c9-{suffix}", "default", labels=template["metadata"]["labels"],
                    annotations=template["metadata"]["annotations"], requests=Resources.of(gpu=8, cpu=4000)))

            async def running() -> bool:
                return (await c.get_job("serve")).state == jobs_pb2.JOB_STATE_RUNNING

            await eventually(running, what="the Deployment's gang running")
            placed = await c.get_job("serve")
            leaf = {f"{cluster}-leaf0": {f"{cluster}-n0", f"{cluster}-n1"},
                    f"{cluster}-leaf1": {f"{cluster}-n2", f"{cluster}-n3"}}[placed.hypernode]
            assert set(f.job_pods(cluster, "serve").values()) == leaf
            await c.cancel_job("serve")
            await eventually(lambda: not f.clusters[cluster].workloads(), what="the Deployment withdrawn")
