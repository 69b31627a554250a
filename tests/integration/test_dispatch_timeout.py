"""A reachable cluster that never reports on a Work does not hold its job for ever
(over real gRPC, SQLite and PostgreSQL; control/snapshot.py, docs/design/work-protocol.md).

Before, a job whose agent heartbeated but stayed silent on its Work stayed ``placed``,
holding its room, until someone cancelled it: only a lost cluster or a NoExecute taint
re-planned a job. Now a Work left unacknowledged past ``--dispatch-timeout`` is withdrawn
and its job re-planned, with the reason on the job.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import ManualClock
from servicekit import running, secured
from test_agent_stream_bounds import _east, _report, _work

from federation.control import loop, snapshot
from federation.control.loop import RoundScheduler
from federation.control.snapshot import PlanningInput
from federation.domain import Job, Queue, Resources, Task
from federation.domain.states import WorkState
from federation.store import Store, WorkRecord


async def test_a_work_left_unacknowledged_is_withdrawn_and_its_job_replanned(store: Store) -> None:
    async with running(store, secured(), control_loop=True, dispatch_timeout_seconds=1.0) as srv, \
            _east(srv) as east:
        first = await _work(srv, east, "silent")  # and the agent says nothing about it
        again = (await east.next("work")).work  # the only cluster: re-placed there, as a new Work
        assert (again.job, again.version) == ("silent", first.version + 1)
        requeued = [e for e in store.jobs.events_since(0, job="silent").events if e.type == "Requeued"]
        assert [e.message for e in requeued] == ["cluster east did not acknowledge the job's Work within 1 s"]
        old = store.works.get(int(first.work_id))
        assert old.state == "withdrawn" and "did not acknowledge" in old.message
        await east.send(status=_report(again))  # a report: the agent has it now
        assert (await east.next("status", "status-rejected")).ack.what == "status"
        await asyncio.sleep(2.5)  # past the timeout: a Work the agent reported on stays
        assert store.works.get(int(again.work_id)).active


# The timeout counts only time in which the cluster's current agent could have answered,
# and only for a job no agent has reported on (store and round, SQLite and PostgreSQL).

JOB = "j"
TIMEOUT = 600.0


def _placed(store: Store) -> WorkRecord:
    """j placed on east with a Work its agent has not acknowledged (what a round leaves)."""
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.jobs.submit(Job(name=JOB, queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
    store.jobs.transition(JOB, "placed", cluster="east", hypernode="east-leaf", tier=1)
    return store.works.create(JOB, "east", {"cluster": "east", "hypernode": "east-leaf", "tier": 1,
                                            "pods": [["worker", 0, "east-n1"]]})


def _rounds(store: Store, clock: ManualClock) -> RoundScheduler:
    return RoundScheduler(store, debounce_seconds=0, clock=lambda: clock.now.timestamp(),
                          dispatch_timeout_seconds=TIMEOUT)


def _acknowledge(store: Store, work: WorkRecord) -> None:
    """What the agent's first report (phase Pending) does: the job steps, then the Work."""
    store.jobs.transition(JOB, "dispatched", work_id=work.id)
    store.works.update_status(work.id, WorkState.APPLIED, epoch=1)


async def test_a_work_acknowledged_after_the_round_read_it_is_not_withdrawn(
        store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's report lands between the round's read (the Work looked overdue) and its
    eviction: the eviction re-checks, in its transaction, that the Work is still unacknowledged."""
    work = _placed(store)
    rounds = _rounds(store, clock)  # leading since before the Work
    clock.advance(TIMEOUT + 1)
    read = snapshot.load

    def load_then_acknowledge(*args: Any, **kwargs: Any) -> PlanningInput:
        data = read(*args, **kwargs)
        if store.works.get(work.id).state == WorkState.PENDING:
            assert JOB in data.evictions.get("east", {})  # overdue as read
            _acknowledge(store, work)
        return data

    monkeypatch.setattr(loop, "load", load_then_acknowledge)
    try:
        await rounds.run_once("test")
    finally:
        await rounds.stop()
    assert store.works.get(work.id).state == WorkState.APPLIED
    assert store.jobs.get(JOB).state == "dispatched"


async def test_the_timeout_counts_from_the_agents_latest_hello(store: Store, clock: ManualClock) -> None:
    """An agent that comes back (a new stream, or after its cluster was lost) is sent every
    active Work at its sync: it gets the whole timeout to answer from then, not none."""
    work = _placed(store)
    rounds = _rounds(store, clock)
    clock.advance(TIMEOUT + 100)
    store.clusters.register("east", 2)
    clock.advance(1)
    try:
        await rounds.run_once("test")
        assert store.works.get(work.id).active and store.jobs.get(JOB).state == "placed"
        clock.advance(TIMEOUT)
        await rounds.run_once("test")
    finally:
        await rounds.stop()
    assert store.works.get(work.id).state == WorkState.WITHDRAWN
    assert store.jobs.get(JOB).state == "pending"


async def test_the_timeout_counts_from_when_this_central_began_to_lead(store: Store, clock: ManualClock) -> None:
    """A central down (or without a leader) for longer than the timeout: no agent could
    answer meanwhile, so its first round does not withdraw every Work it finds unacknowledged
    before the agents have even reconnected."""
    work = _placed(store)
    clock.advance(TIMEOUT + 100)
    rounds = _rounds(store, clock)
    try:
        await rounds.start()
        await rounds.run_once("test")
        assert store.works.get(work.id).active and store.jobs.get(JOB).state == "placed"
        clock.advance(TIMEOUT)
        await rounds.run_once("test")
    finally:
        await rounds.stop()
    assert store.works.get(work.id).state == WorkState.WITHDRAWN


async def test_a_job_its_agent_reported_on_is_not_timed_out(store: Store, clock: ManualClock) -> None:
    """A central stopped between a report's job step and its Work write leaves a running
    job whose Work is still ``pending``: the agent has it, and it is never withdrawn for that."""
    work = _placed(store)
    store.jobs.transition(JOB, "dispatched", work_id=work.id)
    store.jobs.transition(JOB, "running", work_id=work.id)
    rounds = _rounds(store, clock)
    clock.advance(TIMEOUT + 1)
    try:
        await rounds.run_once("test")
    finally:
        await rounds.stop()
    assert store.works.get(work.id).active and store.jobs.get(JOB).state == "running"
