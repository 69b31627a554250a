"""Work that grows with the fleet runs in worker threads, never on the server's event loop.

Measured with ``hack/central_loop_lag.py`` (100 clusters of 100 nodes, 10,000 jobs, SQLite;
docs/benchmarks.md, "Central event loop under a large fleet"): rendering a ListJobs page of
1,000 jobs held the loop about 0.1 s per call, and a planning round of 5,000 jobs held it
about 0.3 s after its solve (the checks after the plan and the audit records), during
which every RPC and agent stream waited. These tests assert where that work runs, not
how long it takes.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import pytest
from servicekit import ADMIN, NLP, client, queue, running, secured, spec

import federation.control.loop as loop_module
import federation.service.jobs as jobs_module
from federation.control.loop import RoundScheduler
from federation.domain import Job, Queue, Resources, Task
from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Node
from federation.service.views import job_to_view
from federation.store import Store


def on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def recording(calls: list[tuple[str, bool]], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, noting for each call whether it ran on an event loop's thread."""
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, on_event_loop()))
        return fn(*args, **kwargs)
    return wrapped


async def test_a_job_listing_is_rendered_in_a_worker_thread(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool]] = []
    async with running(store, secured()) as srv, client(srv, ADMIN) as admin, client(srv, NLP) as nlp:
        await admin.create_queue(queue("nlp-q", "nlp"))
        for i in range(3):
            await nlp.submit_job(spec(f"job-{i}", "nlp-q"))
        monkeypatch.setattr(jobs_module, "job_to_view", recording(calls, "job_to_view", job_to_view))
        listed = await nlp.list_jobs()
        assert sorted(j.id for j in listed) == ["job-0", "job-1", "job-2"]
        assert sorted(j.spec.queue for j in await admin.list_jobs()) == ["nlp-q"] * 3
    assert len(calls) == 6
    assert not [name for name, loop in calls if loop], "a job of the listing was rendered on the event loop"


ROUND_STEPS = ("with_availability", "refuse_inadmissible", "round_from_plan", "queue_counts", "decisions_from_plan",
               "updates_from_plan")


async def test_a_rounds_checks_records_and_dispatch_log_run_in_worker_threads(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool]] = []
    for name in ROUND_STEPS:
        monkeypatch.setattr(loop_module, name, recording(calls, name, getattr(loop_module, name)))
    monkeypatch.setattr(RoundScheduler, "_dispatched",
                        recording(calls, "_dispatched", RoundScheduler._dispatched))
    store.queues.create(Queue("research"))
    store.jobs.submit_many([(Job(f"j{i}", "research", (Task("worker", 1, Resources.of(gpu=8)),)), "")
                            for i in range(3)])
    store.clusters.register("east", 1)
    nodes = tuple(Node(f"east-n{i}", Resources.of(gpu=8), Resources.of(gpu=8)) for i in range(2))
    store.clusters.record_snapshot(1, ClusterSnapshot("east", nodes, taken_at=5.0))

    round_id = await RoundScheduler(store).run_once("submit")

    recorded = store.audit.get_round(round_id)
    assert (recorded.placed_count, recorded.unplaced_count) == (2, 1)  # the round did its work
    assert {name for name, _ in calls} == {*ROUND_STEPS, "_dispatched"}
    assert not [name for name, loop in calls if loop], "a step of the round ran on the event loop"


async def test_a_started_server_has_frozen_the_startup_heap(store: Store) -> None:
    """A full collection walks only what was created after startup (``service/heap.py``):
    the objects of the process's modules are in the permanent generation."""
    async with running(store):
        assert gc.get_freeze_count() > 10_000
        assert gc.is_tracked(recording)  # a module's function: the collector would walk it, unfrozen
        assert not any(o is recording for o in gc.get_objects())  # generations 0-2, not the permanent one
