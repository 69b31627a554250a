"""Jobs with ``ttlSecondsAfterFinished`` in the store, on SQLite and real PostgreSQL: the
deadline is stamped when the job finishes (succeeded, failed, cancelled) and only then;
``delete_expired`` deletes a job whose deadline passed as deleting its queue would (its
events, Works and policy claim go with it) and keeps its placement audit."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from conftest import ManualClock
from sqlalchemy import delete, func, select

from federation.control.job_ttl import JobTtl
from federation.domain import Job, Placement, Plan, PodAssignment, Queue, Resources, Task
from federation.store import NotFound, Store
from federation.store.job_expiry import DEFAULT_BATCH, ExpiredJob, JobExpiryRepository
from federation.store.models import JobEventRow, JobRow, JobWaitRow, PolicyClaimRow, WorkRow
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


# --------------------------------------------------------------- kept for a job that waits for it


def waiter(name: str, *after: str, queue: str = "research", namespace: str = "default") -> Job:
    return Job(name=name, queue=queue, namespace=namespace, tasks=(Task("worker", 1, Resources.of(gpu=1)),),
               after=after)


def expired_names(store: Store) -> list[str]:
    return [j.name for j in store.expiry.delete_expired()]


def succeed_on_east(store: Store, name: str) -> None:
    run_on_east(store, name)
    store.jobs.transition(name, "succeeded")


def test_a_finished_job_a_pending_job_waits_for_is_kept_past_its_ttl(research: Store, clock: ManualClock) -> None:
    """Deleted, the round would read the name as never submitted and hold the waiter for ever."""
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(waiter("train", "prep"))
    succeed_on_east(research, "prep")
    clock.advance(3600)
    assert expired_names(research) == []
    assert research.jobs.get("prep").state == "succeeded"


@pytest.mark.parametrize("end", ["succeeded", "cancelled", "deleted"])
def test_it_goes_once_its_last_waiter_has_finished(research: Store, clock: ManualClock, end: str) -> None:
    """Placed, running, or requeued (the round gates a requeued job again) the waiter still
    reads the record; finished, cancelled or deleted it never will."""
    research.queues.create(Queue("research-b", owners=()))
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(waiter("train", "prep"))
    research.jobs.submit(waiter("eval", "prep"))
    succeed_on_east(research, "prep")
    research.jobs.cancel("eval")
    assert expired_names(research) == []  # train still waits
    run_on_east(research, "train")
    assert expired_names(research) == []  # running: a lost cluster would requeue it to the gate
    research.jobs.transition("train", "pending", reason="cluster east lost")
    assert expired_names(research) == []
    if end == "succeeded":
        succeed_on_east(research, "train")
    elif end == "cancelled":
        research.jobs.cancel("train")
    else:
        with research.db.write() as session:  # as its queue's deletion would: the row and, by cascade, its waits
            session.execute(delete(JobRow).where(JobRow.name == "train"))
    due = research.expiry.next_expiry()
    assert due is not None and due <= research.db.now()
    assert expired_names(research) == ["prep"]


def test_a_failed_dependency_is_kept_until_the_round_cancels_its_waiter(research: Store) -> None:
    """The round cancels the waiter naming the failure; deleted first, the waiter would wait instead."""
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(waiter("train", "prep"))
    run_on_east(research, "prep")
    research.jobs.transition("prep", "failed", reason="exit code 1")
    assert expired_names(research) == []
    research.jobs.cancel("train", "dependency prep failed: exit code 1")
    assert expired_names(research) == ["prep"]


@pytest.mark.parametrize(("queue", "owners", "namespace", "kept"), [
    pytest.param("research", None, "default", True, id="the same queue"),
    pytest.param("research-b", ("nlp", "ops"), "default", True, id="a queue sharing an owner"),
    pytest.param("vision", ("vision",), "default", False, id="another tenant's queue"),
    pytest.param("open", (), "default", False, id="a queue with no owners (another queue, nothing shared)"),
    pytest.param("research", None, "other", False, id="the same queue, another namespace"),
])
def test_only_a_waiter_that_could_see_it_keeps_it(research: Store, queue: str, owners: tuple[str, ...] | None,
                                                  namespace: str, kept: bool) -> None:
    """The round's rule (control/snapshot.py ``_flow_gates``): a job waits only for a job its
    tenant could see; any other name it reads as not submitted, so it keeps nothing alive."""
    research.queues.update(Queue("research", owners=("nlp",)))
    if owners is not None:
        research.queues.create(Queue(queue, owners=owners))
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(waiter("train", "prep", queue=queue, namespace=namespace))
    succeed_on_east(research, "prep")
    assert expired_names(research) == ([] if kept else ["prep"])


def test_the_owners_are_read_when_the_sweep_runs(research: Store) -> None:
    """As the round reads them: a queue that stops sharing an owner stops keeping the job."""
    research.queues.update(Queue("research", owners=("nlp",)))
    research.queues.create(Queue("research-b", owners=("nlp",)))
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(waiter("train", "prep", queue="research-b"))
    succeed_on_east(research, "prep")
    assert expired_names(research) == []
    research.queues.update(Queue("research-b", owners=("vision",)))
    assert expired_names(research) == ["prep"]


@pytest.mark.parametrize("batch", [False, True], ids=["a lone submission", "a batch"])
def test_the_waits_are_stored_by_either_submission_path(research: Store, batch: bool) -> None:
    """PostgreSQL stores a lone job and a batch with different statements; each writes the
    waits of the job it created and of no other (a refused duplicate name writes none)."""
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(make_job("other", ttl=0))
    jobs = [waiter("train", "prep", "prep", "ghost"), waiter("train", "other")]  # the second: AlreadyExists
    if batch:
        outcomes = research.jobs.submit_many([(job, "") for job in (make_job("filler", ttl=None), *jobs)])
        assert [type(o).__name__ for o in outcomes] == ["Submitted", "Submitted", "AlreadyExists"]
    else:
        research.jobs.submit(jobs[0])
    with research.db.read() as session:
        rows = session.execute(select(JobWaitRow.job, JobWaitRow.dependency, JobWaitRow.namespace)
                               .order_by(JobWaitRow.dependency)).all()
    assert [tuple(r) for r in rows] == [("train", "ghost", "default"), ("train", "prep", "default")]
    succeed_on_east(research, "prep")
    research.jobs.cancel("other")
    assert expired_names(research) == ["other"]


class CountedExpiry(JobExpiryRepository):
    """The real repository, counting the sweeps (write transactions) made through it."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.db)
        self.sweeps = 0

    def delete_expired(self, limit: int = DEFAULT_BATCH, *, since: datetime | None = None) -> list[ExpiredJob]:
        self.sweeps += 1
        return super().delete_expired(limit, since=since)


async def test_a_kept_job_is_looked_at_again_only_at_the_full_looks(research: Store, clock: ManualClock) -> None:
    """The sweep does not spin on what it keeps: a kept job costs a look only every
    ``recheck_seconds``, while a job newly due is still deleted at the next tick, and a kept
    job goes at the first full look after its last waiter finished."""
    research.jobs.submit(make_job("prep", ttl=0))
    research.jobs.submit(waiter("train", "prep"))
    research.jobs.submit(make_job("other", ttl=0))
    succeed_on_east(research, "prep")
    counted = research.expiry = CountedExpiry(research)
    ttl = JobTtl(research, interval_seconds=1.0, recheck_seconds=10.0)

    async def ticks(n: int) -> None:
        for _ in range(n):
            await ttl.tick()
            clock.advance(1)

    await ticks(5)
    assert counted.sweeps == 1  # the first, full look, which kept prep
    research.jobs.cancel("other")
    await ticks(1)
    assert counted.sweeps == 2 and [j.name for j in research.jobs.list().items] == ["prep", "train"]
    await ticks(24)
    assert counted.sweeps == 4  # the full looks at 10 s and 20 s, not one per tick
    research.jobs.cancel("train")
    await ticks(10)
    assert counted.sweeps == 5 and [j.name for j in research.jobs.list().items] == ["train"]
