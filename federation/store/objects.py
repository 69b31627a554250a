"""Propagation policies, their claims on jobs, and priority classes.

``apply`` is kubectl's create-or-update and answers what happened (created, configured,
unchanged), so ``fedctl apply`` can print it and ``--atomic`` knows what to undo. A policy
is stored as the Karmada document it was applied as and validated into a domain
``PolicyObject`` on every read for a round (``all``): the document is the user's object, the
domain object our reading of it, and one parser (``manifests_karmada``) serves the CLI, the
service and here. ``get`` and ``list`` answer the document and its row as stored.
Claims record which policy governs each job (``propagation.matching`` decides; the round
writes them), so a running job keeps its policy and ``explain`` can name it.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.exc import IntegrityError

from federation.domain.errors import InvalidInput
from federation.domain.manifests_karmada import parse_policy_object
from federation.domain.policies import PolicyObject, PriorityClass
from federation.domain.states import TERMINAL_STATES
from federation.store.engine import Database
from federation.store.errors import AlreadyExists, NotFound
from federation.store.models import JobRow, PolicyClaimRow, PolicyRow, PriorityClassRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PolicyRecord:
    """A stored policy as its row says, not re-validated: one stored by an earlier release
    that breaks a rule of this one stays readable and listable, so an admin can see it to
    change or delete it (``all`` leaves it out of the rounds; docs/design/store.md)."""

    ref: str
    kind: str
    namespace: str
    name: str
    priority: int
    document: Mapping[str, Any]
    version: int
    updated_at: datetime


@dataclass(frozen=True)
class PriorityClassRecord:
    priority_class: PriorityClass
    updated_at: datetime


def _policy_of(row: PolicyRow) -> PolicyRecord:
    return PolicyRecord(row.ref, row.kind, row.namespace, row.name, row.priority, row.document, row.version,
                        row.updated_at)


def _claims_in(queues: Collection[str] | None, *, unfinished: bool) -> ColumnElement[bool] | None:
    """The claims on jobs of ``queues`` (None: every queue), only of unfinished jobs with
    ``unfinished``. Why the queues: a claim names a job, and a tenant may learn only the
    jobs of queues it may use (the rule ListJobs applies). Why unfinished: a listing says
    which jobs a policy governs now; a finished job's claim stays for ``explain``, and
    listing those would grow every answer with all the jobs a policy ever governed."""
    jobs = select(JobRow.name)
    if queues is not None:
        jobs = jobs.where(JobRow.queue.in_(list(queues)))
    if unfinished:
        jobs = jobs.where(JobRow.state.not_in(list(TERMINAL_STATES)))
    elif queues is None:
        return None
    return PolicyClaimRow.job.in_(jobs)


def _class_of(row: PriorityClassRow) -> PriorityClassRecord:
    return PriorityClassRecord(PriorityClass(row.name, row.value, row.global_default, row.description,
                                             row.preemption_policy), row.updated_at)


class PolicyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def apply(self, policy: PolicyObject, document: Mapping[str, Any]) -> tuple[PolicyRecord, str]:
        """Create or replace; the outcome is created, configured or unchanged."""
        now = self._db.now()
        with self._db.write() as session:
            row = session.scalars(select(PolicyRow).where(PolicyRow.ref == policy.ref).with_for_update()).one_or_none()
            if row is None:
                row = PolicyRow(ref=policy.ref, kind=policy.kind, namespace=policy.namespace, name=policy.name,
                                priority=policy.priority, document=dict(document), created_at=now, updated_at=now,
                                version=1)
                session.add(row)
                try:
                    session.flush()
                except IntegrityError as exc:
                    raise AlreadyExists(policy.kind, policy.ref) from exc
                return _policy_of(row), "created"
            if row.document == dict(document):
                return _policy_of(row), "unchanged"
            row.document, row.priority, row.updated_at, row.version = dict(document), policy.priority, now, \
                row.version + 1
            return _policy_of(row), "configured"

    def get(self, ref: str) -> PolicyRecord:
        with self._db.read() as session:
            row = session.get(PolicyRow, ref)
            if row is None:
                raise NotFound("policy", ref)
            return _policy_of(row)

    def list(self) -> builtins.list[PolicyRecord]:
        """Every policy (few: written by admins), by ref."""
        with self._db.read() as session:
            return [_policy_of(r) for r in session.scalars(select(PolicyRow).order_by(PolicyRow.ref))]

    def all(self) -> builtins.list[PolicyObject]:
        """Every policy a round matches jobs against. One stored by an earlier release that
        breaks a rule of this one is left out, logged, rather than failing every round: its
        document stays stored, and applying it again says what to change."""
        out: builtins.list[PolicyObject] = []
        with self._db.read() as session:
            for row in session.scalars(select(PolicyRow).order_by(PolicyRow.ref)):
                try:
                    out.append(parse_policy_object(row.document, ""))
                except InvalidInput as exc:
                    log.error("policy %s is not applied: it breaks a rule of this release (%s); apply it again, "
                              "changed", row.ref, exc)
        return out

    def delete(self, ref: str) -> None:
        """Delete a policy; its claims go too (the jobs fall back to the next match)."""
        with self._db.write() as session:
            row = session.get(PolicyRow, ref)
            if row is None:
                raise NotFound("policy", ref)
            session.execute(delete(PolicyClaimRow).where(PolicyClaimRow.policy == ref))
            session.delete(row)

    # ------------------------------------------------------------------ claims

    def claims(self, jobs: builtins.list[str] | None = None, *,
               queues: Collection[str] | None = None, unfinished: bool = False) -> dict[str, str]:
        """job -> ref of the policy governing it (all jobs, or only ``jobs``; with
        ``queues``, only the jobs of those queues: a tenant's view; with ``unfinished``,
        only jobs that have not finished: what the policies govern now)."""
        stmt = select(PolicyClaimRow.job, PolicyClaimRow.policy)
        if jobs is not None:
            stmt = stmt.where(PolicyClaimRow.job.in_(jobs))
        scope = _claims_in(queues, unfinished=unfinished)
        if scope is not None:
            stmt = stmt.where(scope)
        with self._db.read() as session:
            return {job: ref for job, ref in session.execute(stmt)}

    def claimed_by(self, ref: str, *, queues: Collection[str] | None = None) -> builtins.list[str]:
        """The unfinished jobs ``ref`` governs now, by name (with ``queues``, only the jobs
        of those queues)."""
        stmt = select(PolicyClaimRow.job).where(PolicyClaimRow.policy == ref)
        scope = _claims_in(queues, unfinished=True)
        if scope is not None:
            stmt = stmt.where(scope)
        with self._db.read() as session:
            return list(session.scalars(stmt.order_by(PolicyClaimRow.job)))

    def set_claims(self, changes: Mapping[str, str | None]) -> None:
        """Record (ref) or drop (None) each job's claim; jobs deleted meanwhile are skipped."""
        if not changes:
            return
        now = self._db.now()
        with self._db.write() as session:
            rows = {r.job: r for r in session.scalars(select(PolicyClaimRow)
                                                       .where(PolicyClaimRow.job.in_(list(changes))))}
            jobs = set(session.scalars(select(JobRow.name).where(JobRow.name.in_(list(changes)))))
            for job, ref in changes.items():
                row = rows.get(job)
                if ref is None:
                    if row is not None:
                        session.delete(row)
                elif row is None:
                    if job in jobs:
                        session.add(PolicyClaimRow(job=job, policy=ref, claimed_at=now))
                elif row.policy != ref:
                    row.policy, row.claimed_at = ref, now


class PriorityClassRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def apply(self, pc: PriorityClass) -> tuple[PriorityClassRecord, str]:
        """Create or replace; at most one class may be the global default."""
        now = self._db.now()
        with self._db.write() as session:
            if pc.global_default:
                other = session.scalars(select(PriorityClassRow.name).where(
                    PriorityClassRow.global_default.is_(True), PriorityClassRow.name != pc.name)).first()
                if other is not None:
                    raise AlreadyExists("global default priority class", other,
                                        f"only one class may set globalDefault (not also {pc.name!r})")
            row = session.scalars(select(PriorityClassRow).where(PriorityClassRow.name == pc.name)
                                  .with_for_update()).one_or_none()
            if row is None:
                row = PriorityClassRow(name=pc.name, created_at=now, updated_at=now)
                outcome = "created"
                session.add(row)
            elif _class_of(row).priority_class == pc:
                return _class_of(row), "unchanged"
            else:
                outcome = "configured"
            row.value, row.global_default, row.description, row.preemption_policy = (
                pc.value, pc.global_default, pc.description, pc.preemption_policy)
            row.updated_at = now
            session.flush()
            return _class_of(row), outcome

    def get(self, name: str) -> PriorityClassRecord:
        with self._db.read() as session:
            row = session.get(PriorityClassRow, name)
            if row is None:
                raise NotFound("priority class", name)
            return _class_of(row)

    def list(self) -> builtins.list[PriorityClassRecord]:
        with self._db.read() as session:
            return [_class_of(r) for r in session.scalars(select(PriorityClassRow).order_by(PriorityClassRow.name))]

    def delete(self, name: str) -> None:
        with self._db.write() as session:
            row = session.get(PriorityClassRow, name)
            if row is None:
                raise NotFound("priority class", name)
            session.delete(row)
