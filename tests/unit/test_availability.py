"""Unavailable is not impossible: a pending job that only a lost, unhealthy or not yet
reporting cluster could hold is Waiting ("allowed clusters unavailable"), never
unschedulable; a job no allowed cluster could ever hold stays unschedulable. Checked on
hand-made verdicts and on the real planner given the lost cluster as ``healthy=False``."""

from __future__ import annotations

import pytest

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job, Task
from federation.domain.nodes import Node, Taint
from federation.domain.plans import FederationSnapshot, PendingJob, Plan, PlanLimits, Unplaced
from federation.domain.propagation import ClusterAffinity, PropagationPolicy
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.placement import plan as real_plan
from federation.propagation.availability import with_availability
from federation.service.views import event_type
from federation.v1 import jobs_pb2


def _job(name: str = "j", pods: int = 2, clusters: tuple[str, ...] = ("west",)) -> Job:
    policy = PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=clusters)) if clusters else None
    return Job(name, "q", (Task("w", pods, Resources.of(gpu=8)),), propagation=policy)


def _cluster(name: str, nodes: int = 2, *, free: int = 8, healthy: bool = True,
             taints: tuple[Taint, ...] = ()) -> ClusterSnapshot:
    return ClusterSnapshot(name, tuple(Node(f"{name}-n{i}", Resources.of(gpu=8), Resources.of(gpu=free))
                                       for i in range(nodes)), taints=taints, healthy=healthy)


def _snapshot(job: Job, *clusters: ClusterSnapshot) -> FederationSnapshot:
    return FederationSnapshot(clusters=clusters, queues=(Queue("q"),), pending=(PendingJob(job),))


IMPOSSIBLE = Unplaced("j", "no cluster matches the job's cluster affinity", "affinity", None, unschedulable=True)
NO_ROOM = Unplaced("j", "no allowed cluster has room for the whole gang right now", "capacity", "east")


@pytest.mark.parametrize(("job", "clusters", "unknown", "verdict", "expected"), [
    pytest.param(_job(), (_cluster("east"), _cluster("west", healthy=False)), (), IMPOSSIBLE,
                 "allowed clusters unavailable: west (lost); it is placed when one returns",
                 id="only-allowed-cluster-lost-waits"),
    pytest.param(_job(), (_cluster("east"),), (ClusterSnapshot("west", healthy=False),), IMPOSSIBLE,
                 "allowed clusters unavailable: west (no snapshot yet); it is placed when one returns",
                 id="allowed-cluster-not-reporting-yet-waits"),
    pytest.param(_job(pods=3), (_cluster("east", 4), _cluster("west", healthy=False)), (), IMPOSSIBLE, None,
                 id="lost-cluster-too-small-ever-stays-unschedulable"),
    pytest.param(_job(clusters=("east",)), (_cluster("east", 1), _cluster("west", healthy=False)), (), IMPOSSIBLE,
                 None, id="lost-cluster-outside-the-affinity-changes-nothing"),
    pytest.param(_job(), (_cluster("west", healthy=False, taints=(Taint("gpu", "bad", "NoSchedule"),)),), (),
                 IMPOSSIBLE, None, id="lost-cluster-with-untolerated-taints-changes-nothing"),
    pytest.param(_job(clusters=("east", "west")), (_cluster("east", free=0), _cluster("west", healthy=False)), (),
                 NO_ROOM, None, id="an-available-cluster-could-hold-it-the-planner-reason-stands"),
])
def test_verdicts(job: Job, clusters: tuple[ClusterSnapshot, ...], unknown: tuple[ClusterSnapshot, ...],
                  verdict: Unplaced, expected: str | None) -> None:
    why = {"west": "lost" if not unknown else "no snapshot yet"}
    [after] = with_availability(Plan(unplaced=(verdict,)), _snapshot(job, *clusters), unknown, why).unplaced
    if expected is None:
        assert after == verdict
    else:
        assert (after.reason, after.unschedulable, after.constraint, after.closest_cluster) == (
            expected, False, "capacity", "west")


def test_the_planner_given_the_lost_cluster_as_unhealthy_never_places_there_and_the_job_waits() -> None:
    snapshot = _snapshot(_job(), _cluster("east"), _cluster("west", healthy=False))
    planned = real_plan(snapshot, PlanLimits(time_limit_seconds=0.3, workers=1))
    assert not planned.placements
    [after] = with_availability(planned, snapshot, (), {"west": "lost"}).unplaced
    assert not after.unschedulable and after.reason.startswith("allowed clusters unavailable: west (lost)")


def test_without_unavailable_clusters_the_plan_is_returned_unchanged() -> None:
    plan = Plan(unplaced=(IMPOSSIBLE,))
    assert with_availability(plan, _snapshot(_job(), _cluster("east"))) is plan


def test_waiting_is_its_own_event_type_on_the_wire() -> None:
    assert event_type("Waiting") == jobs_pb2.JOB_EVENT_TYPE_WAITING
    assert event_type("Unschedulable") == jobs_pb2.JOB_EVENT_TYPE_UNSCHEDULABLE
