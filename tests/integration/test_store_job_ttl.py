"""Jobs with ``ttlSecondsAfterFinished`` in the store, on SQLite and real PostgreSQL: the
deadline is stamped when the job finishes (succeeded, failed, cancelled) and only then;
``delete_expired`` deletes a job whose deadline passed as deleting its queue would (its
events, Works and policy claim go with it) and keeps its placement audit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import ManualClock
from sqlalchemy import func, select

from federation.domain import Job, Placement, Plan, PodAssignment, Queue, Resources, Task
from federation.store import NotFound, Store
from federation.store.models import JobEventRow, PolicyClaimRow, WorkRow
from federation.store.plan_records import decisions_from_plan, round_from_plan, updates_from_plan


def make_job(name: str, ttl: int | None) -> Job:
    return Job(name=name, queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),),
               ttl_seconds_after_finished=ttl)


@pytest.fixture
def research(store: Store) -> Store:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    return store


def run_on_east(store: Store, name: str) -> None:
    """Placed by a recorded round (so the job has an audit decision and a Work), then running."""
    plan = Plan(placements=(Placement(name, "east", "leaf-0", 1, (PodAssignment("worker", 0, "n0"),)),),
                status="OPTIMAL")
    now = store.db.now()
    store.audit.record_round(round_from_plan(plan, started_at=now, ended_at=now, trigger="submit", policy="cpsat",
                                             input_digest="d", pending_count=1),
                             decisions_from_plan(plan), updates_from_plan(plan))
    store.jobs.transition(name, "dispatched")
    store.jobs.transition(name, "running")


def count(store: Store, model: type[JobEventRow | WorkRow | PolicyClaimRow], job: str) -> int:
    with store.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(model).where(model.job == job)) or 0)


@pytest.mark.parametrize("end", ["succeeded", "failed", "cancelled"])
def test_a_finished_job_is_deleted_once_its_ttl_after_the_finish_has_passed(research: Store, clock: ManualClock,
                                                                          end: str) -> None:
    research.jobs.submit(make_job("done", ttl=600))
    run_on_east(research, "done")
    clock.advance(3600)  # running long before finishing: the TTL counts from the finish
    if end == "cancelled":
        research.jobs.cancel("done", "no longer needed")
    else:
        research.jobs.transition("done", end)
    research.policies.set_claims({"done": "propagationpolicy/default/pp"})  # its policy's claim (explain)
    assert count(research, PolicyClaimRow, "done") == 1
    assert research.expiry.delete_expired() == []
    clock.advance(599)
    assert research.expiry.delete_expired() == []
    assert research.jobs.get("done").state == end
    clock.advance(1)
    [gone] = research.expiry.delete_expired()
    assert (gone.name, gone.queue, gone.state, gone.clusters) == ("done", "research", end, ("east",))
    with pytest.raises(NotFound):
        research.jobs.get("done")
    assert count(research, JobEventRow, "done") == count(research, WorkRow, "done") == 0
    assert count(research, PolicyClaimRow, "done") == 0
    assert [d.decision.outcome for d in research.audit.job_audit("done")] == ["placed"]  # the audit stays
    assert research.expiry.delete_expired() == []  # idempotent: nothing left
    assert research.expiry.next_expiry() is None


def test_zero_deletes_right_after_the_finish(research: Store) -> None:
    research.jobs.submit(make_job("quick", ttl=0))
    run_on_east(research, "quick")
    assert research.expiry.delete_expired() == []  # running: not finished, whatever its TTL
    research.jobs.transition("quick", "succeeded")
    assert [j.name for j in research.expiry.delete_expired()] == ["quick"]


def test_only_finished_jobs_with_a_ttl_get_a_deadline(research: Store, clock: ManualClock) -> None:
    research.jobs.submit(make_job("kept", ttl=None))
    research.jobs.submit(make_job("waiting", ttl=0))
    research.jobs.submit(make_job("later", ttl=30))
    research.jobs.cancel("kept")
    research.jobs.cancel("later")
    finished = research.db.now()
    due = research.expiry.next_expiry()
    assert due is not None and abs(due - (finished + timedelta(seconds=30))) < timedelta(seconds=1)
    clock.advance(10 * 365 * 86_400)
    assert [j.name for j in research.expiry.delete_expired()] == ["later"]
    assert {r.name for r in research.jobs.list().items} == {"kept", "waiting"}  # no TTL; not finished


def test_a_late_write_to_a_finished_job_does_not_move_its_deadline(research: Store, clock: ManualClock) -> None:
    """Restarts or a message reported after the finish touch the row, never the deadline."""
    research.jobs.submit(make_job("done", ttl=60))
    research.jobs.cancel("done")
    clock.advance(50)
    research.jobs.annotate("done", message="a late report")
    clock.advance(10)
    assert [j.name for j in research.expiry.delete_expired()] == ["done"]


def test_deletion_goes_in_batches_and_leaves_the_rest_for_the_next(research: Store, clock: ManualClock) -> None:
    for i in range(5):
        research.jobs.submit(make_job(f"j{i}", ttl=0))
        research.jobs.cancel(f"j{i}")
    clock.advance(1)
    assert [j.name for j in research.expiry.delete_expired(limit=2)] == ["j0", "j1"]
    assert [j.name for j in research.expiry.delete_expired(limit=2)] == ["j2", "j3"]
    assert [j.name for j in research.expiry.delete_expired(limit=2)] == ["j4"]


def test_the_name_is_free_again_once_deleted(research: Store) -> None:
    research.jobs.submit(make_job("again", ttl=0))
    research.jobs.cancel("again")
    research.expiry.delete_expired()
    assert research.jobs.submit(make_job("again", ttl=0)).created
