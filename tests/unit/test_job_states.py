"""The job state machine, as a table: every (from, to) pair is either allowed or refused."""

from __future__ import annotations

import itertools

import pytest

from federation.domain.states import JOB_STATES, TERMINAL_STATES, allowed, is_terminal
from federation.store.errors import IllegalTransition
from federation.store.lifecycle import check_transition

ALLOWED = [
    ("pending", "placed", "a-round-places-a-pending-job"),
    ("placed", "dispatched", "propagation-sends-the-work"),
    ("dispatched", "running", "the-agent-reports-the-gang-started"),
    ("running", "succeeded", "the-job-completes"),
    ("running", "failed", "the-job-fails-while-running"),
    ("dispatched", "failed", "the-cluster-refuses-the-work"),
    ("pending", "cancelled", "user-cancels-while-pending"),
    ("placed", "cancelled", "user-cancels-after-placement"),
    ("dispatched", "cancelled", "user-cancels-after-dispatch"),
    ("running", "cancelled", "user-cancels-a-running-job"),
    ("placed", "pending", "cluster-lost-before-dispatch-replans"),
    ("dispatched", "pending", "cluster-lost-after-dispatch-replans"),
    ("running", "pending", "preempted-or-cluster-lost-while-running-replans"),
]

REFUSED = [
    ("pending", "running", "cannot-run-without-placement"),
    ("pending", "dispatched", "cannot-dispatch-without-placement"),
    ("pending", "succeeded", "cannot-succeed-without-running"),
    ("pending", "failed", "a-pending-job-does-not-fail-it-stays-pending-with-a-reason"),
    ("placed", "running", "must-be-dispatched-first"),
    ("placed", "succeeded", "placed-cannot-succeed"),
    ("placed", "failed", "placed-cannot-fail"),
    ("placed", "placed", "placing-twice-is-not-a-transition"),
    ("running", "placed", "a-running-job-is-not-placed-again-without-requeue"),
    ("running", "dispatched", "no-going-back-to-dispatched"),
    ("succeeded", "running", "a-finished-job-never-runs-again"),
    ("succeeded", "pending", "a-finished-job-is-not-requeued"),
    ("failed", "pending", "a-failed-job-is-not-requeued"),
    ("cancelled", "placed", "a-round-that-raced-a-cancel-cannot-place-it"),
    ("cancelled", "cancelled", "cancelled-is-final-even-for-itself"),
    ("succeeded", "cancelled", "cancelling-a-finished-job-is-refused"),
    ("failed", "cancelled", "cancelling-a-failed-job-is-refused"),
    ("pending", "exploded", "unknown-target-state"),
    ("limbo", "pending", "unknown-source-state"),
]


@pytest.mark.parametrize(("from_state", "to_state"), [(f, t) for f, t, _ in ALLOWED],
                         ids=[i for _, _, i in ALLOWED])
def test_allowed_transition(from_state: str, to_state: str) -> None:
    assert allowed(from_state, to_state)
    check_transition(from_state, to_state)


@pytest.mark.parametrize(("from_state", "to_state"), [(f, t) for f, t, _ in REFUSED],
                         ids=[i for _, _, i in REFUSED])
def test_refused_transition_names_both_states(from_state: str, to_state: str) -> None:
    assert not allowed(from_state, to_state)
    with pytest.raises(IllegalTransition) as info:
        check_transition(from_state, to_state, "train-llm")
    assert info.value.from_state == from_state
    assert info.value.to_state == to_state
    assert f"{from_state} -> {to_state}" in str(info.value)
    assert "train-llm" in str(info.value)


def test_table_covers_every_pair_exactly() -> None:
    """Every pair of known states is allowed iff it is listed in ALLOWED (nothing implicit)."""
    listed = {(f, t) for f, t, _ in ALLOWED}
    for f, t in itertools.product(JOB_STATES, JOB_STATES):
        assert allowed(f, t) == ((f, t) in listed), (f, t)


def test_terminal_states_have_no_way_out() -> None:
    assert {"succeeded", "failed", "cancelled"} == TERMINAL_STATES
    for state in JOB_STATES:
        assert is_terminal(state) == (state in TERMINAL_STATES)
        if is_terminal(state):
            assert not any(allowed(state, t) for t in JOB_STATES)
