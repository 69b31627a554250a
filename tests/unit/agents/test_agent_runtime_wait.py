"""The runtime's loops wait on events with a timeout; a cancellation that arrives in the
same loop iteration as the event is set must still cancel the loop (Python 3.11's
``wait_for(event.wait(), t)`` swallowed it, so a stopped agent kept reconciling)."""

from __future__ import annotations

import asyncio

import pytest
from agentkit import fake, job, work

from agents.backend import BackendError
from agents.runtime import AgentRuntime, RuntimeConfig, wait_event


async def _ended_cancelled(task: asyncio.Task[object]) -> None:
    """The task ends cancelled (bounded: a swallowed cancel leaves a loop running)."""
    done, _ = await asyncio.wait({task}, timeout=2.0)
    if not done:
        task.cancel()  # second cancel, so the test does not leak a running loop
        await asyncio.gather(task, return_exceptions=True)
        pytest.fail("the cancellation was swallowed: the task kept running")
    assert task.cancelled()


async def _blocked() -> None:
    for _ in range(3):  # let the task reach its wait
        await asyncio.sleep(0)


async def test_cancel_as_the_event_is_set_cancels_the_waiter() -> None:
    for _ in range(50):
        event = asyncio.Event()
        task = asyncio.create_task(wait_event(event, 10.0))
        await _blocked()
        event.set()
        task.cancel()
        await _ended_cancelled(task)


async def test_wait_event_reports_set_or_timed_out() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, None) is True


async def test_reconciler_cancelled_as_it_is_woken_stops_without_a_pass() -> None:
    runtime = AgentRuntime(fake(), RuntimeConfig(cluster="c1", server="127.0.0.1:1", resync_seconds=60.0))
    for _ in range(20):
        task = asyncio.create_task(runtime._reconciler())
        await _blocked()
        runtime._dirty.set()
        task.cancel()
        await _ended_cancelled(task)
        runtime._dirty.clear()
    assert runtime.passes == 0


async def test_a_job_the_cluster_keeps_refusing_does_not_spin_the_reconciler() -> None:
    # A refused pass used to set the dirty flag again: the reconciler re-ran every job's
    # pass back to back, as fast as the cluster answered, for as long as the refusal lasted.
    cluster = fake()

    async def refuse(_manifest: object) -> None:
        await asyncio.sleep(0)  # a real apiserver answers later: the loop runs meanwhile
        raise BackendError("create service default/train: HTTP 404 NotFound: namespaces \"default\" not found")

    cluster.create_service = refuse  # type: ignore[method-assign, assignment]  # a test double replaces the method
    runtime = AgentRuntime(cluster, RuntimeConfig(cluster="c1", server="127.0.0.1:1", resync_seconds=60.0))
    runtime.jobs.accept(work(job()))
    runtime._dirty.set()
    task = asyncio.create_task(runtime._reconciler())
    await asyncio.sleep(0.5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert runtime.passes == 1  # the next try is after the back-off (1 s), not at once
