"""The kinds ``fedctl apply`` knows out of the box: Volcano Job and Queue (more register
themselves from their own modules, see ``apply.KIND_MODULES``).

Queues are created, or updated when they exist ("configured", kubectl's word); an update
that changes nothing answers "unchanged". A Job is submitted: the federation keeps a job's
spec once submitted, so a second apply of the same Job is "unchanged" and a different spec
under the same name is refused by the server.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from federation.cli.apply import ORDER_QUEUES, ORDER_WORKLOADS, Applied, Kind, register
from federation.client import FederationClient, ServiceError
from federation.domain.jobs import Job
from federation.domain.manifests import JOB_API, QUEUE_API
from federation.domain.manifests_volcano import parse_job, parse_queue
from federation.service.convert import job_to_proto, queue_to_proto
from federation.v1 import queues_pb2


def _parse_job(doc: Mapping[str, object], path: str) -> Job:
    return parse_job(doc, path, None)


async def _apply_job(client: FederationClient, job: Job) -> Applied:
    resp = await client.submit_job(job_to_proto(job))
    return Applied(f"job/{job.name}", "created" if resp.created else "unchanged")


async def _check_job(client: FederationClient, job: Job) -> None:
    await client.submit_job(job_to_proto(job), dry_run=True)


def _spec(queue: queues_pb2.Queue) -> queues_pb2.Queue:
    out = queues_pb2.Queue()
    out.CopyFrom(queue)
    out.ClearField("status")
    return out


async def _apply_queue(client: FederationClient, queue: queues_pb2.Queue) -> Applied:
    ref = f"queue/{queue.name}"
    try:
        await client.create_queue(queue)
    except ServiceError as exc:
        if exc.code != grpc.StatusCode.ALREADY_EXISTS:
            raise
    else:
        async def delete() -> None:
            await client.delete_queue(queue.name)
        return Applied(ref, "created", delete)
    before = _spec(await client.get_queue(queue.name))
    after = _spec(await client.update_queue(queue))
    if after == before:
        return Applied(ref, "unchanged")

    async def restore() -> None:
        await client.update_queue(before)
    return Applied(ref, "configured", restore)


register(Kind("Job", (JOB_API,), ORDER_WORKLOADS, _parse_job, _apply_job, lambda job: f"job/{job.name}",
              check=_check_job))
register(Kind("Queue", (QUEUE_API,), ORDER_QUEUES, lambda doc, path: queue_to_proto(parse_queue(doc, path)),
              _apply_queue, lambda q: f"queue/{q.name}"))
