"""Batched submission (``jobs.submit_many``) against SQLite and real PostgreSQL.

The rule under test: a batch answers, item by item, exactly what submitting its items one
after another would have answered, in one transaction, with one Submitted event per
created job. Checked on hand-written batches (mixed outcomes, duplicate names inside one
batch) and on random batches compared with a one-by-one run.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from federation.domain import Job, Queue, Resources, Task
from federation.store import AlreadyExists, NotFound, Store, Submitted
from federation.store.jobs_submit import Outcome


def make_job(name: str, queue: str = "research", gpus: int = 8) -> Job:
    return Job(name=name, queue=queue, tasks=(Task("worker", 2, Resources.of(cpu=4000, gpu=gpus)),))


@pytest.fixture
def queues(store: Store) -> Store:
    store.queues.create(Queue("research"))
    store.queues.create(Queue("prod"))
    return store


def describe(outcome: Outcome) -> tuple[str, str]:
    """An outcome as (kind, detail), comparable across runs that used different names."""
    if isinstance(outcome, Submitted):
        return ("created" if outcome.created else "identical"), outcome.record.queue
    if isinstance(outcome, AlreadyExists):
        return "exists", outcome.detail
    assert isinstance(outcome, NotFound)
    return "not found", f"{outcome.kind} {outcome.name!r}"


def test_an_empty_batch_is_empty(store: Store) -> None:
    assert store.jobs.submit_many([]) == []


def test_a_mixed_batch_answers_each_item_and_records_only_created_jobs(queues: Store) -> None:
    queues.jobs.submit(make_job("old", gpus=8))
    before = queues.jobs.latest_event_id()
    outcomes = queues.jobs.submit_many([
        (make_job("new-1"), "alice"),
        (make_job("old", gpus=8), "alice"),                 # identical resubmission
        (make_job("old", gpus=4), "alice"),                 # different spec
        (make_job("old", queue="prod"), "alice"),           # different queue
        (make_job("lost", queue="nope"), "alice"),          # unknown queue
        (make_job("new-2", queue="prod"), "bob"),
    ])
    assert [describe(o) for o in outcomes] == [
        ("created", "research"), ("identical", "research"), ("exists", "it exists with a different spec"),
        ("exists", "it exists in queue 'research'"), ("not found", "queue 'nope'"), ("created", "prod"),
    ]
    created = [o for o in outcomes if isinstance(o, Submitted) and o.created]
    for o in created:
        assert queues.jobs.get(o.record.name) == o.record
    assert isinstance(outcomes[1], Submitted) and outcomes[1].record == queues.jobs.get("old")
    assert queues.jobs.get("new-2").tenant == "bob"
    events = queues.jobs.events_since(before).events
    assert sorted((e.job, e.queue, e.type, e.state) for e in events) == [
        ("new-1", "research", "Submitted", "pending"), ("new-2", "prod", "Submitted", "pending")]
    assert [e.id for e in events] == sorted(e.id for e in events)
    with pytest.raises(NotFound):
        queues.jobs.get("lost")


def test_duplicate_names_in_one_batch_behave_as_if_submitted_in_order(queues: Store) -> None:
    outcomes = queues.jobs.submit_many([
        (make_job("dup", queue="nope"), ""),     # unknown queue, name still free: not found
        (make_job("dup", gpus=8), ""),           # created
        (make_job("dup", gpus=8), ""),           # identical to the one just created
        (make_job("dup", gpus=4), ""),           # different spec
        (make_job("dup", queue="prod"), ""),     # different queue
        (make_job("dup", queue="nope"), ""),     # the name exists now: already exists
    ])
    assert [describe(o) for o in outcomes] == [
        ("not found", "queue 'nope'"), ("created", "research"), ("identical", "research"),
        ("exists", "it exists with a different spec"), ("exists", "it exists in queue 'research'"),
        ("exists", "it exists in queue 'research'"),
    ]
    first, again = outcomes[1], outcomes[2]
    assert isinstance(first, Submitted) and isinstance(again, Submitted) and again.record == first.record
    assert [e.job for e in queues.jobs.events_since(0).events] == ["dup"]


def test_submit_is_a_batch_of_one(queues: Store) -> None:
    assert queues.jobs.submit(make_job("one")).created
    with pytest.raises(AlreadyExists, match="different spec"):
        queues.jobs.submit(make_job("one", gpus=1))
    with pytest.raises(NotFound):
        queues.jobs.submit(make_job("two", queue="nope"))


def test_refused_submissions_leave_no_gap_in_the_event_feed(queues: Store) -> None:
    """A gap holds watchers back until it settles (seconds); a refusal must not burn an event id."""
    queues.jobs.submit(make_job("first"))
    with pytest.raises(NotFound):
        queues.jobs.submit(make_job("lost", queue="nope"))
    queues.jobs.submit_many([(make_job("lost-2", queue="nope"), ""), (make_job("first", gpus=1), "")])
    queues.jobs.submit(make_job("second"))
    events = queues.jobs.events_since(0).events  # the test clock never lets a gap settle
    assert [e.job for e in events] == ["first", "second"]
    assert [e.id for e in events] == [events[0].id, events[0].id + 1]


@pytest.mark.parametrize("seed", range(4))
def test_random_batches_answer_like_one_by_one_submission(queues: Store, seed: int) -> None:
    """The same random scenario twice under two name prefixes: batched ("b"), one call per item ("s")."""
    rng = random.Random(seed)
    plan = [(rng.randrange(12), rng.choice(["research", "prod", "nope"]), rng.choice([4, 8])) for _ in range(40)]

    def one_by_one(prefix: str, steps: list[tuple[int, str, int]]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for n, queue, gpus in steps:
            try:
                outcomes.append(queues.jobs.submit(make_job(f"{prefix}{n}", queue, gpus), tenant="t"))
            except (AlreadyExists, NotFound) as exc:
                outcomes.append(exc)
        return outcomes

    for prefix in ("b", "s"):  # some names exist before the batch
        one_by_one(prefix, plan[:10])
    batched = queues.jobs.submit_many([(make_job(f"b{n}", q, g), "t") for n, q, g in plan])
    assert [describe(o) for o in batched] == [describe(o) for o in one_by_one("s", plan)]

    def stored(prefix: str) -> dict[str, tuple[str, int]]:
        return {r.name[1:]: (r.queue, r.job.tasks[0].resources.gpus) for r in queues.jobs.list(page_size=1000).items
                if r.name.startswith(prefix)}

    assert stored("b") == stored("s")
    submitted = [e.job for e in queues.jobs.events_since(0, limit=1000).events if e.type == "Submitted"]
    assert sorted(e[1:] for e in submitted if e.startswith("b")) == sorted(stored("b"))


def test_concurrent_overlapping_batches_create_each_name_once(queues: Store) -> None:
    """Batches sharing names in different orders neither deadlock nor create twice."""
    names = [f"job-{i}" for i in range(30)]

    def batch(seed: int) -> list[Outcome]:
        order = names[:]
        random.Random(seed).shuffle(order)
        return queues.jobs.submit_many([(make_job(n), "") for n in order])

    with ThreadPoolExecutor(6) as pool:
        results = [o for outcomes in pool.map(batch, range(12)) for o in outcomes]
    assert all(isinstance(o, Submitted) for o in results)
    created = [o.record.name for o in results if isinstance(o, Submitted) and o.created]
    assert sorted(created) == sorted(names)
    assert len(queues.jobs.events_since(0, limit=1000).events) == len(names)
