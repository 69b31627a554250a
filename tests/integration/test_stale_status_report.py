"""A status report about a Work withdrawn while the report is being handled changes nothing
in the job (SQLite and PostgreSQL).

The reviewer's reproduction (/tmp/hunt-faults/statusrace.py): job j runs on west (Work 1);
its pod fails just as west gets a NoExecute taint; j is evicted, re-placed on east (Work 2)
and runs there; then the delayed "Failed" report about Work 1 failed j ("PodFailed ... on
node west-n2") while Work 2 stayed bound and its pod ran on, for good. ``StatusHandler``
checked that Work 1 was active, then read the job and stepped it guarded by the job's
version only. Here the re-placement runs deterministically between that check and the rest
of the handling (inside ``works.get``); the report must be answered with a ``Cancel`` for
Work 1 and leave j running on east under Work 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from federation.domain import Job, Queue, Resources, Task
from federation.domain.states import WorkState
from federation.service.agent_status import StatusHandler
from federation.store import Store, WorkRecord
from federation.v1 import agent_pb2

JOB = "j"


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def _payload(cluster: str) -> dict[str, Any]:
    return {"cluster": cluster, "hypernode": f"{cluster}-leaf", "tier": 1, "pods": [["worker", 0, f"{cluster}-n2"]]}


def _run(store: Store, cluster: str) -> WorkRecord:
    """Place j on ``cluster`` and run it there, as a round and the agent's reports would."""
    store.jobs.transition(JOB, "placed", cluster=cluster, hypernode=f"{cluster}-leaf", tier=1)
    work = store.works.create(JOB, cluster, _payload(cluster))
    store.jobs.transition(JOB, "dispatched")
    store.works.update_status(work.id, WorkState.BOUND, epoch=1)
    store.jobs.transition(JOB, "running")
    return work


def _setup(store: Store) -> WorkRecord:
    store.queues.create(Queue("research"))
    store.clusters.register("west", 1)
    store.clusters.register("east", 1)
    store.jobs.submit(Job(name=JOB, queue="research", tasks=(Task("worker", 1, Resources.of(gpu=2)),)))
    return _run(store, "west")


def _replaced_while_handled(store: Store, monkeypatch: pytest.MonkeyPatch, first: WorkRecord) -> list[WorkRecord]:
    """Evict j from west and run it on east right after the handler has read Work 1 (still
    active then): the interleaving the reviewer's script widens with a delay."""
    read = store.works.get
    second: list[WorkRecord] = []

    def get(work_id: int) -> WorkRecord:
        record = read(work_id)
        if work_id == first.id and not second:
            store.clusters.evict("west", {JOB: "taint maintenance:NoExecute on west"})
            second.append(_run(store, "east"))
        return record

    monkeypatch.setattr(store.works, "get", get)
    return second


def _handler(store: Store) -> StatusHandler:
    return StatusHandler(store, _call, lambda why: None, lambda cluster: None)


@pytest.mark.parametrize(("phase", "events"), [
    pytest.param(agent_pb2.WORK_PHASE_FAILED, (), id="failed"),
    pytest.param(agent_pb2.WORK_PHASE_REPLAN, (), id="replan"),
    pytest.param(agent_pb2.WORK_PHASE_RUNNING,
                 (agent_pb2.WorkEvent(action="RestartPod", reason="OOMKilled", task="worker", index=0),),
                 id="restart event"),
])
async def test_a_report_about_a_work_withdrawn_meanwhile_leaves_the_job_on_its_new_work(
        store: Store, monkeypatch: pytest.MonkeyPatch, phase: agent_pb2.WorkPhase.ValueType,
        events: tuple[agent_pb2.WorkEvent, ...]) -> None:
    first = _setup(store)
    second = _replaced_while_handled(store, monkeypatch, first)
    report = agent_pb2.WorkStatus(work_id=str(first.id), job=JOB, version=first.version, phase=phase,
                                  message="PodFailed: worker-0 on node west-n2", events=events)

    replies = await _handler(store).handle("west", 1, report)

    (moved,) = second
    job = store.jobs.get(JOB)
    assert (job.state, job.cluster, job.restarts) == ("running", "east", 0), job
    assert "west-n2" not in job.reason and "OOMKilled" not in job.message
    assert store.works.get(first.id).state == WorkState.WITHDRAWN
    assert store.works.get(moved.id).state == WorkState.BOUND
    assert [(r.cancel.work_id, r.cancel.job) for r in replies] == [(str(first.id), JOB)], replies


async def test_a_report_about_the_active_work_still_moves_the_job(store: Store) -> None:
    """The guard refuses only stale reports: the same report about j's active Work fails it."""
    first = _setup(store)
    report = agent_pb2.WorkStatus(work_id=str(first.id), job=JOB, version=first.version,
                                  phase=agent_pb2.WORK_PHASE_FAILED, message="PodFailed: worker-0 on node west-n2")

    assert await _handler(store).handle("west", 1, report) == []

    job = store.jobs.get(JOB)
    assert (job.state, job.reason) == ("failed", "PodFailed: worker-0 on node west-n2")
    assert store.works.get(first.id).state == WorkState.FAILED
