"""One state vocabulary: job states, work states, work and pod phases, and their tables.

Every layer names these with the enums below (``str`` enums, so the stored and logged
values are the plain strings); conversion to the wire's enums happens in ``wire/`` only.

**Job states** — the job state machine: a pure table, checked on every state change the
store writes.

It lives in the domain (not the store) so the pure layers (``propagation``) can name job
states without importing the store.

::

    pending ──► placed ──► dispatched ──► running ──► succeeded
       ▲          │            │             │  └────► failed
       └──────────┴────────────┴─────────────┘ (re-plan: cluster lost / preempted)
    pending|placed|dispatched|running ──► cancelled
    dispatched ──► failed

Why a table and not ad-hoc checks: every writer (submit, planner rounds, agent status,
failover, cancel) goes through the store's ``check_transition`` (``store/lifecycle.py``),
so an impossible history (a finished job running again, a cancelled job being placed by
a round that raced the cancel) cannot be written by any of them. Terminal states never change again.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class JobState(StrEnum):
    PENDING = "pending"
    PLACED = "placed"
    DISPATCHED = "dispatched"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


JOB_STATES = tuple(JobState)
TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
# Holding (or about to hold) capacity in a cluster.
ACTIVE_STATES = frozenset({JobState.PLACED, JobState.DISPATCHED, JobState.RUNNING})

TRANSITIONS: Mapping[str, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.PLACED, JobState.CANCELLED}),
    JobState.PLACED: frozenset({JobState.DISPATCHED, JobState.PENDING, JobState.CANCELLED}),
    JobState.DISPATCHED: frozenset({JobState.RUNNING, JobState.PENDING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.PENDING, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

# The job event type recorded for a transition into each state (proto JobEventType names).
EVENT_FOR_STATE: Mapping[str, str] = {
    JobState.PENDING: "Requeued",
    JobState.PLACED: "Placed",
    JobState.DISPATCHED: "Dispatched",
    JobState.RUNNING: "Running",
    JobState.SUCCEEDED: "Succeeded",
    JobState.FAILED: "Failed",
    JobState.CANCELLED: "Cancelled",
}
EVENT_TYPES = (
    "Submitted", "Placed", "Dispatched", "Running", "Succeeded", "Failed", "Cancelled",
    "Restarted", "Requeued", "Preempted", "Unschedulable", "Waiting", "Grown", "Warning",
)
# A pending job's reason changed: it can never be placed as the federation stands
# (unschedulable), or it waits for something transient (room, quota, a lost cluster).
UNSCHEDULABLE_EVENT, WAITING_EVENT = "Unschedulable", "Waiting"
# A running elastic job was given more pods (its Work's next generation).
GROWN_EVENT = "Grown"
# A member cluster could not honour part of a job as asked (agents/core/priority.py); it runs on.
WARNING_EVENT = "Warning"
# A member cluster's agent restarted pods of a job under its restart policies.
RESTARTED_EVENT = "Restarted"


def pending_event(unschedulable: bool) -> str:
    """The event of a pending job whose reason changed. ``Unschedulable`` only when no
    allowed cluster could ever hold it; "no room right now" (and every other transient
    reason) is ``Waiting``, so tools do not show a job that will run as impossible."""
    return UNSCHEDULABLE_EVENT if unschedulable else WAITING_EVENT


def allowed(from_state: str, to_state: str) -> bool:
    """True when the machine allows ``from_state -> to_state``."""
    return to_state in TRANSITIONS.get(from_state, frozenset())


def is_terminal(state: str) -> bool:
    return state in TERMINAL_STATES


class WorkState(StrEnum):
    """Where central's record of one Work stands (the ``works`` table).

    ``pending`` created, not yet acknowledged by the agent; ``applied`` the agent has
    it, the gang is not bound yet; ``bound`` the gang is bound to nodes (its pods hold
    room there, whether or not they have started); then finished, or ``withdrawn``
    (cancelled, superseded by a newer version, or its cluster lost).
    """

    PENDING = "pending"
    APPLIED = "applied"
    BOUND = "bound"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    WITHDRAWN = "withdrawn"


WORK_STATES = tuple(WorkState)
ACTIVE_WORK_STATES = (WorkState.PENDING, WorkState.APPLIED, WorkState.BOUND)
# The agent has bound the gang: its pods hold room on nodes (or did, until they finished).
BOUND_WORK_STATES = frozenset({WorkState.BOUND, WorkState.SUCCEEDED, WorkState.FAILED})

# Forward only; a report that would go back is ignored by the caller (same state = no-op).
WORK_TRANSITIONS: Mapping[str, frozenset[WorkState]] = {
    WorkState.PENDING: frozenset({WorkState.APPLIED, WorkState.BOUND, WorkState.SUCCEEDED, WorkState.FAILED,
                                  WorkState.WITHDRAWN}),
    WorkState.APPLIED: frozenset({WorkState.BOUND, WorkState.SUCCEEDED, WorkState.FAILED, WorkState.WITHDRAWN}),
    WorkState.BOUND: frozenset({WorkState.SUCCEEDED, WorkState.FAILED, WorkState.WITHDRAWN}),
    WorkState.SUCCEEDED: frozenset(),
    WorkState.FAILED: frozenset(),
    WorkState.WITHDRAWN: frozenset(),
}


class WorkPhase(StrEnum):
    """What an agent reports about one Work (``federation.v1.WorkPhase`` on the wire).

    ``Bound``: the whole gang is bound inside its HyperNode, not all pods run yet;
    ``Replan``: the cluster cannot honour the placement, central must place the job again;
    ``Cancelled``: the agent confirms a withdrawal.
    """

    PENDING = "Pending"
    BOUND = "Bound"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    REPLAN = "Replan"


class PodPhase(StrEnum):
    """Kubernetes pod phases (``PodStatus.phase``), as the agents read and report them."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


TERMINAL_POD_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
# A bound pod in these phases holds room on its node.
HOLDING_POD_PHASES = frozenset({PodPhase.PENDING, PodPhase.RUNNING})
