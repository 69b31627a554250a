"""The central side of ``AgentService.Connect`` (docs/design/work-protocol.md).

Skeleton committed early so the service wiring can construct it; the body lands next.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from federation.service.rounds import RoundScheduler
from federation.v1 import agent_pb2, agent_pb2_grpc

log = logging.getLogger(__name__)


class AgentHub(agent_pb2_grpc.AgentServiceServicer):
    """One stream per connected agent; fences stale leaders; watches for lost clusters."""

    def __init__(
        self,
        store: Any,
        rounds: RoundScheduler,
        auth: Any,
        *,
        grace_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._rounds = rounds
        self._auth = auth
        self._grace = grace_seconds
        self._clock = clock

    async def start(self) -> None:
        """Start the lost-agent watchdog."""

    async def stop(self) -> None:
        """Stop the watchdog and close every agent stream."""

    def notify_works_changed(self, cluster: str) -> None:
        """Push the cluster's new or changed works to its connected agent (if any)."""

    async def cancel_job(self, job: str) -> None:
        """Cancel the job's active work and tell its agent."""

    async def Connect(
        self,
        request_iterator: AsyncIterator[agent_pb2.AgentMessage],
        context: Any,
    ) -> AsyncIterator[agent_pb2.CentralMessage]:
        raise NotImplementedError
        yield agent_pb2.CentralMessage()  # pragma: no cover
