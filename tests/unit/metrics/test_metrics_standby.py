"""Only the leading replica exports the store- and round-derived gauges.

Every replica is scraped (headless Service) and shares the database, so a standby that
exported them too would double every ``sum by`` over jobs and pending reasons (its pending
jobs all ``not_planned``: it never ran a round) and fire a cluster-down alert per replica.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from federation.domain.jobs import Job, Task
from federation.domain.plans import FederationSnapshot, PendingJob, Plan, Unplaced
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.metrics.gauges import FederationCollector, Observed
from federation.service.leadership import Leadership
from federation.store.stats import ClusterGauge

ROUND_AND_STORE = {"federation_jobs", "federation_pending_jobs", "federation_queue_dominant_share",
                   "federation_queue_fair_share", "federation_cluster_up", "federation_cluster_free_gpus",
                   "federation_cluster_allocatable_gpus"}
JOB = Job("j", "a", (Task("worker", 1, Resources.of(gpu=8)),))
OBSERVED = Observed(FederationSnapshot(clusters=(), queues=(Queue("a"),), pending=(PendingJob(JOB),)),
                    Plan(unplaced=(Unplaced("j", "no room", "affinity"),)))


class _Stats:
    def __init__(self, down: bool = False) -> None:
        self.down = down
        self.cluster_reads = 0

    def job_counts(self) -> dict[tuple[str, str], int]:
        if self.down:
            raise ConnectionError("database unreachable")
        return {("a", "pending"): 2}

    def clusters(self) -> list[ClusterGauge]:
        self.cluster_reads += 1
        return [ClusterGauge("east", False, True, 0, 8)]


def _scrape(registry: CollectorRegistry) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _registry(leadership: Leadership, stats: _Stats) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(FederationCollector(stats, observed=lambda: OBSERVED, streams=lambda: 0,
                                          leading=leadership.leading))
    return registry


def test_a_standby_exports_only_its_store_connection_and_its_streams() -> None:
    stats = _Stats()
    got = _scrape(_registry(Leadership(), stats))  # elected, never won: a standby
    assert set(got) == {"federation_store_up", "federation_agent_streams"}
    assert got["federation_store_up"] == {(): 1}
    assert stats.cluster_reads == 0  # nothing read that is not exported


def test_a_standby_whose_database_is_down_still_says_so() -> None:
    got = _scrape(_registry(Leadership(), _Stats(down=True)))
    assert got["federation_store_up"] == {(): 0}
    assert not ROUND_AND_STORE & set(got)


def test_the_leader_exports_them_and_a_leader_whose_term_ended_stops() -> None:
    now = [100.0]
    leadership = Leadership(monotonic=lambda: now[0])
    leadership.epoch, leadership.deadline = 3, 110.0
    registry = _registry(leadership, _Stats())
    got = _scrape(registry)
    assert set(got) >= ROUND_AND_STORE
    assert got["federation_pending_jobs"] == {(("queue", "a"), ("reason", "affinity")): 1,
                                              (("queue", "a"), ("reason", "not_planned")): 1}
    assert got["federation_cluster_up"] == {(("cluster", "east"),): 0}
    now[0] = 111.0  # past its term: a leader about to exit, another replica may lead already
    assert set(_scrape(registry)) == {"federation_store_up", "federation_agent_streams"}


def test_without_leader_election_the_single_replica_always_exports_them() -> None:
    assert set(_scrape(_registry(Leadership.always(), _Stats()))) >= ROUND_AND_STORE
