"""Snapshot conversion off the event loop, on its own threads, one per cluster at a time.

Why not ``asyncio.to_thread``: that is the default executor, which every store call of
every RPC shares, and a thread cannot be stopped when its stream closes. A reconnect
storm of one cluster's big snapshots (each stream sends one and hangs up) once filled
that pool with conversions nobody would read, and another cluster's hello waited over two
minutes for a thread while an admin's ListClusters ran out of time. Here:

- conversions run on a small executor of their own, so they never take a thread a store
  call needs;
- at most one conversion per cluster is running; while it runs, only the newest one of
  that cluster waits for its turn and an older waiting one is dropped (``Superseded``):
  the store keeps only the latest snapshot anyway, so a cluster holds at most one thread
  however many snapshots it sends;
- a waiting conversion whose caller gives up (its stream closed) is never started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_WORKERS = 2


class Superseded(Exception):
    """A newer snapshot of the same cluster replaced this one before it was converted."""

    def __init__(self, cluster: str) -> None:
        super().__init__(f"a newer snapshot of cluster {cluster!r} replaced this one before it was converted")
        self.cluster = cluster


class SnapshotParsing:
    """Runs conversions on a bounded executor, at most one in flight per cluster.

    Used from one event loop (the service's); the executor's threads only report back
    through ``call_soon_threadsafe``. It lives as long as the hub (a replica that loses and
    regains the leadership stops and starts the hub): idle threads cost nothing.
    """

    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                               thread_name_prefix="snapshot-parse")
        self._running: set[str] = set()
        self._waiting: dict[str, asyncio.Future[None]] = {}  # cluster -> the newest waiter

    def in_flight(self) -> int:
        """Conversions started and not finished (for tests and status)."""
        return len(self._running)

    async def run(self, cluster: str, fn: Callable[[], T]) -> T:
        """``fn()`` on the executor once no other conversion of ``cluster`` runs; raises
        ``Superseded`` if a newer call for ``cluster`` arrives while this one waits."""
        loop = asyncio.get_running_loop()
        if cluster in self._running:
            await self._wait_turn(loop, cluster)  # returns holding the cluster's slot
        else:
            self._running.add(cluster)
        try:
            future = self._executor.submit(fn)
        except BaseException:
            self._release(cluster)
            raise

        def finished(_: concurrent.futures.Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing to wake
                loop.call_soon_threadsafe(self._release, cluster)

        # The slot is released when the thread is done, not when the caller stops waiting:
        # a cancelled caller cannot stop a running thread, so it must keep counting.
        future.add_done_callback(finished)
        return await asyncio.wrap_future(future, loop=loop)

    async def _wait_turn(self, loop: asyncio.AbstractEventLoop, cluster: str) -> None:
        older = self._waiting.get(cluster)
        if older is not None and not older.done():
            older.set_exception(Superseded(cluster))
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting[cluster] = turn
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled() and turn.exception() is None:
                self._release(cluster)  # granted the slot, but gone: pass it on
            raise
        finally:
            if self._waiting.get(cluster) is turn:
                del self._waiting[cluster]

    def _release(self, cluster: str) -> None:
        """The cluster's conversion finished: hand the slot to its waiter, if any."""
        turn = self._waiting.pop(cluster, None)
        if turn is not None and not turn.done():
            turn.set_result(None)  # the slot passes on: the cluster stays in ``_running``
            return
        self._running.discard(cluster)
