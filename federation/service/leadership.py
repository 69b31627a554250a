"""Which central replica leads: the elector over the database lease (docs/design/standby.md).

Timings, for a lease of D seconds: the leader renews every D/3; a standby tries to take
the lease every ``min(1 s, D/5)``. The lease's expiry is the database's clock, but the
leader ends its own term on its *monotonic* clock at (start of its last successful
renewal) + 5D/6, which comes D/6 before the expiry the database recorded (the statement
ran after that start), so a leader always stops believing it leads before anyone can
take over, even when a health check answered just before is read a little later. The
lease statements run on a thread of their own: a thread pool busy with store calls must
not delay a renewal past the term. The write fence (``store.leases``) makes that belt-and-braces: even a leader
frozen past its term cannot commit once a new epoch exists.

A leader that loses its lease (renewals failing until the deadline, or refused) does not
go back to standby in the same process: ``serve`` exits with status 1 and Kubernetes
restarts it as a fresh standby. Dropping every piece of in-memory leader state (agent
sessions, the previous plan, pending triggers) by restarting is simpler to get right
than resetting it in place, and a lost lease is rare. A SIGTERM releases the lease, so a
rolling update hands over within one standby poll.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from federation.store import StoreError
from federation.store.leases import LeaseRepository

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_LEASE_SECONDS = 2.0
MAX_LEASE_SECONDS = 3600.0


def replica_identity() -> str:
    """Host (the pod name in Kubernetes), pid and a random suffix: unique per process."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class LeaseTimings:
    """How often to renew and to poll for a lease of ``seconds``."""

    seconds: float

    def __post_init__(self) -> None:
        if not MIN_LEASE_SECONDS <= self.seconds <= MAX_LEASE_SECONDS:
            raise ValueError(f"--lease-seconds: must be between {MIN_LEASE_SECONDS:g} and {MAX_LEASE_SECONDS:g}, "
                             f"got {self.seconds:g}")

    @property
    def renew_every(self) -> float:
        return self.seconds / 3

    @property
    def poll_every(self) -> float:
        return min(1.0, self.seconds / 5)

    @property
    def term(self) -> float:
        """How long the leader believes in a renewal: the lease less a sixth, so its term
        is over (NOT_SERVING, writes refused locally) before anyone can take the lease."""
        return self.seconds * 5 / 6


class Leadership:
    """This replica's view of its own term: an epoch and a monotonic deadline.

    Without leader election (``always()``) the replica always leads with epoch 0 and no
    fence is installed.
    """

    def __init__(self, *, elected: bool = False, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._always = elected
        self._monotonic = monotonic
        self.epoch = 0
        self.deadline = 0.0

    @classmethod
    def always(cls) -> Leadership:
        return cls(elected=True)

    def leading(self) -> bool:
        return self._always or (self.epoch > 0 and self._monotonic() < self.deadline)

    def current_epoch(self) -> int:
        """The epoch while the term lasts, else 0 (what the write fence checks)."""
        return self.epoch if self.leading() else 0


Callback = Callable[[int], Awaitable[None]]


class Elector:
    """Campaign for the lease, then keep renewing it; ``run`` returns when the term ends."""

    def __init__(self, leases: LeaseRepository, timings: LeaseTimings, leadership: Leadership, *,
                 identity: str | None = None, on_elected: Callback, on_lost: Callable[[str], Awaitable[None]],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._leases = leases
        self._timings = timings
        self._leadership = leadership
        self.identity = identity or replica_identity()
        self._on_elected = on_elected
        self._on_lost = on_lost
        self._monotonic = monotonic
        self._stopping = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="leader-lease")

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, functools.partial(fn, *args))

    async def run(self) -> None:
        epoch = await self._campaign()
        if epoch is None:
            return
        reason = await self._lead(epoch)
        if reason:
            log.error("leadership lost (epoch %d): %s", epoch, reason)
            await self._on_lost(reason)

    async def release(self) -> None:
        """Graceful stop: end the term and expire the lease now so a standby takes over."""
        self._stopping = True
        epoch, self._leadership.epoch = self._leadership.epoch, 0
        if epoch > 0:
            try:
                await self._run(self._leases.release, self.identity, epoch)
                log.info("leader lease released (epoch %d)", epoch)
            except StoreError as exc:
                log.warning("could not release the leader lease (%s); it expires by itself", exc)
        self._thread.shutdown(wait=False)

    async def _campaign(self) -> int | None:
        log.info("standby %s: waiting for the leader lease (%gs)", self.identity, self._timings.seconds)
        while not self._stopping:
            started = self._monotonic()
            try:
                epoch = await self._run(self._leases.try_acquire, self.identity, self._timings.seconds)
            except StoreError as exc:
                log.warning("standby: cannot reach the lease (%s)", exc)
                epoch = None
            if epoch is not None and not self._stopping:
                self._leadership.epoch = epoch
                self._leadership.deadline = started + self._timings.term
                log.info("elected leader %s (epoch %d)", self.identity, epoch)
                await self._on_elected(epoch)
                return epoch
            await asyncio.sleep(self._timings.poll_every)
        return None

    async def _lead(self, epoch: int) -> str:
        """Renew until the term ends; the reason it ended ("" for a graceful stop)."""
        while not self._stopping:
            await asyncio.sleep(self._timings.renew_every)
            if self._stopping:
                return ""
            started = self._monotonic()
            try:
                renewed = await asyncio.wait_for(
                    self._run(self._leases.renew, self.identity, epoch, self._timings.seconds),
                    timeout=max(0.1, self._leadership.deadline - started))
            except (StoreError, TimeoutError) as exc:
                if self._monotonic() >= self._leadership.deadline:
                    return f"could not renew the lease before it expired ({str(exc) or 'timed out'})"
                log.warning("lease renewal failed (%s); retrying until the term ends", exc)
                continue
            if not renewed:
                return "the lease is held by another replica (or expired)"
            if self._leadership.epoch == epoch:
                self._leadership.deadline = started + self._timings.term
        return ""

