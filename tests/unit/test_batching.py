"""The group-commit batcher behind SubmitJob (``federation.service.batching``).

No clocks are asserted: a flush that should not wait for the delay is tested with a delay
of an hour (the test would hang, guarded by a generous timeout), and "the next batch waits
for a free slot" is arranged with an event the test releases.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from federation.service.batching import Batcher

HANG_GUARD = 30.0  # seconds; only reached if a flush never happens


class Recorder:
    """A batch function that doubles its items and records the batches it saw."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.batches: list[list[int]] = []
        self.gate = gate

    def __call__(self, items: list[int]) -> list[int]:
        if self.gate is not None and not self.batches:
            self.gate.wait(HANG_GUARD)  # the first batch blocks until the test releases it
        self.batches.append(items)
        return [2 * i for i in items]


async def test_concurrent_calls_share_batches_and_each_gets_its_own_outcome() -> None:
    run = Recorder()
    batcher = Batcher(run, max_items=4, max_delay=0.0, max_batches=1)
    results = await asyncio.wait_for(asyncio.gather(*(batcher.submit(i) for i in range(10))), HANG_GUARD)
    assert results == [2 * i for i in range(10)]
    assert sorted(i for batch in run.batches for i in batch) == list(range(10))
    assert all(len(batch) <= 4 for batch in run.batches) and len(run.batches) < 10


async def test_a_full_batch_goes_without_waiting_for_the_delay() -> None:
    run = Recorder()
    batcher = Batcher(run, max_items=3, max_delay=3600.0)
    results = await asyncio.wait_for(asyncio.gather(*(batcher.submit(i) for i in range(3))), HANG_GUARD)
    assert results == [0, 2, 4] and run.batches == [[0, 1, 2]]


async def test_a_lone_call_goes_after_the_delay() -> None:
    run = Recorder()
    batcher = Batcher(run, max_items=100, max_delay=0.001)
    assert await asyncio.wait_for(batcher.submit(21), HANG_GUARD) == 42
    assert run.batches == [[21]]


async def test_calls_arriving_while_the_batches_run_go_together_when_a_slot_frees() -> None:
    gate = threading.Event()
    run = Recorder(gate)
    batcher = Batcher(run, max_items=64, max_delay=0.0, max_batches=1)
    first = asyncio.ensure_future(batcher.submit(0))
    while batcher.batches == 0:  # the first batch has started and is blocked on the gate
        await asyncio.sleep(0)
    later = [asyncio.ensure_future(batcher.submit(i)) for i in range(1, 6)]
    await asyncio.sleep(0.01)
    assert batcher.batches == 1  # no second batch while the only slot is busy
    gate.set()
    assert await asyncio.wait_for(asyncio.gather(first, *later), HANG_GUARD) == [0, 2, 4, 6, 8, 10]
    assert run.batches == [[0], [1, 2, 3, 4, 5]]


async def test_a_failing_batch_fails_every_call_in_it_and_only_those() -> None:
    def run(items: list[int]) -> list[int]:
        if 13 in items:
            raise ConnectionError("database gone")
        return items

    batcher = Batcher(run, max_items=2, max_delay=0.0, max_batches=1)
    results = await asyncio.wait_for(
        asyncio.gather(*(batcher.submit(i) for i in (1, 2, 13, 4)), return_exceptions=True), HANG_GUARD)
    assert results[:2] == [1, 2]
    assert all(isinstance(r, ConnectionError) for r in results[2:])


async def test_a_batch_function_returning_the_wrong_count_fails_its_calls() -> None:
    batcher: Batcher[int, int] = Batcher(lambda items: items[:-1], max_items=2, max_delay=0.0)
    results = await asyncio.wait_for(
        asyncio.gather(batcher.submit(1), batcher.submit(2), return_exceptions=True), HANG_GUARD)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_a_call_cancelled_before_its_batch_starts_is_left_out() -> None:
    run = Recorder()
    batcher = Batcher(run, max_items=10, max_delay=3600.0)
    gone = asyncio.ensure_future(batcher.submit(1))
    kept = asyncio.ensure_future(batcher.submit(2))
    await asyncio.sleep(0)
    gone.cancel()
    await batcher.close()
    assert await kept == 4 and run.batches == [[2]]


async def test_close_runs_what_waits_and_waits_for_what_runs() -> None:
    run = Recorder()
    batcher = Batcher(run, max_items=10, max_delay=3600.0)
    calls = [asyncio.ensure_future(batcher.submit(i)) for i in range(3)]
    await asyncio.sleep(0)
    await asyncio.wait_for(batcher.close(), HANG_GUARD)
    assert all(c.done() for c in calls) and run.batches == [[0, 1, 2]]


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        Batcher(Recorder(), max_items=0)
