"""``queues.AllocationCache``: one computation at a time, reused for ten times its cost (at
least a second, at most thirty), so queue reads in a loop cost a bounded share of the CPU."""

from __future__ import annotations

import asyncio

import pytest

from federation.domain.resources import Resources
from federation.service.queues import Allocation, AllocationCache


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _cache(cost: float, clock: _Clock) -> tuple[AllocationCache, list[int]]:
    computed: list[int] = []

    def compute() -> Allocation:
        clock.now += cost  # the computation takes ``cost`` seconds
        computed.append(len(computed))
        return Allocation({"q": Resources()} if computed else {}, Resources())

    return AllocationCache(compute, clock=clock), computed


async def test_concurrent_readers_share_one_computation() -> None:
    cache, computed = _cache(0.01, _Clock())
    got = await asyncio.gather(*(cache.get() for _ in range(20)))
    assert len(computed) == 1 and all(g is got[0] for g in got)


async def test_a_cheap_result_is_reused_for_a_second_and_an_expensive_one_for_ten_times_its_cost() -> None:
    clock = _Clock()
    cache, computed = _cache(0.01, clock)
    await cache.get()
    clock.now += 0.99
    await cache.get()
    assert len(computed) == 1
    clock.now += 0.02
    await cache.get()
    assert len(computed) == 2
    slow, done = _cache(2.0, clock)
    await slow.get()
    clock.now += 19.9
    await slow.get()
    assert len(done) == 1
    clock.now += 0.2
    await slow.get()
    assert len(done) == 2
    slowest, runs = _cache(10.0, clock)  # at most 30 s old, however slow
    await slowest.get()
    clock.now += 30.1
    await slowest.get()
    assert len(runs) == 2


async def test_a_failed_computation_is_not_kept() -> None:
    calls = 0

    def compute() -> Allocation:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("database gone")
        return Allocation({}, Resources())

    cache = AllocationCache(compute)
    with pytest.raises(RuntimeError):
        await cache.get()
    assert (await cache.get()).per_queue == {} and calls == 2
