"""Jobs against SQLite and real PostgreSQL: idempotent submit, listing, state machine, cancel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from federation.domain import Job, Queue, Resources, Task
from federation.domain.errors import InvalidInput
from federation.store import AlreadyExists, Conflict, IllegalTransition, NotFound, Store


def make_job(name: str, queue: str = "research", gpus: int = 8, replicas: int = 2) -> Job:
    return Job(name=name, queue=queue, tasks=(Task("worker", replicas, Resources.of(cpu=4000, gpu=gpus)),))


@pytest.fixture
def queues(store: Store) -> Store:
    store.queues.create(Queue("research", owners=("alice",)))
    store.queues.create(Queue("prod", weight=4, owners=("bob",)))
    store.queues.create(Queue("open"))
    return store


def test_submit_creates_a_pending_job_with_a_submitted_event(queues: Store) -> None:
    result = queues.jobs.submit(make_job("llm-a"), tenant="alice")
    assert result.created
    record = result.record
    assert (record.name, record.queue, record.tenant, record.state, record.version) == (
        "llm-a", "research", "alice", "pending", 1)
    assert queues.jobs.get("llm-a") == record
    events = queues.jobs.events_since(0).events
    assert [(e.job, e.type, e.state) for e in events] == [("llm-a", "Submitted", "pending")]


def test_identical_resubmission_returns_the_existing_job(queues: Store) -> None:
    first = queues.jobs.submit(make_job("llm-a"), tenant="alice")
    again = queues.jobs.submit(make_job("llm-a"), tenant="alice")
    assert not again.created
    assert again.record == first.record
    assert len(queues.jobs.events_since(0).events) == 1  # no second Submitted event


def test_resubmission_with_a_different_spec_is_already_exists(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a", gpus=8))
    with pytest.raises(AlreadyExists, match="different spec"):
        queues.jobs.submit(make_job("llm-a", gpus=4))
    assert queues.jobs.get("llm-a").job.tasks[0].resources.gpus == 8


def test_resubmission_to_a_different_queue_is_already_exists(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a", queue="research"))
    with pytest.raises(AlreadyExists, match="queue 'research'"):
        queues.jobs.submit(make_job("llm-a", queue="prod"))


def test_submit_to_an_unknown_queue_is_not_found(queues: Store) -> None:
    with pytest.raises(NotFound) as info:
        queues.jobs.submit(make_job("llm-a", queue="nope"))
    assert (info.value.kind, info.value.name) == ("queue", "nope")


def test_concurrent_identical_submissions_create_exactly_once(queues: Store) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: queues.jobs.submit(make_job("race")), range(16)))
    assert sum(r.created for r in results) == 1
    assert {r.record.spec_digest for r in results} == {results[0].record.spec_digest}


def test_concurrent_distinct_submissions_all_land(queues: Store) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: queues.jobs.submit(make_job(f"job-{i}")), range(40)))
    assert all(r.created for r in results)
    assert len(queues.jobs.in_states(["pending"])) == 40


def test_get_unknown_job_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.jobs.get("ghost")


def test_listing_pages_in_submission_order_without_gaps_or_repeats(queues: Store) -> None:
    names = [f"job-{i:02d}" for i in range(23)]
    for i, name in enumerate(names):
        queues.jobs.submit(make_job(name, queue="research" if i % 2 else "prod"))
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = queues.jobs.list(page_size=5, page_token=token)
        seen += [r.name for r in page.items]
        pages += 1
        if not page.next_token:
            break
        token = page.next_token
        queues.jobs.submit(make_job(f"late-{pages}"))  # concurrent inserts do not disturb paging
    assert seen[:23] == names
    assert len(seen) == len(set(seen))
    assert pages == 6


def test_listing_filters_by_queue_state_tenant_and_visibility(queues: Store) -> None:
    queues.jobs.submit(make_job("a1", queue="research"), tenant="alice")
    queues.jobs.submit(make_job("b1", queue="prod"), tenant="bob")
    queues.jobs.submit(make_job("o1", queue="open"), tenant="carol")
    queues.jobs.transition("a1", "placed", cluster="c1")
    assert [r.name for r in queues.jobs.list(queue="prod").items] == ["b1"]
    assert [r.name for r in queues.jobs.list(states=["placed"]).items] == ["a1"]
    assert [r.name for r in queues.jobs.list(tenant="carol").items] == ["o1"]
    assert [r.name for r in queues.jobs.list(visible_to="alice").items] == ["a1", "o1"]
    assert [r.name for r in queues.jobs.list(visible_to="mallory").items] == ["o1"]


def test_a_malformed_page_token_is_invalid_input(store: Store) -> None:
    with pytest.raises(InvalidInput) as info:
        store.jobs.list(page_token="not-a-token")
    assert info.value.path == "page_token"
    store.queues.create(Queue("a"))
    store.queues.create(Queue("b"))
    queue_token = store.queues.list(page_size=1).next_token
    with pytest.raises(InvalidInput, match="not a page token of this jobs listing"):
        store.jobs.list(page_token=queue_token)


def test_the_state_machine_is_enforced_and_each_step_is_an_event(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a"))
    with pytest.raises(IllegalTransition) as info:
        queues.jobs.transition("llm-a", "running")
    assert (info.value.from_state, info.value.to_state) == ("pending", "running")
    assert queues.jobs.get("llm-a").state == "pending"

    queues.jobs.transition("llm-a", "placed", cluster="c1", hypernode="s0", tier=1)
    queues.jobs.transition("llm-a", "dispatched")
    queues.jobs.transition("llm-a", "running", message="8/8 pods running")
    done = queues.jobs.transition("llm-a", "succeeded")
    assert (done.state, done.cluster, done.hypernode, done.tier, done.version) == ("succeeded", "c1", "s0", 1, 5)
    with pytest.raises(IllegalTransition):
        queues.jobs.transition("llm-a", "running")
    types = [e.type for e in queues.jobs.events_since(0, job="llm-a").events]
    assert types == ["Submitted", "Placed", "Dispatched", "Running", "Succeeded"]


def test_requeue_forgets_the_old_placement(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a"))
    queues.jobs.transition("llm-a", "placed", cluster="c1", hypernode="s0", tier=1)
    back = queues.jobs.transition("llm-a", "pending", reason="cluster c1 lost")
    assert (back.state, back.cluster, back.hypernode, back.tier, back.reason) == (
        "pending", None, None, None, "cluster c1 lost")
    assert queues.jobs.events_since(0).events[-1].type == "Requeued"


def test_placing_requires_a_cluster(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a"))
    with pytest.raises(ValueError, match="requires its cluster"):
        queues.jobs.transition("llm-a", "placed")


def test_optimistic_version_check(queues: Store) -> None:
    record = queues.jobs.submit(make_job("llm-a")).record
    queues.jobs.annotate("llm-a", message="touched")
    with pytest.raises(Conflict) as info:
        queues.jobs.transition("llm-a", "placed", cluster="c1", expected_version=record.version)
    assert info.value.race
    placed = queues.jobs.transition("llm-a", "placed", cluster="c1", expected_version=record.version + 1)
    assert placed.state == "placed"


def test_cancel_is_idempotent_and_refused_once_finished(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a"))
    cancelled = queues.jobs.cancel("llm-a", "no longer needed")
    assert (cancelled.state, cancelled.reason) == ("cancelled", "no longer needed")
    assert queues.jobs.cancel("llm-a") == cancelled
    queues.jobs.submit(make_job("llm-b"))
    for state in ("placed", "dispatched", "running", "succeeded"):
        queues.jobs.transition("llm-b", state, cluster="c1" if state == "placed" else None)
    with pytest.raises(IllegalTransition):
        queues.jobs.cancel("llm-b")
    with pytest.raises(NotFound):
        queues.jobs.cancel("ghost")


def test_annotate_counts_restarts_as_events(queues: Store) -> None:
    queues.jobs.submit(make_job("llm-a"))
    record = queues.jobs.annotate("llm-a", restarts=1, message="RestartJob after PodFailed")
    assert record.restarts == 1
    assert queues.jobs.events_since(0).events[-1].type == "Restarted"


def test_usage_counts_jobs_per_queue_and_state(queues: Store) -> None:
    for name in ("a", "b", "c"):
        queues.jobs.submit(make_job(name))
    queues.jobs.transition("a", "placed", cluster="c1")
    usage = {u.queue: u for u in queues.jobs.usage()}
    assert usage["research"].count("pending") == 2
    assert usage["research"].count("placed") == 1
    assert usage["research"].count("running") == 0
