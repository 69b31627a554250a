"""Queues: create, update, read, list, delete (refused while the queue still holds work).

A queue's parent must exist (foreign key) and parents may not form a cycle; deleting a
queue that is some queue's parent, or that holds jobs which have not finished, is a
``Conflict``. Deleting a queue whose jobs have all finished removes those jobs and their
events with it (cascade), and its counts in each round (``placement_round_queues``, what
a tenant sees of a round): the queue's history goes with the queue, so a queue created
later under the same name, maybe for another tenant, starts with none of it. The
planning audit (rounds with their totals, and decisions) stays for admins.
"""

from __future__ import annotations

import builtins

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from federation.domain.errors import InvalidInput
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.domain.states import TERMINAL_STATES
from federation.store import paging
from federation.store.codec import resources_from_json, resources_to_json
from federation.store.engine import Database
from federation.store.errors import AlreadyExists, Conflict, NotFound
from federation.store.models import JobRow, QueueRow, RoundQueueRow
from federation.store.records import Page


def queue_of(row: QueueRow) -> Queue:
    return Queue(
        name=row.name,
        weight=row.weight,
        priority=row.priority,
        capability=resources_from_json(row.capability),
        guarantee=resources_from_json(row.guarantee) or Resources(),
        deserved=resources_from_json(row.deserved),
        reclaimable=row.reclaimable,
        parent=row.parent,
        owners=tuple(str(o) for o in row.owners),
        namespaces=tuple(str(n) for n in row.namespaces or ()),
        default_namespace=row.default_namespace,
        pod_security=row.pod_security,
        allow_system_namespaces=row.allow_system_namespaces,
        topology_wait_seconds=row.topology_wait_seconds,
    )


def _apply(row: QueueRow, queue: Queue) -> None:
    row.weight = queue.weight
    row.priority = queue.priority
    row.capability = resources_to_json(queue.capability)
    row.guarantee = resources_to_json(queue.guarantee) or {}
    row.deserved = resources_to_json(queue.deserved)
    row.reclaimable = queue.reclaimable
    row.parent = queue.parent
    row.owners = list(queue.owners)
    row.namespaces = list(queue.namespaces)
    row.default_namespace = queue.default_namespace
    row.pod_security = queue.pod_security
    row.allow_system_namespaces = queue.allow_system_namespaces
    row.topology_wait_seconds = queue.topology_wait_seconds


def _check_parent(session: Session, queue: Queue) -> None:
    """The parent exists and following parents from it never comes back to ``queue``."""
    cursor = queue.parent
    seen = {queue.name}
    while cursor is not None:
        if cursor in seen:
            raise Conflict(f"queue {queue.name!r}: parent {queue.parent!r} would make a cycle")
        seen.add(cursor)
        parent = session.get(QueueRow, cursor)
        if parent is None:  # the spec is wrong, not the request's target: INVALID_ARGUMENT
            raise InvalidInput("spec.parent", f"unknown parent queue {cursor!r} (create it first, or use root)")
        cursor = parent.parent


class QueueRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, queue: Queue) -> Queue:
        """Create a queue; ``AlreadyExists`` if the name is taken."""
        now = self._db.now()
        with self._db.write() as session:
            if session.get(QueueRow, queue.name) is not None:
                raise AlreadyExists("queue", queue.name)
            _check_parent(session, queue)
            row = QueueRow(name=queue.name, created_at=now, updated_at=now, version=1)
            _apply(row, queue)
            session.add(row)
            try:
                session.flush()
            except IntegrityError as exc:  # a concurrent create of the same name won
                raise AlreadyExists("queue", queue.name) from exc
            return queue_of(row)

    def update(self, queue: Queue) -> Queue:
        """Replace a queue's spec (its jobs stay); ``NotFound`` if it does not exist."""
        now = self._db.now()
        with self._db.write() as session:
            row = session.scalars(select(QueueRow).where(QueueRow.name == queue.name).with_for_update()).one_or_none()
            if row is None:
                raise NotFound("queue", queue.name)
            _check_parent(session, queue)
            _apply(row, queue)
            row.updated_at = now
            row.version += 1
            return queue_of(row)

    def get(self, name: str) -> Queue:
        with self._db.read() as session:
            row = session.get(QueueRow, name)
            if row is None:
                raise NotFound("queue", name)
            return queue_of(row)

    def list(self, *, page_size: int | None = None, page_token: str = "") -> Page[Queue]:
        """Queues by name, one page at a time."""
        size = paging.page_size(page_size)
        stmt = select(QueueRow).order_by(QueueRow.name).limit(size + 1)
        if page_token:
            (after,) = paging.decode("queues", page_token, 1)
            stmt = stmt.where(QueueRow.name > paging.decode_text(after))
        with self._db.read() as session:
            rows = list(session.scalars(stmt))
        items = tuple(queue_of(r) for r in rows[:size])
        return Page(items, paging.encode("queues", items[-1].name) if len(rows) > size else "")

    def all(self) -> builtins.list[Queue]:
        """Every queue (the planner's view; queues are few)."""
        with self._db.read() as session:
            return [queue_of(r) for r in session.scalars(select(QueueRow).order_by(QueueRow.name))]

    def delete(self, name: str) -> None:
        """Delete a queue; ``Conflict`` while it holds unfinished jobs or child queues."""
        with self._db.write() as session:
            row = session.scalars(select(QueueRow).where(QueueRow.name == name).with_for_update()).one_or_none()
            if row is None:
                raise NotFound("queue", name)
            busy = session.scalar(
                select(func.count()).select_from(JobRow)
                .where(JobRow.queue == name, JobRow.state.not_in(list(TERMINAL_STATES)))
            )
            if busy:
                raise Conflict(f"queue {name!r} still holds {busy} unfinished job(s); cancel or wait for them first")
            children = session.scalars(select(QueueRow.name).where(QueueRow.parent == name).limit(5)).all()
            if children:
                raise Conflict(f"queue {name!r} is the parent of {', '.join(children)}")
            session.execute(delete(RoundQueueRow).where(RoundQueueRow.queue == name))
            session.delete(row)
            try:
                session.flush()
            except IntegrityError as exc:  # a child or a job arrived concurrently
                raise Conflict(f"queue {name!r} changed while deleting; retry", race=True) from exc
