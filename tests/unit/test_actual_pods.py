"""Where a job's pods actually are: an agent's report of a bound gang replaces the Work's
planned pod → node assignment (the agent may re-pack the gang inside its HyperNode or
replace a pod), and ``fedctl explain`` shows the recorded pods, not the planned ones."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from federation.domain.jobs import Job, Task
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.states import WorkPhase
from federation.propagation.status import ReportedPod, actual_pods
from federation.service.views import explain
from federation.store import Decision, DecisionRecord, JobRecord, RoundRecord, WorkRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PLANNED = (PodAssignment("w", 0, "n0"), PodAssignment("w", 1, "n1"))


def _pod(index: int, node: str, phase: str = "Running") -> ReportedPod:
    return ReportedPod("w", index, node, phase)


@pytest.mark.parametrize(("phase", "reported", "expected"), [
    pytest.param(WorkPhase.RUNNING, [_pod(0, "n0"), _pod(1, "n1")], None, id="as-planned-nothing-to-write"),
    pytest.param(WorkPhase.RUNNING, [_pod(1, "n1"), _pod(0, "n0")], None, id="order-does-not-matter"),
    pytest.param(WorkPhase.RUNNING, [_pod(0, "n0"), _pod(1, "n3")],
                 (PodAssignment("w", 0, "n0"), PodAssignment("w", 1, "n3")), id="replaced-pod-on-another-node"),
    pytest.param(WorkPhase.BOUND, [_pod(0, "n2", "Pending"), _pod(1, "n3", "Pending")],
                 (PodAssignment("w", 0, "n2"), PodAssignment("w", 1, "n3")), id="re-packed-at-binding"),
    pytest.param(WorkPhase.RUNNING, [_pod(0, "n0"), _pod(1, "")], (PodAssignment("w", 0, "n0"),),
                 id="unbound-replacement-holds-no-node"),
    pytest.param(WorkPhase.RUNNING, [_pod(0, "n0"), _pod(1, "n1", "Unknown")], (PodAssignment("w", 0, "n0"),),
                 id="pod-on-a-lost-node-is-dropped"),
    pytest.param(WorkPhase.PENDING, [_pod(0, "n2"), _pod(1, "")], None, id="before-binding-the-plan-is-the-promise"),
    pytest.param(WorkPhase.BOUND, [_pod(0, ""), _pod(1, "")], None, id="nothing-bound-nothing-known"),
    pytest.param(WorkPhase.SUCCEEDED, [_pod(0, "n5", "Succeeded")], None, id="finished-job-keeps-its-record"),
    pytest.param(WorkPhase.REPLAN, [_pod(0, "n5")], None, id="replan-is-not-a-placement"),
])
def test_actual_pods(phase: WorkPhase, reported: list[ReportedPod], expected: tuple[PodAssignment, ...] | None) -> None:
    assert actual_pods(phase, reported, PLANNED) == expected


def _record() -> JobRecord:
    job = Job("j", "q", (Task("w", 2, Resources.of(gpu=8)),))
    return JobRecord(name="j", queue="q", tenant="t", job=job, spec_digest="", state="running", unschedulable=False,
                     reason="", message="", cluster="east", hypernode="leaf0", tier=1, restarts=0, created_at=T0,
                     updated_at=T0, version=5)


def _decision() -> DecisionRecord:
    return DecisionRecord(1, RoundRecord(T0, T0, id=7), Decision("j", "placed", "east", "leaf0", 1, PLANNED))


def _work(cluster: str, pods: list[list[object]]) -> WorkRecord:
    payload = {"cluster": cluster, "hypernode": "leaf0", "tier": 1, "pods": pods}
    return WorkRecord(id=3, job="j", cluster=cluster, version=1, state="bound", message="", payload=payload,
                      created_at=T0, updated_at=T0)


def _nodes(resp: object) -> list[str]:
    return [p.node for p in resp.placement.pods]  # type: ignore[attr-defined]  # an ExplainJob response, typed object here


def test_explain_shows_the_recorded_pods_of_the_jobs_work_not_the_planned_ones() -> None:
    resp = explain(_record(), _decision(), _work("east", [["w", 0, "n0"], ["w", 1, "n3"]]))
    assert _nodes(resp) == ["n0", "n3"] and resp.round_id == 7


def test_explain_without_a_work_or_with_a_work_elsewhere_shows_the_decision() -> None:
    assert _nodes(explain(_record(), _decision())) == ["n0", "n1"]
    assert _nodes(explain(_record(), _decision(), _work("west", [["w", 0, "x"]]))) == ["n0", "n1"]
