"""``ttlSecondsAfterFinished``: the leader deletes finished jobs once their TTL has run out.

Modelled on Volcano's garbage collector (volcano-sh/volcano
pkg/controllers/garbagecollector/garbagecollector.go): a job that set the field and has
finished is deleted, with its pods, once the TTL has passed since it finished; 0 deletes
it right after. Volcano counts Completed, Failed and Terminated as finished, from the
job's last state transition, and leaves Aborted out because an aborted Volcano job can be
resumed. Here the terminal states are succeeded, failed (which includes a job the agent
aborted or terminated under its policies: it is never resumed) and cancelled (a user's
cancel, which like Volcano's Terminated ends the job for good); the deadline is stamped
when the store records that state (``store.lifecycle.expiry``).

Where the timer runs: in the store, not in memory. Volcano's controller re-queues each
job for its remaining time in a work queue, which a restart rebuilds from its informer;
our equivalent of the informer is the ``jobs.expires_at`` column, so this loop only asks
the store, every ``interval_seconds`` at most (sooner when the next deadline is nearer),
for the jobs whose deadline has passed and deletes them, a batch per transaction, in a
worker thread (never on the event loop). It runs on the leader only (started and stopped
with the rounds), so a central restart or a standby taking over carries on where the last
leader stopped: a deadline that passed meanwhile is met at the new leader's first sweep.
A deleted job's Works go with it; ``on_deleted`` tells the agent hub, whose Cancel makes
each cluster delete the job's pods (``store.job_expiry``). A failed sweep is logged and
tried again at the next tick; a sweep is idempotent.

A finished job that an unfinished job waits for (``after``) is kept past its deadline
(``store.job_waits``). Such jobs must not cost a look every tick: thousands of pending
flow steps can each keep one, and checking each again every second would cost tens of
milliseconds of database time per second (measured in docs/design/job-ttl.md). So the loop
keeps a watermark, the time up to which it has looked at every deadline: between full
looks it only reads the deadlines after it (one end of an index, then only the jobs newly
due), and every ``recheck_seconds`` (ten intervals by default) it looks at every passed
deadline again, which deletes the kept jobs nothing waits for any more. A kept job is
never swept at every tick, and goes at most ``recheck_seconds`` after its last waiter
finished. A new leader starts with a full look.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from federation.control.leader_task import LeaderTask
from federation.store import Store
from federation.store.job_expiry import DEFAULT_BATCH, ExpiredJob

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 1.0
# A full look at every passed deadline (kept jobs included) every this many intervals.
RECHECK_INTERVALS = 10


class JobTtl:
    def __init__(self, store: Store, *, on_deleted: Callable[[Sequence[ExpiredJob]], None] = lambda _: None,
                 interval_seconds: float = DEFAULT_INTERVAL_SECONDS, recheck_seconds: float | None = None,
                 batch: int = DEFAULT_BATCH, pause_seconds: float = 0.05) -> None:
        if interval_seconds <= 0:
            raise ValueError(f"the TTL sweep interval must be positive, got {interval_seconds}")
        self._store = store
        self._on_deleted = on_deleted
        self._interval = interval_seconds
        self._recheck = RECHECK_INTERVALS * interval_seconds if recheck_seconds is None else recheck_seconds
        self._batch = batch
        self._pause = pause_seconds
        self._task = LeaderTask("job-ttl", "job TTL: sweep", self.tick, interval_seconds)
        # Every deadline up to this time was looked at (deleted, or kept for a waiter) by the
        # full look at ``_full_at`` or a partial one since; None: no full look yet.
        self._looked_until: datetime | None = None
        self._full_at: datetime | None = None

    async def start(self) -> None:
        if not self._task.running:
            self._looked_until = self._full_at = None  # a new term looks at everything first
            self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def tick(self) -> float:
        """Sweep when a deadline has passed; how long to wait before the next look."""
        now = self._store.db.now()
        full = self._full_at is None or (now - self._full_at).total_seconds() >= self._recheck
        since = None if full else self._looked_until
        due = await asyncio.to_thread(self._store.expiry.next_expiry, after=since)
        if due is None or due > now:
            if full:
                self._full_at = now
            self._looked_until = now  # nothing was due up to now
            return self._interval if due is None else min(self._interval, (due - now).total_seconds())
        await self._sweep(since, now)
        return self._interval

    async def sweep_now(self) -> list[ExpiredJob]:
        """Delete every job whose TTL after finishing has run out and that no unfinished job
        waits for, batch by batch (a full look)."""
        return await self._sweep(None, self._store.db.now())

    async def _sweep(self, since: datetime | None, now: datetime) -> list[ExpiredJob]:
        deleted: list[ExpiredJob] = []
        while True:
            batch = await asyncio.to_thread(self._store.expiry.delete_expired, self._batch, since=since)
            deleted.extend(batch)
            if batch:
                for job in batch:
                    log.info("job %s deleted: it %s and its ttlSecondsAfterFinished ran out at %s", job.name,
                             job.state, job.expired_at.isoformat(timespec="seconds"))
                self._on_deleted(batch)
            if len(batch) < self._batch:
                break
            await asyncio.sleep(self._pause)  # other writers get the database between batches
        if since is None:
            self._full_at = now
        self._looked_until = now  # taken before the sweep read the clock: nothing up to it is left unseen
        return deleted
