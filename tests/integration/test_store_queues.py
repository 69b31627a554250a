"""Queues against SQLite and real PostgreSQL: CRUD, hierarchy, deletion refused while busy."""

from __future__ import annotations

import pytest

from federation.domain import Job, Queue, Resources, Task
from federation.domain.errors import InvalidInput
from federation.store import AlreadyExists, Conflict, NotFound, Store


def make_job(name: str, queue: str) -> Job:
    return Job(name=name, queue=queue, tasks=(Task("worker", 1, Resources.of(gpu=1)),))


FULL = Queue(
    "research",
    weight=3,
    priority=5,
    capability=Resources.of(gpu=64, cpu=512_000),
    guarantee=Resources.of(gpu=8),
    deserved=Resources.of(gpu=32),
    reclaimable=False,
    owners=("alice", "bob"),
)


def test_create_get_round_trips_every_field(store: Store) -> None:
    assert store.queues.create(FULL) == FULL
    assert store.queues.get("research") == FULL


def test_create_twice_is_already_exists(store: Store) -> None:
    store.queues.create(Queue("research"))
    with pytest.raises(AlreadyExists):
        store.queues.create(Queue("research", weight=2))


def test_update_replaces_the_spec(store: Store) -> None:
    store.queues.create(Queue("research"))
    updated = store.queues.update(FULL)
    assert updated == FULL == store.queues.get("research")
    with pytest.raises(NotFound):
        store.queues.update(Queue("ghost"))


def test_list_pages_by_name(store: Store) -> None:
    for name in ("d", "a", "c", "b", "e"):
        store.queues.create(Queue(name))
    first = store.queues.list(page_size=2)
    second = store.queues.list(page_size=2, page_token=first.next_token)
    third = store.queues.list(page_size=2, page_token=second.next_token)
    assert [q.name for p in (first, second, third) for q in p.items] == ["a", "b", "c", "d", "e"]
    assert third.next_token == ""
    assert [q.name for q in store.queues.all()] == ["a", "b", "c", "d", "e"]


def test_parent_must_exist_and_cycles_are_refused(store: Store) -> None:
    with pytest.raises(InvalidInput) as err:  # the spec is wrong: INVALID_ARGUMENT naming spec.parent
        store.queues.create(Queue("child", parent="top"))
    assert err.value.path == "spec.parent"
    assert store.queues.create(Queue("top", parent="root")).parent is None  # root is implicit
    store.queues.create(Queue("child", parent="top"))
    store.queues.create(Queue("grandchild", parent="child"))
    with pytest.raises(Conflict, match="cycle"):
        store.queues.update(Queue("top", parent="grandchild"))


def test_delete_is_refused_while_the_queue_holds_unfinished_jobs(store: Store) -> None:
    store.queues.create(Queue("research"))
    store.jobs.submit(make_job("a", "research"))
    store.jobs.submit(make_job("b", "research"))
    store.jobs.transition("b", "placed", cluster="c1")
    with pytest.raises(Conflict, match="2 unfinished"):
        store.queues.delete("research")
    store.jobs.cancel("a")
    with pytest.raises(Conflict, match="1 unfinished"):
        store.queues.delete("research")
    assert store.jobs.get("b").state == "placed"

    store.jobs.cancel("b")
    store.queues.delete("research")  # only finished jobs left: they go with the queue
    with pytest.raises(NotFound):
        store.queues.get("research")
    with pytest.raises(NotFound):
        store.jobs.get("a")
    assert store.jobs.events_since(0).events == ()


def test_delete_is_refused_while_the_queue_is_a_parent(store: Store) -> None:
    store.queues.create(Queue("top"))
    store.queues.create(Queue("child", parent="top"))
    with pytest.raises(Conflict, match="parent of child"):
        store.queues.delete("top")
    store.queues.delete("child")
    store.queues.delete("top")


def test_delete_unknown_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.queues.delete("ghost")
