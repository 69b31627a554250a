"""A background task the leader runs for as long as it leads: audit retention and the jobs'
TTL sweep (control/retention.py, control/job_ttl.py).

Both are started when the lease is won and stopped when it is lost or the server stops
(service/server.py), repeat a step that works in a worker thread, and must survive the
database being briefly gone: a failed step is logged and tried again after the interval,
never ends the task. One loop for both, so they agree on how they start, stop and fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from federation.store import StoreError

log = logging.getLogger(__name__)


class LeaderTask:
    """Run ``step`` again and again: it returns how long to sleep before the next step;
    a step that raises is logged (a ``StoreError`` as a warning) and retried after
    ``interval_seconds``."""

    def __init__(self, name: str, what: str, step: Callable[[], Awaitable[float]], interval_seconds: float) -> None:
        self._name, self._what, self._step, self._interval = name, what, step, interval_seconds
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self._name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            delay = self._interval
            try:
                delay = await self._step()
            except StoreError as exc:
                log.warning("%s failed (%s); retrying in %gs", self._what, exc, self._interval)
            except Exception:
                log.exception("%s failed; retrying in %gs", self._what, self._interval)
            await asyncio.sleep(delay)
