"""Propagation's pure rules: status reports as job-state paths, lost clusters, when a
snapshot reflects a binding, which placements get Works, and the planning snapshot's
reservation of promised-but-unbound room."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from federation.control.snapshot import build
from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job, Task
from federation.domain.nodes import Node, Taint
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PodAssignment
from federation.domain.propagation import ClusterAffinity, PropagationPolicy
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.domain.states import JobState, WorkPhase
from federation.domain.works import placement_from_payload, work_payload
from federation.propagation import admissible, lost_clusters, reflected_in_snapshot, refuse_inadmissible
from federation.propagation.status import effect, job_steps
from federation.store import ClusterRecord, JobRecord, SnapshotSummary, WorkRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("current", "target", "steps"), [
    pytest.param("placed", "dispatched", ("dispatched",), id="ack-dispatches"),
    pytest.param("placed", "running", ("dispatched", "running"), id="skipped-phases-walk-the-path"),
    pytest.param("placed", "succeeded", ("dispatched", "running", "succeeded"), id="finished-before-first-report"),
    pytest.param("dispatched", "failed", ("failed",), id="failed-from-dispatched"),
    pytest.param("placed", "failed", ("dispatched", "failed"), id="failed-from-placed"),
    pytest.param("running", "dispatched", (), id="never-backwards"),
    pytest.param("succeeded", "running", (), id="terminal-stays"),
    pytest.param("running", "pending", ("pending",), id="replan-requeues"),
    pytest.param("pending", "pending", (), id="already-pending"),
    pytest.param("cancelled", "pending", (), id="cancelled-stays"),
])
def test_job_steps(current: str, target: str, steps: tuple[str, ...]) -> None:
    assert job_steps(current, JobState(target)) == steps


@pytest.mark.parametrize(("phase", "work_state", "replan"), [
    (WorkPhase.PENDING, "applied", False), (WorkPhase.BOUND, "bound", False), (WorkPhase.RUNNING, "bound", False),
    (WorkPhase.SUCCEEDED, "succeeded", False), (WorkPhase.FAILED, "failed", False),
    (WorkPhase.REPLAN, "withdrawn", True), (WorkPhase.CANCELLED, None, False), (None, None, False),
])
def test_effect_of_each_phase(phase: WorkPhase | None, work_state: str | None, replan: bool) -> None:
    change = effect(phase, "placed")
    assert (change.work_state, change.replan) == (work_state, replan)


def test_lost_clusters_are_those_silent_past_the_grace_period() -> None:
    assert lost_clusters({"a": 100.0, "b": 69.0, "c": 70.0}, now=100.0, grace_seconds=30.0) == ("b",)


@pytest.mark.parametrize(("state", "updated", "received", "reflected"), [
    pytest.param("bound", T0, T0 + timedelta(seconds=1), True, id="bound-then-snapshot"),
    pytest.param("bound", T0 + timedelta(seconds=1), T0, False, id="snapshot-older-than-binding"),
    pytest.param("applied", T0, T0 + timedelta(seconds=1), False, id="not-bound-yet"),
    pytest.param("bound", T0, None, False, id="no-snapshot"),
    pytest.param(None, None, T0, False, id="no-work"),
])
def test_reflected_in_snapshot(state: str | None, updated: datetime | None, received: datetime | None,
                               reflected: bool) -> None:
    assert reflected_in_snapshot(state, updated, received) is reflected


def _job(name: str = "j", pods: int = 2, gpus: int = 8, clusters: tuple[str, ...] = ()) -> Job:
    policy = PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=clusters)) if clusters else None
    return Job(name, "q", (Task("w", pods, Resources.of(gpu=gpus)),), propagation=policy)


def _cluster(name: str, taints: tuple[Taint, ...] = ()) -> ClusterSnapshot:
    nodes = tuple(Node(f"{name}-n{i}", Resources.of(gpu=8), Resources.of(gpu=8)) for i in range(2))
    return ClusterSnapshot(name, nodes, taints=taints)


def test_payload_round_trips_the_placement() -> None:
    placement = Placement("j", "east", "leaf0", 1, (PodAssignment("w", 0, "n0"), PodAssignment("w", 1, "n1")))
    assert placement_from_payload("j", work_payload(placement)) == placement


def test_admissible_reuses_the_planner_eligibility() -> None:
    assert admissible(_job(clusters=("east",)), _cluster("east")) is None
    assert admissible(_job(clusters=("east",)), _cluster("west")) == "affinity"
    assert admissible(_job(), _cluster("west", (Taint("gpu", "broken"),))) == "taints"


def test_a_placement_its_policy_forbids_is_refused_as_unplaced_before_recording() -> None:
    east_only = _job("a", clusters=("east",))
    snapshot = FederationSnapshot(clusters=(_cluster("east"), _cluster("west")), queues=(Queue("q"),),
                                  pending=(PendingJob(east_only, 0.0), PendingJob(_job("b"), 0.0)))
    plan = Plan(placements=(Placement("a", "west", "r", 1), Placement("b", "west", "r", 1)))
    kept, refused = refuse_inadmissible(plan, snapshot)
    assert [p.job for p in kept.placements] == ["b"]
    assert refused == (("a", "west", "affinity"),)
    [unplaced] = kept.unplaced
    assert (unplaced.job, unplaced.constraint, unplaced.unschedulable) == ("a", "propagation", False)
    assert "propagation policy forbids" in unplaced.reason
    assert refuse_inadmissible(kept, snapshot) == (kept, ())


def _record(name: str, state: str, cluster: str | None = None, version: int = 3) -> JobRecord:
    return JobRecord(name=name, queue="q", tenant="t", job=_job(name), spec_digest="", state=state,
                     unschedulable=False, reason="", message="", cluster=cluster, hypernode="r" if cluster else None,
                     tier=1 if cluster else None, restarts=0, created_at=T0, updated_at=T0, version=version)


def _cluster_record(name: str, received: datetime) -> ClusterRecord:
    summary = SnapshotSummary(received, 2, 2, 0, 1, Resources.of(gpu=16), Resources.of(gpu=16))
    return ClusterRecord(name=name, epoch=1, agent_id="a", labels={}, taints=(), healthy=True, lost=False,
                         registered_at=T0, last_heartbeat=T0, summary=summary, tree_error=None)


def _work(job: str, state: str, updated: datetime) -> WorkRecord:
    payload = work_payload(Placement(job, "east", "r", 1, (PodAssignment("w", 0, "east-n0"),
                                                            PodAssignment("w", 1, "east-n1"))))
    return WorkRecord(id=1, job=job, cluster="east", version=1, state=state, message="", payload=payload,
                      created_at=updated, updated_at=updated)


@pytest.mark.parametrize(("work_state", "reserved"), [
    pytest.param("applied", True, id="placed-not-bound-room-is-reserved"),
    pytest.param("bound", False, id="bound-and-reflected-not-counted-twice"),
])
def test_snapshot_reserves_room_promised_but_not_yet_visible(work_state: str, reserved: bool) -> None:
    data = build([_cluster("east")], [_cluster_record("east", T0 + timedelta(seconds=5))], [Queue("q")],
                 [_record("next", "pending")], [_record("held", "dispatched", "east", version=7)],
                 [_work("held", work_state, T0)], now=10.0)
    east = data.snapshot.cluster("east")
    assert east is not None
    assert east.free.gpus == (0 if reserved else 16)
    [running] = data.snapshot.running
    assert running.placement.pods[1].node == "east-n1"  # the Work's assignment, so it is never moved
    assert data.versions == {"next": 3, "held": 7}
    assert [p.job.name for p in data.snapshot.pending] == ["next"]


def test_placed_job_without_work_is_flagged_for_repair_and_lost_clusters_enter_unhealthy() -> None:
    """A lost cluster is never planned on, but enters with its last valid snapshot as
    unhealthy, so 'could any allowed cluster ever hold this job?' still counts it."""
    lost = _cluster_record("west", T0)
    lost = ClusterRecord(**{**lost.__dict__, "lost": True, "healthy": False})
    silent = ClusterRecord(**{**_cluster_record("north", T0).__dict__, "summary": None, "labels": {"zone": "n"}})
    data = build([_cluster("east"), _cluster("west")], [_cluster_record("east", T0), lost, silent], [Queue("q")], [],
                 [_record("orphan", "placed", "east")], [], now=1.0)
    assert [r.name for r in data.placed_without_work] == ["orphan"]
    assert [(c.name, c.healthy) for c in data.snapshot.clusters] == [("east", True), ("west", False)]
    assert [(c.name, c.healthy, dict(c.labels), c.nodes) for c in data.unknown] == [("north", False, {"zone": "n"}, ())]
    assert data.unavailable == {"west": "lost", "north": "no snapshot yet"}


def test_active_job_on_a_lost_cluster_leaves_it_and_is_not_running_there() -> None:
    """A cluster lost without the unreachable taint (``mark_lost``, or before the taint
    existed) is unreachable since its last heartbeat; a job without tolerations leaves."""
    lost = ClusterRecord(**{**_cluster_record("east", T0).__dict__, "lost": True})
    data = build([], [lost], [Queue("q")], [], [_record("held", "running", "east")], [], now=T0.timestamp() + 1)
    assert dict(data.evictions) == {"east": {"held": "left cluster east: taint "
                                             "cluster.karmada.io/unreachable:NoExecute: failover grace 0s"}}
    assert data.snapshot.running == () and data.next_eviction is None


def test_digest_ignores_snapshot_times_but_not_free_resources() -> None:
    def digest(cluster: ClusterSnapshot) -> str:
        return build([cluster], [_cluster_record("east", T0)], [Queue("q")], [_record("p", "pending")], [], [],
                     now=1.0).digest

    base = _cluster("east")
    later = ClusterSnapshot("east", base.nodes, taken_at=99.0)
    busier = ClusterSnapshot("east", (base.nodes[0], Node("east-n1", Resources.of(gpu=8), Resources.of(gpu=2))))
    assert digest(base) == digest(later) != digest(busier)
