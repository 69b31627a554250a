"""The job state machine: a pure table, checked on every state change the store writes.

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

PENDING = "pending"
PLACED = "placed"
DISPATCHED = "dispatched"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"

JOB_STATES = (PENDING, PLACED, DISPATCHED, RUNNING, SUCCEEDED, FAILED, CANCELLED)
TERMINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED})
ACTIVE_STATES = frozenset({PLACED, DISPATCHED, RUNNING})  # holding (or about to hold) capacity in a cluster

TRANSITIONS: Mapping[str, frozenset[str]] = {
    PENDING: frozenset({PLACED, CANCELLED}),
    PLACED: frozenset({DISPATCHED, PENDING, CANCELLED}),
    DISPATCHED: frozenset({RUNNING, PENDING, CANCELLED, FAILED}),
    RUNNING: frozenset({SUCCEEDED, FAILED, PENDING, CANCELLED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
}

# The job event type recorded for a transition into each state (proto JobEventType names).
EVENT_FOR_STATE: Mapping[str, str] = {
    PENDING: "Requeued",
    PLACED: "Placed",
    DISPATCHED: "Dispatched",
    RUNNING: "Running",
    SUCCEEDED: "Succeeded",
    FAILED: "Failed",
    CANCELLED: "Cancelled",
}
EVENT_TYPES = (
    "Submitted", "Placed", "Dispatched", "Running", "Succeeded", "Failed", "Cancelled",
    "Restarted", "Requeued", "Preempted", "Unschedulable", "Waiting",
)
# A pending job's reason changed: it can never be placed as the federation stands
# (unschedulable), or it waits for something transient (room, quota, a lost cluster).
UNSCHEDULABLE_EVENT, WAITING_EVENT = "Unschedulable", "Waiting"


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
