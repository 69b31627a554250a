"""Planning rounds: debounce triggers, plan off the event loop, record in one transaction.

Skeleton committed early so the service wiring can construct it; the body lands next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from federation.domain import Plan, PlanLimits

log = logging.getLogger(__name__)

DEFAULT_LIMITS = PlanLimits()


class RoundScheduler:
    """Runs planning rounds when something changed (submission, snapshot, lost cluster)."""

    def __init__(
        self,
        store: Any,
        *,
        debounce_seconds: float = 0.2,
        limits: PlanLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
        on_plan: Callable[[Plan], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._debounce = debounce_seconds
        self._limits = limits
        self._clock = clock
        self._on_plan = on_plan
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the background loop that turns triggers into rounds."""

    async def stop(self) -> None:
        """Stop the loop; a round in flight finishes first."""

    def trigger(self, reason: str) -> None:
        """Ask for a round soon; bursts within the debounce window coalesce into one."""
        self._wake.set()

    async def run_once(self, trigger: str) -> int:
        """Run one round now and return its id."""
        raise NotImplementedError
