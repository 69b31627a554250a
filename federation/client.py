"""The submitter client library: typed async calls to the federation's public services.

``fedctl``, the demo and the submission benchmark all use this class, so what they
measure and exercise is exactly what an SDK user gets. It is async (grpc.aio) because
the heavy users keep many RPCs in flight on one channel; a script can wrap a call in
``asyncio.run``.

Errors leave as ``ServiceError`` carrying the gRPC status code and the server's message
(for INVALID_ARGUMENT the message starts with the field path), so callers need not know
grpc's exception types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from federation.v1 import (
    audit_pb2,
    audit_pb2_grpc,
    clusters_pb2,
    clusters_pb2_grpc,
    jobs_pb2,
    jobs_pb2_grpc,
    objects_pb2,
    objects_pb2_grpc,
    queues_pb2,
    queues_pb2_grpc,
    types_pb2,
)

# The server refuses a JobSpec over 1 MiB with INVALID_ARGUMENT; the client may send
# more so that the user hears the server's field-naming answer, not a local transport error.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class ServiceError(Exception):
    """A call the service refused (or could not be reached for)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code.name}: {message}")


@dataclass(frozen=True)
class Tls:
    """TLS settings (PEM file paths): ``ca`` verifies the server; ``cert``/``key`` present a client certificate."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None  # override the name checked in the server certificate

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert is None) != (self.key is None):
            raise ValueError("--cert and --key go together")
        return grpc.ssl_channel_credentials(
            root_certificates=Path(self.ca).read_bytes() if self.ca else None,
            private_key=Path(self.key).read_bytes() if self.key else None,
            certificate_chain=Path(self.cert).read_bytes() if self.cert else None,
        )


async def _call(awaitable: Any) -> Any:
    try:
        return await awaitable
    except grpc.aio.AioRpcError as exc:
        raise ServiceError(exc.code(), exc.details() or "") from None


class FederationClient:
    """One channel to ``address`` (``HOST:PORT``); use as ``async with FederationClient(...) as c``."""

    def __init__(self, address: str, token: str | None = None, tls: Tls | None = None,
                 *, timeout: float | None = 30.0) -> None:
        options: list[tuple[str, Any]] = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        if tls is not None and tls.server_name:
            options.append(("grpc.ssl_target_name_override", tls.server_name))
        if tls is None:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        else:
            self._channel = grpc.aio.secure_channel(address, tls.credentials(), options=options)
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self._timeout = timeout
        self.jobs = jobs_pb2_grpc.JobServiceStub(self._channel)
        self.queues = queues_pb2_grpc.QueueServiceStub(self._channel)
        self.objects = objects_pb2_grpc.ObjectServiceStub(self._channel)
        self.clusters = clusters_pb2_grpc.ClusterServiceStub(self._channel)
        self.audit = audit_pb2_grpc.AuditServiceStub(self._channel)

    async def __aenter__(self) -> FederationClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close(None)

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the channel connects (raises ServiceError UNAVAILABLE after ``timeout``)."""
        import asyncio

        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except TimeoutError:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "server not reachable") from None

    def _kw(self) -> dict[str, Any]:
        return {"metadata": self._metadata, "timeout": self._timeout}

    # ------------------------------------------------------------------ jobs

    async def submit_job(self, spec: types_pb2.JobSpec, *, dry_run: bool = False) -> jobs_pb2.SubmitJobResponse:
        """Submit (idempotent by name: an identical resubmission answers created=False);
        ``dry_run`` runs the server's checks and stores nothing."""
        resp: jobs_pb2.SubmitJobResponse = await _call(
            self.jobs.SubmitJob(jobs_pb2.SubmitJobRequest(spec=spec, dry_run=dry_run), **self._kw()))
        return resp

    async def get_job(self, name: str) -> jobs_pb2.Job:
        job: jobs_pb2.Job = await _call(self.jobs.GetJob(jobs_pb2.GetJobRequest(name=name), **self._kw()))
        return job

    async def cancel_job(self, name: str, reason: str = "") -> jobs_pb2.Job:
        job: jobs_pb2.Job = await _call(
            self.jobs.CancelJob(jobs_pb2.CancelJobRequest(name=name, reason=reason), **self._kw()))
        return job

    async def list_jobs_page(self, queue: str = "", state: int = 0, page_size: int = 0,
                             page_token: str = "") -> jobs_pb2.ListJobsResponse:
        req = jobs_pb2.ListJobsRequest(queue=queue, state=state,  # type: ignore[arg-type]  # an int for the JobState enum
                                       page_size=page_size, page_token=page_token)
        resp: jobs_pb2.ListJobsResponse = await _call(self.jobs.ListJobs(req, **self._kw()))
        return resp

    async def list_jobs(self, queue: str = "", state: int = 0, page_size: int = 0) -> list[jobs_pb2.Job]:
        """Every job the caller may see (following pages)."""
        out: list[jobs_pb2.Job] = []
        token = ""
        while True:
            page = await self.list_jobs_page(queue, state, page_size, token)
            out.extend(page.jobs)
            token = page.next_page_token
            if not token:
                return out

    async def explain_job(self, name: str) -> jobs_pb2.ExplainJobResponse:
        resp: jobs_pb2.ExplainJobResponse = await _call(
            self.jobs.ExplainJob(jobs_pb2.ExplainJobRequest(name=name), **self._kw()))
        return resp

    async def watch_jobs(self, from_event_id: int = 0, queue: str = "") -> AsyncIterator[jobs_pb2.JobEvent]:
        """Events after ``from_event_id``, then live ones; resume with the last ``event_id`` seen."""
        call = self.jobs.WatchJobs(jobs_pb2.WatchJobsRequest(from_event_id=from_event_id, queue=queue),
                                   metadata=self._metadata)
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as exc:
            raise ServiceError(exc.code(), exc.details() or "") from None
        finally:
            call.cancel()

    # ------------------------------------------------------------------ queues

    async def create_queue(self, queue: queues_pb2.Queue) -> queues_pb2.Queue:
        q: queues_pb2.Queue = await _call(
            self.queues.CreateQueue(queues_pb2.CreateQueueRequest(queue=queue), **self._kw()))
        return q

    async def update_queue(self, queue: queues_pb2.Queue) -> queues_pb2.Queue:
        q: queues_pb2.Queue = await _call(
            self.queues.UpdateQueue(queues_pb2.UpdateQueueRequest(queue=queue), **self._kw()))
        return q

    async def get_queue(self, name: str) -> queues_pb2.Queue:
        q: queues_pb2.Queue = await _call(self.queues.GetQueue(queues_pb2.GetQueueRequest(name=name), **self._kw()))
        return q

    async def list_queues(self) -> list[queues_pb2.Queue]:
        out: list[queues_pb2.Queue] = []
        token = ""
        while True:
            page: queues_pb2.ListQueuesResponse = await _call(
                self.queues.ListQueues(queues_pb2.ListQueuesRequest(page_token=token), **self._kw()))
            out.extend(page.queues)
            token = page.next_page_token
            if not token:
                return out

    async def delete_queue(self, name: str) -> None:
        await _call(self.queues.DeleteQueue(queues_pb2.DeleteQueueRequest(name=name), **self._kw()))

    # ------------------------------------------------------------------ policies and priority classes

    async def apply_policy(self, policy: objects_pb2.Policy, *,
                           dry_run: bool = False) -> objects_pb2.ApplyPolicyResponse:
        r: objects_pb2.ApplyPolicyResponse = await _call(self.objects.ApplyPolicy(
            objects_pb2.ApplyPolicyRequest(policy=policy, dry_run=dry_run), **self._kw()))
        return r

    async def get_policy(self, kind: str, namespace: str, name: str) -> objects_pb2.Policy:
        p: objects_pb2.Policy = await _call(self.objects.GetPolicy(
            objects_pb2.PolicyKey(kind=kind, namespace=namespace, name=name), **self._kw()))
        return p

    async def list_policies(self) -> list[objects_pb2.Policy]:
        r: objects_pb2.ListPoliciesResponse = await _call(
            self.objects.ListPolicies(objects_pb2.ListPoliciesRequest(), **self._kw()))
        return list(r.policies)

    async def delete_policy(self, kind: str, namespace: str, name: str) -> None:
        await _call(self.objects.DeletePolicy(objects_pb2.PolicyKey(kind=kind, namespace=namespace, name=name),
                                              **self._kw()))

    async def apply_priority_class(self, pc: objects_pb2.PriorityClass, *,
                                   dry_run: bool = False) -> objects_pb2.ApplyPriorityClassResponse:
        r: objects_pb2.ApplyPriorityClassResponse = await _call(self.objects.ApplyPriorityClass(
            objects_pb2.ApplyPriorityClassRequest(priority_class=pc, dry_run=dry_run), **self._kw()))
        return r

    async def get_priority_class(self, name: str) -> objects_pb2.PriorityClass:
        p: objects_pb2.PriorityClass = await _call(
            self.objects.GetPriorityClass(objects_pb2.PriorityClassKey(name=name), **self._kw()))
        return p

    async def list_priority_classes(self) -> list[objects_pb2.PriorityClass]:
        r: objects_pb2.ListPriorityClassesResponse = await _call(
            self.objects.ListPriorityClasses(objects_pb2.ListPriorityClassesRequest(), **self._kw()))
        return list(r.priority_classes)

    async def delete_priority_class(self, name: str) -> None:
        await _call(self.objects.DeletePriorityClass(objects_pb2.PriorityClassKey(name=name), **self._kw()))

    # ------------------------------------------------------------------ clusters and audit

    async def list_clusters(self) -> list[clusters_pb2.Cluster]:
        resp: clusters_pb2.ListClustersResponse = await _call(
            self.clusters.ListClusters(clusters_pb2.ListClustersRequest(), **self._kw()))
        return list(resp.clusters)

    async def get_cluster(self, name: str) -> clusters_pb2.Cluster:
        c: clusters_pb2.Cluster = await _call(
            self.clusters.GetCluster(clusters_pb2.GetClusterRequest(name=name), **self._kw()))
        return c

    async def taint_cluster(self, name: str, add: list[types_pb2.Taint], remove: list[str]) -> clusters_pb2.Cluster:
        c: clusters_pb2.Cluster = await _call(self.clusters.TaintCluster(
            clusters_pb2.TaintClusterRequest(name=name, add=add, remove=remove), **self._kw()))
        return c

    async def job_audit(self, job: str) -> audit_pb2.JobAudit:
        a: audit_pb2.JobAudit = await _call(self.audit.GetJobAudit(audit_pb2.GetJobAuditRequest(job=job), **self._kw()))
        return a

    async def list_rounds(self, page_size: int = 0, page_token: str = "") -> audit_pb2.ListRoundsResponse:
        r: audit_pb2.ListRoundsResponse = await _call(
            self.audit.ListRounds(audit_pb2.ListRoundsRequest(page_size=page_size, page_token=page_token),
                                  **self._kw()))
        return r
