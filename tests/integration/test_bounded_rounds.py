"""Bounded rounds against SQLite and PostgreSQL: a big backlog is planned an intake at a
time (``max_pending``), in planner order per queue, and a steady backlog does not write a
decision row per job per round."""

from __future__ import annotations

from sqlalchemy import func, select

from federation.control.loop import RoundScheduler
from federation.domain import Job, Queue, Resources, Task
from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Node
from federation.store import Store
from federation.store.models import DecisionRow


def make_job(name: str, queue: str, priority: int = 0, gpus: int = 8) -> Job:
    return Job(name=name, queue=queue, tasks=(Task("worker", 1, Resources.of(gpu=gpus)),), priority=priority)


def _decisions(store: Store, round_id: int) -> int:
    with store.db.read() as session:
        stmt = select(func.count()).select_from(DecisionRow).where(DecisionRow.round_id == round_id)
        return int(session.scalar(stmt) or 0)


def test_pending_head_is_job_priority_then_submission_order_per_queue(store: Store) -> None:
    store.queues.create(Queue("a"))
    store.queues.create(Queue("b"))
    for job in (make_job("a-old", "a"), make_job("b-only", "b"), make_job("a-urgent", "a", priority=5),
                make_job("a-new", "a")):
        store.jobs.submit(job)  # one at a time: distinct submission times
    assert [r.name for r in store.jobs.pending_head("a", 10)] == ["a-urgent", "a-old", "a-new"]
    assert [r.name for r in store.jobs.pending_head("a", 2)] == ["a-urgent", "a-old"]
    assert store.jobs.pending_counts() == {"a": 3, "b": 1}


async def test_a_3000_job_backlog_is_planned_500_at_a_time_and_repeats_are_not_rewritten(store: Store) -> None:
    store.queues.create(Queue("big"))
    store.queues.create(Queue("small", priority=-1))
    jobs = [(make_job(f"big-{i:04d}", "big"), "") for i in range(2_900)]
    jobs += [(make_job(f"small-{i:03d}", "small"), "") for i in range(100)]
    store.jobs.submit_many(jobs)
    store.clusters.register("east", 1)
    node = Node("east-n0", Resources.of(gpu=8), Resources.of(gpu=8))
    store.clusters.record_snapshot(1, ClusterSnapshot("east", (node,), taken_at=5.0))
    rounds = RoundScheduler(store, max_pending=500)

    first_id = await rounds.run_once("submit")
    first = store.audit.get_round(first_id)
    assert first.pending_count == 500 and first.placed_count == 1
    assert _decisions(store, first_id) == 500  # one per job in the window, none for the other 2,500
    decided = {d.job for d in store.audit.decisions(first_id)}
    assert sum(j.startswith("small-") for j in decided) == 100  # the low-priority queue is represented

    second_id = await rounds.run_once("submit")
    second = store.audit.get_round(second_id)
    assert second.pending_count == 500 and second.unplaced_count == 500
    assert second.placed_count == 0  # the node is taken by the first round's placement
    # The reason changed ("another job took the room" -> "no room right now"): recorded.
    assert _decisions(store, second_id) == 500

    third_id = await rounds.run_once("submit")
    assert store.audit.get_round(third_id).pending_count == 500
    assert _decisions(store, third_id) == 0  # same verdicts as last round: nothing rewritten
    latest = store.audit.latest_decision("big-0001")
    assert latest is not None and latest.round.id == second_id  # ExplainJob keeps showing it
    outside = store.jobs.get("big-2899")
    assert store.audit.latest_decision(outside.name) is None and outside.state == "pending"
