"""Which finished jobs another job still waits for (``after``): kept past their TTL.

A job that waits with ``after`` is released by the round reading its dependencies'
records (``control.snapshot._flow_gates``); a name with no record reads as "not
submitted" and holds the waiter for ever. So the TTL sweep (``store.job_expiry``) leaves
alone a finished job that a job which has not finished waits for. Not finished, rather
than pending: a waiter that was placed and is later requeued (its cluster lost, a
preemption) goes through the gate again, and would then wait for ever too.

The tenant rule is the round's: a job waits only for a job its own tenant could see, one
in the same namespace whose queue is its own or shares an owner with it. Any other name
reads as not submitted to the waiter, so it keeps nothing alive either: a tenant cannot
hold another tenant's finished jobs by naming them. The rule is evaluated when the sweep
runs, with the queues' owners as they are then, as the round evaluates it.

Why a table and not the spec: the sweep runs every second and must not decode every
waiting job's spec to find their ``after``. ``job_waits`` holds one row per (waiter,
name), written in the submission's transaction and gone with the waiter by ``ON DELETE
CASCADE``; for each expired job the sweep does one indexed lookup by name, joins the
waiter's row by primary key and compares two queue rows. Rows stay after the waiter
finished (the join reads its state), so no state change writes this table.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import ColumnElement, exists, func, or_, select, true
from sqlalchemy.orm import aliased

from federation.domain.jobs import Job
from federation.domain.states import TERMINAL_STATES
from federation.store.models import JobRow, JobWaitRow, QueueRow

# The codec leaves a field equal to its default out of the stored spec, so a job in the
# default namespace has no "namespace" key.
_DEFAULT_NAMESPACE: str = Job.namespace  # the dataclass field's default


def wait_rows(job: Job) -> list[dict[str, Any]]:
    """The ``job_waits`` rows of a job being submitted: one per distinct name in ``after``."""
    return [{"job": job.name, "dependency": dep, "namespace": job.namespace} for dep in dict.fromkeys(job.after)]


def _owner_elements(owners: Any, postgres: bool) -> Any:
    """The names in a queue's ``owners`` JSON array, as a one-column table (``value``)."""
    fn = func.jsonb_array_elements_text(owners) if postgres else func.json_each(owners)
    return fn.table_valued("value").alias()


@functools.cache
def awaited(postgres: bool) -> ColumnElement[bool]:
    """True for a ``jobs`` row (the statement's ``JobRow``) that a job which has not
    finished waits for and could see (module doc)."""
    waiter = aliased(JobRow, name="waiter")
    mine, theirs = aliased(QueueRow, name="waiter_queue"), aliased(QueueRow, name="awaited_queue")
    my_owners, their_owners = _owner_elements(mine.owners, postgres), _owner_elements(theirs.owners, postgres)
    shares_an_owner = (
        select(1).select_from(mine).join(my_owners, true()).join(theirs, theirs.name == JobRow.queue)
        .join(their_owners, their_owners.c.value == my_owners.c.value)
        .where(mine.name == waiter.queue).correlate(JobRow, waiter).exists()
    )
    namespace = func.coalesce(JobRow.spec["namespace"].as_string(), _DEFAULT_NAMESPACE)
    return exists().where(
        JobWaitRow.dependency == JobRow.name,
        JobWaitRow.namespace == namespace,
        waiter.name == JobWaitRow.job,
        waiter.state.not_in(sorted(TERMINAL_STATES)),
        or_(waiter.queue == JobRow.queue, shares_an_owner),
    )
