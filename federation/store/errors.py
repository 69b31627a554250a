"""Errors the store raises; the service maps each class to one gRPC code in one place.

Plain Python exceptions with no grpc import, so the store stays usable from the CLI, the
simulator and tests. Every class carries the facts a caller needs to build a useful
message (kind and name, the two states of a refused transition, the epochs involved).

Suggested mapping: NotFound → NOT_FOUND, AlreadyExists → ALREADY_EXISTS,
Conflict → FAILED_PRECONDITION (or ABORTED for a lost optimistic race),
IllegalTransition → FAILED_PRECONDITION, StaleEpoch → FAILED_PRECONDITION,
Unavailable → UNAVAILABLE (retryable).
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error raised on purpose by the store."""


class NotFound(StoreError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} not found")


class AlreadyExists(StoreError):
    """An object with this name exists and differs from the one offered."""

    def __init__(self, kind: str, name: str, detail: str = "") -> None:
        self.kind = kind
        self.name = name
        self.detail = detail
        super().__init__(f"{kind} {name!r} already exists" + (f": {detail}" if detail else ""))


class Conflict(StoreError):
    """The request is valid but the current state refuses it (e.g. deleting a busy queue).

    ``race`` is True when the refusal came from an optimistic version check: retrying
    after re-reading may succeed.
    """

    def __init__(self, message: str, *, race: bool = False) -> None:
        self.race = race
        super().__init__(message)


class WorkInactive(Conflict):
    """A change conditional on a Work (``work_id=``) found that Work no longer active.

    Why its own class: an agent's report about a withdrawn Work must change nothing in the
    job, which may already run under a newer Work elsewhere; the caller answers the agent
    with a ``Cancel`` for its Work instead of only logging a lost race.
    """

    def __init__(self, work_id: int, job: str, state: str) -> None:
        self.work_id = work_id
        self.job = job
        self.state = state
        super().__init__(f"work {work_id} of job {job!r} is {state}, no longer the job's active work")


class IllegalTransition(StoreError):
    """A job state change the state machine does not allow (names both states)."""

    def __init__(self, from_state: str, to_state: str, job: str = "") -> None:
        self.from_state = from_state
        self.to_state = to_state
        self.job = job
        who = f"job {job!r}: " if job else ""
        super().__init__(f"{who}illegal transition {from_state} -> {to_state}")


class StaleEpoch(StoreError):
    """A message from an agent whose epoch has been superseded: it must stop (fenced)."""

    def __init__(self, cluster: str, epoch: int, current: int) -> None:
        self.cluster = cluster
        self.epoch = epoch
        self.current = current
        super().__init__(f"cluster {cluster!r}: epoch {epoch} is stale (current epoch {current}); agent is fenced")


class UnknownRevision(StoreError):
    """A schema revision migrations cannot go to (no such revision, or not in that direction)."""

    def __init__(self, revision: str, why: str) -> None:
        self.revision = revision
        super().__init__(f"{revision}: {why}")


class Unavailable(StoreError):
    """The database could not be reached (or is locked); the call may be retried.

    The store recovers by itself on a later call (pooled connections are checked at checkout), so
    callers only need to retry or report UNAVAILABLE.
    """
