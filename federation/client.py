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

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from federation.files import MAX_PEM_BYTES, read_bytes
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
        """Raises ``InvalidInput`` naming the flag (``--ca``, ``--cert``, ``--key``) of a file it cannot use."""
        if (self.cert is None) != (self.key is None):
            raise ValueError("--cert and --key go together")
        return grpc.ssl_channel_credentials(
            root_certificates=read_bytes(self.ca, "--ca", MAX_PEM_BYTES) if self.ca else None,
            private_key=read_bytes(self.key, "--key", MAX_PEM_BYTES) if self.key else None,
            certificate_chain=read_bytes(self.cert, "--cert", MAX_PEM_BYTES) if self.cert else None,
        )


# Retries after the first attempt at most: each call builds its list of delays up front, and
# past 2 s a delay (the back-off's cap) a hundred retries already wait over three minutes.
MAX_RETRIES = 100


@dataclass(frozen=True)
class Retry:
    """Retries of idempotent calls that failed UNAVAILABLE (server restarting, store blip).

    Bounded: at most ``attempts`` tries, sleeping ``initial_backoff`` seconds after the
    first failure, times ``multiplier`` after each next one, capped at ``max_backoff``,
    each delay jittered by up to ``jitter`` of itself so clients that lost the same
    server do not return in lockstep. Which calls are idempotent: every read, SubmitJob
    (by name: an identical resubmission answers created=False, so a retry after a lost
    answer stores nothing twice), CancelJob, UpdateQueue, the declarative ApplyPolicy and
    ApplyPriorityClass, and TaintCluster; never CreateQueue or the Delete calls (a retry
    after a lost success would answer ALREADY_EXISTS / NOT_FOUND).
    """

    attempts: int = 4
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not 1 <= self.attempts <= MAX_RETRIES + 1 or self.initial_backoff < 0 or self.max_backoff < 0 \
                or self.multiplier < 1:
            raise ValueError(f"Retry: 1 <= attempts <= {MAX_RETRIES + 1}, backoffs >= 0 and multiplier >= 1")

    def delays(self) -> list[float]:
        """The sleeps between attempts (``attempts - 1`` of them), jittered."""
        out, delay = [], self.initial_backoff
        for _ in range(self.attempts - 1):
            out.append(min(delay, self.max_backoff) * (1 + random.uniform(-self.jitter, self.jitter)))
            delay *= self.multiplier
        return out


NO_RETRY = Retry(attempts=1)


@dataclass(frozen=True)
class Reconnect:
    """The channel's reconnect back-off after the connection dropped (gRPC channel arguments).

    gRPC's defaults (first retry after 1 s, growing to 120 s) left clients waiting 0.6-5.6 s
    after a server restart (issue 10); these defaults reconnect within 0.1-2 s.
    """

    initial_backoff_ms: int = 100
    min_backoff_ms: int = 100
    max_backoff_ms: int = 2000

    def options(self) -> list[tuple[str, Any]]:
        return [("grpc.initial_reconnect_backoff_ms", self.initial_backoff_ms),
                ("grpc.min_reconnect_backoff_ms", self.min_backoff_ms),
                ("grpc.max_reconnect_backoff_ms", self.max_backoff_ms)]


class FederationClient:
    """One channel to ``address`` (``HOST:PORT``); use as ``async with FederationClient(...) as c``.

    ``retry`` re-sends idempotent calls that failed UNAVAILABLE (``NO_RETRY`` turns it off);
    ``reconnect`` sets how soon the channel reconnects after losing the server.
    """

    def __init__(self, address: str, token: str | None = None, tls: Tls | None = None,
                 *, timeout: float | None = 30.0, retry: Retry | None = None,
                 reconnect: Reconnect | None = None) -> None:
        options: list[tuple[str, Any]] = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   *(reconnect or Reconnect()).options()]
        self.retry = retry or Retry()
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
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except TimeoutError:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "server not reachable") from None

    def _kw(self) -> dict[str, Any]:
        return {"metadata": self._metadata, "timeout": self._timeout}

    async def _unary(self, method: Any, request: Any, idempotent: bool = True) -> Any:
        """One unary call, retried per ``self.retry`` when idempotent and UNAVAILABLE."""
        delays = self.retry.delays() if idempotent else []
        for delay in [*delays, None]:
            try:
                return await method(request, **self._kw())
            except grpc.aio.AioRpcError as exc:
                if delay is None or exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise ServiceError(exc.code(), exc.details() or "") from None
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ jobs

    async def submit_job(self, spec: types_pb2.JobSpec, *, dry_run: bool = False) -> jobs_pb2.SubmitJobResponse:
        """Submit (idempotent by name: an identical resubmission answers created=False);
        ``dry_run`` runs the server's checks and stores nothing."""
        resp: jobs_pb2.SubmitJobResponse = await self._unary(
            self.jobs.SubmitJob, jobs_pb2.SubmitJobRequest(spec=spec, dry_run=dry_run))
        return resp

    async def get_job(self, name: str) -> jobs_pb2.Job:
        job: jobs_pb2.Job = await self._unary(self.jobs.GetJob, jobs_pb2.GetJobRequest(name=name))
        return job

    async def cancel_job(self, name: str, reason: str = "") -> jobs_pb2.Job:
        job: jobs_pb2.Job = await self._unary(self.jobs.CancelJob, jobs_pb2.CancelJobRequest(name=name, reason=reason))
        return job

    async def list_jobs_page(self, queue: str = "", state: int = 0, page_size: int = 0,
                             page_token: str = "") -> jobs_pb2.ListJobsResponse:
        req = jobs_pb2.ListJobsRequest(queue=queue, state=state,  # type: ignore[arg-type]  # an int for the JobState enum
                                       page_size=page_size, page_token=page_token)
        resp: jobs_pb2.ListJobsResponse = await self._unary(self.jobs.ListJobs, req)
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
        resp: jobs_pb2.ExplainJobResponse = await self._unary(
            self.jobs.ExplainJob, jobs_pb2.ExplainJobRequest(name=name))
        return resp

    async def watch_jobs(self, from_event_id: int = 0, queue: str = "", *,
                         batched: bool = True) -> AsyncIterator[jobs_pb2.JobEvent]:
        """Events after ``from_event_id``, then live ones, one at a time; resume with the last ``event_id`` seen.

        Reads ``WatchJobBatches`` (several events to a message: far fewer messages for the
        server to send when many watch; docs/design/watch.md), or ``WatchJobs`` with
        ``batched=False`` or when the server does not know the batched call (UNIMPLEMENTED,
        an older server). A stream that fails UNAVAILABLE (server restarting, connection
        lost) is reopened after the last event delivered, per ``self.retry``: the caller
        sees every event once, in order. The attempts start over after each event received.
        """
        after = from_event_id
        delays = self.retry.delays()
        while True:
            request = jobs_pb2.WatchJobsRequest(from_event_id=after, queue=queue)
            call: Any = (self.jobs.WatchJobBatches(request, metadata=self._metadata) if batched
                         else self.jobs.WatchJobs(request, metadata=self._metadata))
            try:
                async for message in call:
                    for event in (message.events if batched else (message,)):
                        after = event.event_id
                        yield event
                    delays = self.retry.delays()
                return  # the server ended the watch (shutting down)
            except grpc.aio.AioRpcError as exc:
                if batched and exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    batched = False
                    continue
                if exc.code() != grpc.StatusCode.UNAVAILABLE or not delays:
                    raise ServiceError(exc.code(), exc.details() or "") from None
            finally:
                call.cancel()
            await asyncio.sleep(delays.pop(0))

    # ------------------------------------------------------------------ queues

    async def create_queue(self, queue: queues_pb2.Queue) -> queues_pb2.Queue:
        q: queues_pb2.Queue = await self._unary(
            self.queues.CreateQueue, queues_pb2.CreateQueueRequest(queue=queue), idempotent=False)
        return q

    async def update_queue(self, queue: queues_pb2.Queue) -> queues_pb2.Queue:
        q: queues_pb2.Queue = await self._unary(self.queues.UpdateQueue, queues_pb2.UpdateQueueRequest(queue=queue))
        return q

    async def get_queue(self, name: str) -> queues_pb2.Queue:
        q: queues_pb2.Queue = await self._unary(self.queues.GetQueue, queues_pb2.GetQueueRequest(name=name))
        return q

    async def list_queues(self) -> list[queues_pb2.Queue]:
        out: list[queues_pb2.Queue] = []
        token = ""
        while True:
            page: queues_pb2.ListQueuesResponse = await self._unary(
                self.queues.ListQueues, queues_pb2.ListQueuesRequest(page_token=token))
            out.extend(page.queues)
            token = page.next_page_token
            if not token:
                return out

    async def delete_queue(self, name: str) -> None:
        await self._unary(self.queues.DeleteQueue, queues_pb2.DeleteQueueRequest(name=name), idempotent=False)

    # ------------------------------------------------------------------ policies and priority classes

    async def apply_policy(self, policy: objects_pb2.Policy, *,
                           dry_run: bool = False) -> objects_pb2.ApplyPolicyResponse:
        r: objects_pb2.ApplyPolicyResponse = await self._unary(
            self.objects.ApplyPolicy, objects_pb2.ApplyPolicyRequest(policy=policy, dry_run=dry_run))
        return r

    async def get_policy(self, kind: str, namespace: str, name: str) -> objects_pb2.Policy:
        p: objects_pb2.Policy = await self._unary(
            self.objects.GetPolicy, objects_pb2.PolicyKey(kind=kind, namespace=namespace, name=name))
        return p

    async def list_policies(self) -> list[objects_pb2.Policy]:
        r: objects_pb2.ListPoliciesResponse = await self._unary(
            self.objects.ListPolicies, objects_pb2.ListPoliciesRequest())
        return list(r.policies)

    async def delete_policy(self, kind: str, namespace: str, name: str) -> None:
        await self._unary(
            self.objects.DeletePolicy, objects_pb2.PolicyKey(kind=kind, namespace=namespace, name=name),
            idempotent=False)

    async def apply_priority_class(self, pc: objects_pb2.PriorityClass, *,
                                   dry_run: bool = False) -> objects_pb2.ApplyPriorityClassResponse:
        r: objects_pb2.ApplyPriorityClassResponse = await self._unary(
            self.objects.ApplyPriorityClass, objects_pb2.ApplyPriorityClassRequest(priority_class=pc, dry_run=dry_run))
        return r

    async def get_priority_class(self, name: str) -> objects_pb2.PriorityClass:
        p: objects_pb2.PriorityClass = await self._unary(
            self.objects.GetPriorityClass, objects_pb2.PriorityClassKey(name=name))
        return p

    async def list_priority_classes(self) -> list[objects_pb2.PriorityClass]:
        r: objects_pb2.ListPriorityClassesResponse = await self._unary(
            self.objects.ListPriorityClasses, objects_pb2.ListPriorityClassesRequest())
        return list(r.priority_classes)

    async def delete_priority_class(self, name: str) -> None:
        await self._unary(
            self.objects.DeletePriorityClass, objects_pb2.PriorityClassKey(name=name), idempotent=False)

    # ------------------------------------------------------------------ clusters and audit

    async def list_clusters(self) -> list[clusters_pb2.Cluster]:
        resp: clusters_pb2.ListClustersResponse = await self._unary(
            self.clusters.ListClusters, clusters_pb2.ListClustersRequest())
        return list(resp.clusters)

    async def get_cluster(self, name: str) -> clusters_pb2.Cluster:
        c: clusters_pb2.Cluster = await self._unary(self.clusters.GetCluster, clusters_pb2.GetClusterRequest(name=name))
        return c

    async def taint_cluster(self, name: str, add: list[types_pb2.Taint], remove: list[str]) -> clusters_pb2.Cluster:
        c: clusters_pb2.Cluster = await self._unary(
            self.clusters.TaintCluster, clusters_pb2.TaintClusterRequest(name=name, add=add, remove=remove))
        return c

    async def job_audit(self, job: str) -> audit_pb2.JobAudit:
        a: audit_pb2.JobAudit = await self._unary(self.audit.GetJobAudit, audit_pb2.GetJobAuditRequest(job=job))
        return a

    async def list_rounds(self, page_size: int = 0, page_token: str = "") -> audit_pb2.ListRoundsResponse:
        r: audit_pb2.ListRoundsResponse = await self._unary(
            self.audit.ListRounds, audit_pb2.ListRoundsRequest(page_size=page_size, page_token=page_token))
        return r
