"""Jobs that stay on an unreachable cluster while their tolerations allow still count
toward their queue (fair share, capability), through the round's input
(``control.snapshot.build``): the lost cluster gets nothing new, and both planners'
plans pass ``validate()``, which refuses a plan that would take the queue past its
capability by forgetting them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from federation.control.snapshot import build
from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Toleration
from federation.domain.plans import FederationSnapshot, Placement, Plan, PodAssignment
from federation.domain.propagation import PropagationPolicy
from federation.domain.queues import Queue
from federation.domain.resources import GPU, Resources
from federation.domain.works import work_payload
from federation.placement import greedy_plan, plan, validate
from federation.placement.admission import enqueue
from federation.placement.ledger import QueueLedger
from federation.propagation.taints import UNREACHABLE
from federation.store import ClusterRecord, JobRecord, WorkRecord
from tests.fixtures.instances import gang, gpu_node

T = 1_000.0
AT = datetime.fromtimestamp(T, tz=UTC)
STAYS = replace(gang("stays", "q", 1, 2), propagation=PropagationPolicy(
    cluster_tolerations=(Toleration(UNREACHABLE, "Exists", "", "NoExecute"),)))  # tolerated for ever
QUEUES = [Queue("q", capability=Resources.of(gpu=4)), Queue("r")]


def _cluster(name: str, lost: bool) -> ClusterRecord:
    return ClusterRecord(name=name, epoch=1, agent_id="a", labels={}, taints=(), healthy=not lost, lost=lost,
                         registered_at=AT, last_heartbeat=AT, summary=None, tree_error=None)


def _record(job: Job, state: str, cluster: str | None = None) -> JobRecord:
    return JobRecord(name=job.name, queue=job.queue, tenant="t", job=job, spec_digest="", state=state,
                     unschedulable=False, reason="", message="", cluster=cluster, hypernode=None, tier=None,
                     restarts=0, created_at=AT, updated_at=AT, version=1)


def _input(pending: Job) -> FederationSnapshot:
    """east is unreachable (its agent silent) with ``stays`` running there on 2 of its 8
    GPUs; west is healthy and empty."""
    east = ClusterSnapshot("east", (gpu_node("east-n0", 8, used=2),))
    west = ClusterSnapshot("west", (gpu_node("west-n0", 8),))
    domain = east.tree.lowest_domain_holding(["east-n0"])
    assert domain is not None
    work = WorkRecord(1, "stays", "east", 1, "bound", "", work_payload(Placement(
        "stays", "east", domain.name, domain.tier, (PodAssignment("worker", 0, "east-n0"),))), AT, AT)
    data = build([east, west], [_cluster("east", True), _cluster("west", False)], QUEUES,
                 [_record(pending, "pending")], [_record(STAYS, "running", "east")], [work], now=T + 30)
    assert not data.evictions and data.unavailable == {"east": "lost"}
    return data.snapshot


def test_a_tolerated_job_on_an_unreachable_cluster_is_counted_by_its_queue() -> None:
    snapshot = _input(gang("p", "q", 1, 1))
    assert [(r.job.name, r.placement.cluster) for r in snapshot.running] == [("stays", "east")]
    assert QueueLedger(snapshot).start_usage["q"].get(GPU) == 2
    # The enqueue budget is healthy room: what runs on the lost cluster does not take it.
    two = tuple(replace(snapshot.pending[0], job=gang(name, "r", 1, 4)) for name in ("a", "b"))
    admitted, left = enqueue(replace(snapshot, pending=two), 1.0)
    assert left == () and [p.job.name for p in admitted.pending] == ["a", "b"]


@pytest.mark.parametrize(("pending", "placed_on", "blocked_by"), [
    pytest.param(gang("more", "q", 1, 4), None, "queue-capability",
                 id="q runs 2 on the lost cluster: 4 more would pass its capability of 4"),
    pytest.param(gang("fits", "q", 1, 2), "west", None, id="2 more fit q's capability: placed on the healthy cluster"),
    pytest.param(gang("other", "r", 1, 4), "west", None,
                 id="the lost cluster has room for it but gets nothing new"),
])
@pytest.mark.parametrize("planner", ["cpsat", "greedy"])
def test_the_plan_counts_them_places_nothing_on_the_lost_cluster_and_validates(
        pending: Job, placed_on: str | None, blocked_by: str | None, planner: str) -> None:
    snapshot = _input(pending)
    result = plan(snapshot) if planner == "cpsat" else greedy_plan(snapshot)
    assert validate(snapshot, result) == []
    assert [p.cluster for p in result.placements] == ([placed_on] if placed_on else [])
    assert [u.constraint for u in result.unplaced] == ([blocked_by] if blocked_by else [])
    assert result.preemptions == ()


def test_validate_refuses_a_plan_that_forgets_them() -> None:
    snapshot = _input(gang("more", "q", 1, 4))
    west = snapshot.clusters[1]
    domain = west.tree.lowest_domain_holding(["west-n0"])
    assert domain is not None
    forgetful = Plan(placements=(Placement("more", "west", domain.name, domain.tier,
                                           (PodAssignment("worker", 0, "west-n0"),)),))
    assert any("capability" in problem for problem in validate(snapshot, forgetful))
