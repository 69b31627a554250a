"""Leader election over an in-memory Lease with optimistic concurrency (agents/leader.py).

The clocks are real but the durations are short (tenths of a second), so the timing
claims of docs/design/leader-election.md are checked as they run: one leader at a time,
takeover within the lease duration of the last renewal, immediate stop on a lost
renewal, monotonically increasing epochs, release on return.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

import pytest

from agents.backend import BackendError
from agents.core.records import PodManifest
from agents.fake.cluster import FakeCluster
from agents.leader import GuardedBackend, LeaderElector, Leadership, LeaseConflict, LeaseRecord


class MemoryLease:
    """One Lease; ``version`` increases on every write, like a resourceVersion."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.counter = 0
        self.fail = False  # simulate an unreachable apiserver
        self.writes: list[LeaseRecord] = []

    async def get(self) -> LeaseRecord | None:
        if self.fail:
            raise OSError("apiserver unreachable")
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        if self.fail:
            raise OSError("apiserver unreachable")
        if self.record is not None:
            raise LeaseConflict("exists")
        return self._write(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        if self.fail:
            raise OSError("apiserver unreachable")
        if self.record is None or self.record.version != record.version:
            raise LeaseConflict("stale version")
        return self._write(record)

    def _write(self, record: LeaseRecord) -> LeaseRecord:
        self.counter += 1
        self.record = replace(record, version=str(self.counter))
        self.writes.append(self.record)
        return self.record


def elector(store: MemoryLease, who: str, **kw: float) -> LeaderElector:
    opts = {"lease_duration": 0.6, "renew_deadline": 0.4, "retry_period": 0.1, **kw}
    return LeaderElector(store, who, lease_duration=opts["lease_duration"], renew_deadline=opts["renew_deadline"],
                         retry_period=opts["retry_period"])


class Tracker:
    """Records each term and asserts no two terms overlap."""

    def __init__(self) -> None:
        self.active: set[str] = set()
        self.terms: list[tuple[str, int, float]] = []  # (identity, epoch, monotonic start)
        self.overlaps = 0

    def lead(self, hold: asyncio.Event | None = None) -> Callable[[Leadership], Coroutine[Any, Any, None]]:
        async def run(term: Leadership) -> None:
            if self.active:
                self.overlaps += 1
            self.active.add(term.identity)
            self.terms.append((term.identity, term.epoch, time.monotonic()))
            try:
                await (hold.wait() if hold is not None else asyncio.Event().wait())
            finally:
                self.active.discard(term.identity)

        return run


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"),
    [(1.0, 1.0, 0.1), (1.0, 0.5, 0.6), (1.0, 0.0, 0.1)],
    ids=["deadline-not-below-duration", "retry-beyond-slack", "zero-deadline"],
)
def test_unsafe_timings_are_refused(duration: float, deadline: float, retry: float) -> None:
    with pytest.raises(ValueError):
        LeaderElector(MemoryLease(), "a", lease_duration=duration, renew_deadline=deadline, retry_period=retry)


async def test_first_candidate_creates_the_lease_and_others_follow() -> None:
    store, track, stop = MemoryLease(), Tracker(), asyncio.Event()
    runs = [asyncio.create_task(elector(store, who).run(track.lead(), stop=stop)) for who in ("a", "b", "c")]
    await asyncio.sleep(1.0)
    stop.set()
    await asyncio.gather(*runs)
    assert len(track.terms) == 1 and track.overlaps == 0
    assert store.record is not None and store.record.holder == ""  # released on stop
    assert store.record.transitions == 0


async def test_killed_leader_is_replaced_within_the_lease_duration() -> None:
    store, track, stop = MemoryLease(), Tracker(), asyncio.Event()
    first = asyncio.create_task(elector(store, "a").run(track.lead(), stop=stop))
    await asyncio.sleep(0.3)
    follower = asyncio.create_task(elector(store, "b").run(track.lead(), stop=stop))
    await asyncio.sleep(0.5)
    assert [t[0] for t in track.terms] == ["a"]
    last_renewal = time.monotonic()
    first.cancel()  # killed: no release, the Lease must expire
    with pytest.raises(asyncio.CancelledError):
        await first
    track.active.clear()
    for _ in range(100):
        if len(track.terms) == 2:
            break
        await asyncio.sleep(0.02)
    stop.set()
    await follower
    assert [t[0] for t in track.terms] == ["a", "b"]
    took = track.terms[1][2] - last_renewal
    assert took <= 0.6 + 0.15, f"takeover after {took:.2f}s, lease duration 0.6s"
    assert track.terms[1][1] > track.terms[0][1]  # newer leader, larger epoch
    assert store.record is not None and store.record.transitions == 1


async def test_leader_stops_at_the_renew_deadline_when_it_cannot_renew() -> None:
    store, stop = MemoryLease(), asyncio.Event()
    terms: list[Leadership] = []

    async def lead(term: Leadership) -> None:
        terms.append(term)
        await asyncio.Event().wait()

    run = asyncio.create_task(elector(store, "a").run(lead, stop=stop))
    await asyncio.sleep(0.2)
    store.fail = True
    cut = time.monotonic()
    await asyncio.wait_for(terms[0].lost.wait(), 1.0)
    assert time.monotonic() - cut <= 0.4 + 0.05
    assert not terms[0].valid() and terms[0].reason == "renew deadline passed"
    stop.set()
    await run


async def test_conflicting_renewal_ends_the_term_at_once() -> None:
    store = MemoryLease()
    terms: list[Leadership] = []

    async def lead(term: Leadership) -> None:
        terms.append(term)
        await asyncio.Event().wait()

    stop = asyncio.Event()
    run = asyncio.create_task(elector(store, "a").run(lead, stop=stop))
    await asyncio.sleep(0.15)
    assert store.record is not None
    store._write(replace(store.record, holder="intruder"))  # someone else wrote the Lease
    await asyncio.wait_for(terms[0].lost.wait(), 0.5)
    assert terms[0].reason == "lease taken over by intruder"
    stop.set()
    await run


async def test_returning_lead_releases_and_reelects_with_a_larger_epoch() -> None:
    store, stop = MemoryLease(), asyncio.Event()
    epochs: list[int] = []

    async def lead(term: Leadership) -> None:
        epochs.append(term.epoch)
        if len(epochs) == 2:
            stop.set()
        # returns at once: "fenced by central"

    await asyncio.wait_for(elector(store, "a").run(lead, stop=stop), 2.0)
    assert len(epochs) == 2 and epochs[1] > epochs[0]


async def test_epoch_is_above_the_previous_holders_even_with_a_slow_clock() -> None:
    store = MemoryLease()
    future_us = int((time.time() + 3600) * 1_000_000)  # previous leader's clock ran ahead
    store._write(LeaseRecord(holder="", duration_seconds=1, acquire_time_us=future_us, renew_time_us=future_us))
    term = await elector(store, "b").try_acquire()
    assert term is not None and term.epoch == (future_us + 1) * 1000


async def test_guarded_backend_refuses_writes_after_the_term() -> None:
    cluster = FakeCluster("c")
    term = Leadership("a", 1, time.monotonic() + 60)
    guarded = GuardedBackend(cluster, term)
    await guarded.create_pod(PodManifest(name="p", namespace="default"))
    term.end("lease taken over by b")
    with pytest.raises(BackendError, match="not the leader"):
        await guarded.create_pod(PodManifest(name="q", namespace="default"))
    assert [p.name for p in await guarded.list_pods({})] == ["p"]  # reads still work
