"""The standard ``grpc.health.v1.Health`` service and server reflection (docs/design/standby.md).

Why these statuses: a Kubernetes readiness probe (``grpc: {port}``, or
``grpc-health-probe``) asks for the overall service ``""``, and a Service routes only to
ready pods. So ``""`` is SERVING only where a client should go: the store answers *and*
this replica holds the leadership (always true without ``--leader-election``). The
per-service statuses say what a replica can do right now:

=============================  ==========================================================
service                        SERVING when
=============================  ==========================================================
``""`` (overall)               store answers and this replica leads
AgentService                   store answers and this replica leads (standbys refuse streams)
Job-, Queue-, ObjectService    store answers and this replica leads (their writes are fenced)
ClusterService, AuditService   store answers (read-only: a standby serves them too)
Health, ServerReflection       always
=============================  ==========================================================

Health and reflection take no token: they reveal no tenant data (reflection describes the
public ``.proto`` contract), and probes and operators' tools must reach them without one.
Every other service still authenticates each call (``service/auth.py``).

The store is pinged off the event loop every ``interval`` seconds; a ping that fails
flips every store-backed service to NOT_SERVING until one succeeds again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from federation.store import StoreError
from federation.v1 import agent_pb2, audit_pb2, clusters_pb2, jobs_pb2, objects_pb2, queues_pb2

log = logging.getLogger(__name__)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
OVERALL = ""
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
AGENTS = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
JOBS = jobs_pb2.DESCRIPTOR.services_by_name["JobService"].full_name
QUEUES = queues_pb2.DESCRIPTOR.services_by_name["QueueService"].full_name
OBJECTS = objects_pb2.DESCRIPTOR.services_by_name["ObjectService"].full_name
CLUSTERS = clusters_pb2.DESCRIPTOR.services_by_name["ClusterService"].full_name
AUDIT = audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name
READ_ONLY = (CLUSTERS, AUDIT)
LEADER_ONLY = (OVERALL, JOBS, QUEUES, OBJECTS)
DEFAULT_INTERVAL_SECONDS = 1.0


def statuses(*, store_ok: bool, leading: bool, agents: bool) -> dict[str, int]:
    """The status of every service for these two facts (the table in the module docstring)."""
    serving = SERVING if store_ok else NOT_SERVING
    leader = SERVING if store_ok and leading else NOT_SERVING
    out = {name: serving for name in READ_ONLY}
    out.update({name: leader for name in LEADER_ONLY})
    if agents:
        out[AGENTS] = leader
    out[HEALTH] = SERVING
    out[reflection.SERVICE_NAME] = SERVING
    return out


class _LiveHealth(HealthServicer):  # type: ignore[misc]  # grpc_health's servicer base class is untyped
    """``Check`` answers from the facts at the moment of the call, not from the last publish.

    Why: a replica whose event loop was starved past the end of its term must not answer
    SERVING from a status published while it still led. ``Watch`` streams the published
    statuses (republished every ``interval`` and at every leadership change).
    """

    def __init__(self, live: Callable[[], dict[str, int]]) -> None:
        super().__init__()
        self._live = live

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse:
        status = self._live().get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)


class HealthReporter:
    """Owns the health servicer; re-derives every status when the store or leadership changes."""

    def __init__(self, ping: Callable[[], None], leading: Callable[[], bool], *, agents: bool,
                 interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
        self.servicer = _LiveHealth(self.live)
        self._published: dict[str, int] = {}
        self._ping = ping
        self._leading = leading
        self._agents = agents
        self._interval = interval
        self._store_ok = False
        self._task: asyncio.Task[None] | None = None
        self._shutting_down = False

    def add_to(self, server: grpc.aio.Server, services: Iterable[str]) -> None:
        """Register health and reflection (for ``services`` plus themselves) on ``server``."""
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)
        reflection.enable_server_reflection([*services, HEALTH, reflection.SERVICE_NAME], server)

    async def start(self) -> None:
        """Ping once before returning (a fresh replica is not SERVING before it knows), then poll."""
        await self.refresh()
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="health")

    async def stop(self) -> None:
        """Report NOT_SERVING everywhere (clients move on during the grace period) and stop polling."""
        self._shutting_down = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.servicer.enter_graceful_shutdown()

    async def refresh(self) -> None:
        """Ping the store now and publish the statuses (also called on a leadership change)."""
        try:
            await asyncio.to_thread(self._ping)
            ok = True
        except StoreError as exc:
            ok = False
            if self._store_ok:
                log.warning("health: the store does not answer (%s); NOT_SERVING", exc)
        if ok and not self._store_ok:
            log.info("health: the store answers")
        self._store_ok = ok
        await self.publish()

    async def publish(self) -> None:
        """Set every status from the last ping and the current leadership."""
        if self._shutting_down:
            return
        for name, status in statuses(store_ok=self._store_ok, leading=self._leading(),
                                     agents=self._agents).items():
            self._published[name] = status
            await self.servicer.set(name, status)

    def live(self) -> dict[str, int]:
        """Every status now: the last ping and this instant's leadership (all NOT_SERVING when stopping)."""
        current = statuses(store_ok=self._store_ok, leading=self._leading(), agents=self._agents)
        if self._shutting_down:
            current = {name: NOT_SERVING for name in current}
        return current

    def status(self, service: str = OVERALL) -> int | None:
        """The status of ``service`` now (None when unknown)."""
        return self.live().get(service)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not stop health reporting for good
                log.exception("health refresh failed")
