"""Scrape-time gauges: pending-by-reason arithmetic, queue shares, and what a scrape exposes
(including a scrape during a database outage, which must still answer)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job, Task
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, RunningJob, Unplaced
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.metrics.gauges import NOT_PLANNED, FederationCollector, Observed, pending_by_reason, queue_shares
from federation.store.stats import ClusterGauge


def _job(name: str, queue: str, gpus: int) -> Job:
    return Job(name, queue, (Task("worker", 1, Resources.of(gpu=gpus)),))


def _snapshot() -> FederationSnapshot:
    nodes = tuple(Node(f"n{i}", Resources.of(gpu=8), Resources.of(gpu=8)) for i in range(4))
    return FederationSnapshot(
        clusters=(ClusterSnapshot("east", nodes),),
        queues=(Queue("a", weight=1), Queue("b", weight=3)),
        pending=(PendingJob(_job("a2", "a", 8)), PendingJob(_job("b1", "b", 32))),
        running=(RunningJob(_job("a1", "a", 8), Placement("a1", "east", "", 0)),),
    )


OBSERVED = Observed(_snapshot(), Plan(unplaced=(Unplaced("a2", "no room", "capacity"),
                                                Unplaced("b1", "no leaf", "topology"))))


def test_pending_jobs_are_split_by_the_last_rounds_constraint_and_the_rest_is_not_planned() -> None:
    got = pending_by_reason(OBSERVED, {"a": 3, "b": 1})
    assert got == {("a", "capacity"): 1, ("a", NOT_PLANNED): 2, ("b", "topology"): 1, ("b", NOT_PLANNED): 0}


def test_not_planned_never_goes_negative_when_jobs_left_pending_since_the_round() -> None:
    assert pending_by_reason(OBSERVED, {"a": 0})[("a", NOT_PLANNED)] == 0


def test_without_a_round_every_pending_job_is_not_planned() -> None:
    assert pending_by_reason(None, {"a": 2}) == {("a", NOT_PLANNED): 2}


def test_queue_shares_are_the_planners_dominant_share_and_weighted_fair_share() -> None:
    shares = queue_shares(_snapshot())
    assert shares.dominant == {"a": 8 / 32, "b": 0.0}
    # demand a = 16/32 = 0.5, b = 32/32 = 1; weights 1:3 water-fill 1.0 into 0.25 / 0.75
    assert abs(shares.fair["a"] - 0.25) < 1e-6 and abs(shares.fair["b"] - 0.75) < 1e-6


class _Stats:
    """The two aggregate reads; ``down`` makes them raise as a lost database would."""

    def __init__(self, down: bool = False) -> None:
        self.down = down

    def job_counts(self) -> dict[tuple[str, str], int]:
        if self.down:
            raise ConnectionError("database unreachable")
        return {("a", "pending"): 1, ("a", "running"): 1, ("b", "pending"): 1}

    def clusters(self) -> list[ClusterGauge]:
        return [ClusterGauge("east", True, True, 24, 32), ClusterGauge("new", False, False, 0, 0)]


def _scrape(collector: FederationCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_a_scrape_exposes_jobs_clusters_shares_reasons_and_streams() -> None:
    got = _scrape(FederationCollector(_Stats(), observed=lambda: OBSERVED, streams=lambda: 2))
    assert got[("federation_store_up", ())] == 1
    assert got[("federation_jobs", (("queue", "a"), ("state", "running")))] == 1
    assert got[("federation_jobs", (("queue", "b"), ("state", "succeeded")))] == 0  # every state, 0 included
    assert got[("federation_cluster_up", (("cluster", "east"),))] == 1
    assert got[("federation_cluster_up", (("cluster", "new"),))] == 0
    assert got[("federation_cluster_free_gpus", (("cluster", "east"),))] == 24
    assert ("federation_cluster_free_gpus", (("cluster", "new"),)) not in got  # unknown size is not zero
    assert got[("federation_pending_jobs", (("queue", "b"), ("reason", "topology")))] == 1
    assert got[("federation_queue_dominant_share", (("queue", "a"),))] == 0.25
    assert got[("federation_agent_streams", ())] == 2


def test_a_scrape_during_a_database_outage_answers_with_store_up_zero() -> None:
    got = _scrape(FederationCollector(_Stats(down=True), observed=lambda: OBSERVED))
    assert got[("federation_store_up", ())] == 0
    assert not any(name == "federation_jobs" for name, _ in got)
    assert got[("federation_queue_fair_share", (("queue", "b"),))] > 0  # the planner's view still shows


def test_shares_are_computed_once_per_round_not_once_per_scrape() -> None:
    collector = FederationCollector(_Stats(), observed=lambda: OBSERVED)
    first = collector._cached_shares(OBSERVED.snapshot)
    assert collector._cached_shares(OBSERVED.snapshot) is first
