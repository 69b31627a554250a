"""AuditService: the recorded planning rounds and every decision about a job.

A job's audit is visible to whoever may see the job; a tenant's list of rounds shows
only its own queues' counts (``ListRounds``). When audit retention has pruned
rounds from before the job was submitted, the answer says so (``pruned_before``), so a
short audit is never mistaken for a complete one. The audit outlives the job (no
foreign key): when the job is gone, admins still read its decisions; others get
NOT_FOUND, since the queue that decided visibility may be gone too. A job name may be
taken again once its job is gone: a job's audit is only that job's decisions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from datetime import datetime
from typing import Any, Protocol

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.domain.queues import Queue
from federation.service.auth import Authenticator, check_queue, usable_queues
from federation.service.views import decision_to_view, round_to_view, timestamp
from federation.store.audit_retention import Pruning
from federation.store.errors import NotFound
from federation.store.records import DecisionRecord, JobRecord, Page, RoundRecord
from federation.v1 import audit_pb2, audit_pb2_grpc

Context = grpc.aio.ServicerContext[Any, Any]


class _Jobs(Protocol):
    def get(self, name: str) -> JobRecord: ...


class _Queues(Protocol):
    def get(self, name: str) -> Queue: ...
    def all(self) -> list[Queue]: ...


class _Audit(Protocol):
    def job_audit(self, job: str, *, limit: int = 200,
                  created_at: datetime | None = None) -> list[DecisionRecord]: ...
    def list_rounds(self, *, page_size: int | None = None, page_token: str = "",
                    queues: Collection[str] | None = None) -> Page[RoundRecord]: ...
    def pruning(self) -> Pruning | None: ...


class AuditStore(Protocol):
    """What ``AuditServicer`` needs from the store."""

    @property
    def jobs(self) -> _Jobs: ...
    @property
    def queues(self) -> _Queues: ...
    @property
    def audit(self) -> _Audit: ...


class AuditServicer(audit_pb2_grpc.AuditServiceServicer):
    def __init__(self, store: AuditStore, auth: Authenticator) -> None:
        self._store = store
        self._auth = auth

    async def GetJobAudit(self, request: audit_pb2.GetJobAuditRequest, context: Context) -> audit_pb2.JobAudit:
        who = self._auth.require_tenant(context)
        if not request.job:
            raise InvalidInput("job", "must not be empty")
        try:
            record: JobRecord | None = await asyncio.to_thread(self._store.jobs.get, request.job)
        except NotFound:
            if not who.admin:
                raise
            record = None
        if record is not None and not who.admin:
            queue = await asyncio.to_thread(self._store.queues.get, record.queue)
            check_queue(who, queue.name, queue.owners)
        # The job's own decisions: an earlier job of the same name (another tenant's, maybe)
        # is not this job. Admins asking about a name with no job read all of its decisions.
        decisions: list[DecisionRecord] = await asyncio.to_thread(
            self._store.audit.job_audit, request.job, created_at=record.created_at if record is not None else None)
        if record is None and not decisions:
            raise NotFound("job", request.job)
        audit = audit_pb2.JobAudit(job=request.job, decisions=[decision_to_view(d) for d in decisions])
        pruning: Pruning | None = await asyncio.to_thread(self._store.audit.pruning)
        if pruning is not None and (record is None or record.created_at < pruning.pruned_before):
            audit.pruned_before.CopyFrom(timestamp(pruning.pruned_before))  # some of its rounds may be gone
        return audit

    async def ListRounds(self, request: audit_pb2.ListRoundsRequest, context: Context) -> audit_pb2.ListRoundsResponse:
        """Admins: every round with its totals. A tenant: only the rounds that counted a job
        of a queue it may use, with counts over those queues alone, and without the
        objective and bound (sums over every tenant's jobs)."""
        who = self._auth.require_tenant(context)
        if request.page_size < 0:
            raise InvalidInput("page_size", "must not be negative")
        queues = None if who.admin else usable_queues(who, await asyncio.to_thread(self._store.queues.all))
        page = await asyncio.to_thread(self._store.audit.list_rounds, page_size=request.page_size or None,
                                       page_token=request.page_token, queues=queues)
        views = [round_to_view(r) for r in page.items]
        if queues is not None:
            for view in views:
                view.ClearField("objective")
                view.ClearField("bound")
        return audit_pb2.ListRoundsResponse(rounds=views, next_page_token=page.next_token)
