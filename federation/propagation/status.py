"""What an agent's WorkStatus means for the Work and the job (pure).

The agent reports phases of one Work (``WorkPhase``; federation.v1.WorkPhase on the wire); the store holds a work
state and a job state machine that allows only single steps (placed → dispatched →
running → succeeded). Reports are level-triggered and may skip phases (a gang that binds
and starts between two reports goes straight from nothing to Running), so the job
changes are computed as the *path* of legal steps from where the job is to where the
report says it is. A report that would move a job backwards, or out of a terminal state,
yields no step: the job state machine, not the order of messages, is the authority.

A report of a bound gang also says where its pods actually are (``actual_pods``): the
agent may have re-packed the gang inside its HyperNode or replaced a pod, and the Work's
recorded placement must follow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from federation.domain.plans import PodAssignment
from federation.domain.states import HOLDING_POD_PHASES, TERMINAL_STATES, JobState, WorkPhase, WorkState

_WORK_STATE: dict[WorkPhase, WorkState] = {
    WorkPhase.PENDING: WorkState.APPLIED,
    WorkPhase.BOUND: WorkState.BOUND,
    WorkPhase.RUNNING: WorkState.BOUND,  # still bound: the work state says where pods hold room, not progress
    WorkPhase.SUCCEEDED: WorkState.SUCCEEDED,
    WorkPhase.FAILED: WorkState.FAILED,
}
_JOB_TARGET: dict[WorkPhase, JobState] = {
    WorkPhase.PENDING: JobState.DISPATCHED, WorkPhase.BOUND: JobState.DISPATCHED,
    WorkPhase.RUNNING: JobState.RUNNING, WorkPhase.SUCCEEDED: JobState.SUCCEEDED,
    WorkPhase.FAILED: JobState.FAILED, WorkPhase.REPLAN: JobState.PENDING,
}
_FORWARD = (JobState.PLACED, JobState.DISPATCHED, JobState.RUNNING, JobState.SUCCEEDED)


@dataclass(frozen=True)
class StatusEffect:
    """The work state to record (None: leave it) and the job states to step through."""

    work_state: WorkState | None
    job_steps: tuple[JobState, ...]
    replan: bool = False


def job_steps(current: str, target: JobState) -> tuple[JobState, ...]:
    """The legal single steps from ``current`` to ``target`` (empty when none apply)."""
    if current == target or current in TERMINAL_STATES:
        return ()
    if target == JobState.PENDING:
        return (JobState.PENDING,) if current in (JobState.PLACED, JobState.DISPATCHED, JobState.RUNNING) else ()
    if target == JobState.FAILED:
        if current == JobState.PLACED:
            return (JobState.DISPATCHED, JobState.FAILED)
        return (JobState.FAILED,) if current in (JobState.DISPATCHED, JobState.RUNNING) else ()
    if current not in _FORWARD or target not in _FORWARD:
        return ()
    start, end = _FORWARD.index(current), _FORWARD.index(target)
    return _FORWARD[start + 1:end + 1] if end > start else ()


def effect(phase: WorkPhase | None, job_state: str) -> StatusEffect:
    """What a report of ``phase`` (None: a phase this version does not know) does to a job
    now in ``job_state``."""
    if phase is WorkPhase.REPLAN:
        return StatusEffect(WorkState.WITHDRAWN, job_steps(job_state, JobState.PENDING), replan=True)
    if phase is None or phase not in _JOB_TARGET:  # CANCELLED (the agent confirms a withdrawal) or unknown
        return StatusEffect(None, ())
    return StatusEffect(_WORK_STATE.get(phase), job_steps(job_state, _JOB_TARGET[phase]))


@dataclass(frozen=True)
class ReportedPod:
    """One pod of a ``WorkStatus`` (federation.v1.PodStatus) as far as placement cares."""

    task: str
    index: int
    node: str  # empty while unbound
    phase: str  # Kubernetes pod phase


def actual_pods(phase: WorkPhase | None, reported: Iterable[ReportedPod],
                recorded: Iterable[PodAssignment]) -> tuple[PodAssignment, ...] | None:
    """The pod → node assignment to record for the Work, or None to keep ``recorded``.

    Central decides the HyperNode; the agent may re-pack the gang inside it or replace a
    pod on another node (RestartPod, node lost), so after binding the agent's report is
    the truth about where each pod is. Only reports of a bound gang (BOUND, RUNNING)
    count: before binding the planned nodes are the promise the next round must reserve,
    and a report that names no bound pod at all says nothing new. Pods without a node, or
    no longer holding room (Succeeded, Failed, Unknown on a lost node), are left out: the
    record says where the job's pods hold room now.
    """
    if phase not in (WorkPhase.BOUND, WorkPhase.RUNNING):
        return None
    holding = {(p.task, p.index): p.node for p in reported if p.node and p.phase in HOLDING_POD_PHASES}
    if not holding:
        return None
    actual = tuple(PodAssignment(t, i, n) for (t, i), n in sorted(holding.items()))
    return None if set(actual) == set(recorded) else actual
