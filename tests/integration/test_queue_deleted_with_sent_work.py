"""A queue deleted once its jobs finished takes their Work rows with it; the agent hub had
sent those Works to the cluster, and reading them back (to cancel them) failed for ever:
no new Work or Cancel reached that cluster until its agent reconnected."""

from __future__ import annotations

from fleetkit import eventually, fleet, job_spec
from servicekit import ADMIN

from federation.client import FederationClient
from federation.domain.queues import Queue


async def test_work_still_reaches_a_cluster_after_a_queue_of_its_finished_jobs_is_deleted(migrated_url: str) -> None:
    async with fleet(migrated_url, clusters=("east",)) as f:
        f.store.queues.create(Queue("tmp", owners=("nlp",)))
        f.runtimes["t1"] = 1.0
        async with f.client() as c:
            spec = job_spec("t1", pods=1, gpus=2, tier=None)
            spec.queue = "tmp"
            await c.submit_job(spec)
            await eventually(lambda: f.store.jobs.get("t1").state == "succeeded", what="t1 succeeded")
            async with FederationClient(f.address, token=ADMIN, timeout=20) as admin:
                await admin.delete_queue("tmp")
            await c.submit_job(job_spec("r1", pods=1, gpus=2, tier=None))
            await eventually(lambda: f.store.jobs.get("r1").state == "running", timeout=30, what="r1 running on east")
