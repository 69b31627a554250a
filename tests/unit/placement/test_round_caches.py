"""The round's speed caches give the answers of the uncached functions they stand for.

Each cache of ``PlanningRound`` / ``RoundState`` added for the 10,000-job re-plan (issue 12)
is compared here with the plain function it memoises, on rounds with mixed shapes, hard
topology limits by tier number and by tier name, and clusters of different sizes.
"""

from __future__ import annotations

import pytest

from federation.domain import PlanLimits
from federation.domain.jobs import NetworkTopology
from federation.domain.plans import FederationSnapshot, PendingJob
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.placement.eligibility import ShapeIds, ever_holding, shape_key
from federation.placement.intent import topology_wait, wait_seconds
from federation.placement.ledger import QueueLedger, _job_requests
from federation.placement.opening import open_round
from tests.fixtures.instances import gang, small, synthetic, tiered_cluster


def _mixed() -> FederationSnapshot:
    """Clusters of 4, 8 and 16 nodes; gangs that fit all, some or none of them."""
    clusters = (tiered_cluster("a", 4, leaf=2, spine=2), tiered_cluster("b", 8, leaf=4, spine=2),
                tiered_cluster("c", 16, leaf=4, spine=2))
    topologies = (None, NetworkTopology("hard", highest_tier_allowed=1),
                  NetworkTopology("hard", highest_tier_name="spine"), NetworkTopology("soft", highest_tier_allowed=1))
    shapes = ((1, 4), (2, 8), (4, 8), (8, 8), (12, 8), (40, 8))
    jobs = tuple(PendingJob(gang(f"j{i}-{pods}", "q", pods, gpus, topology=topo), submitted_at=float(i))
                 for i, topo in enumerate(topologies) for pods, gpus in shapes)
    return FederationSnapshot(clusters, (Queue("q"),), jobs, now=100.0)


ROUNDS = [_mixed(), small(3, clusters=3, nodes=8, pending=14), synthetic(seed=1, clusters=6, nodes=20, pending=60)]


@pytest.mark.parametrize("snap", ROUNDS, ids=["mixed", "small", "synthetic"])
def test_ever_holding_cache_matches_eligibility(snap: FederationSnapshot) -> None:
    rnd = open_round(snap, PlanLimits())
    names = tuple(c.name for c in snap.clusters)
    for _ in range(2):  # the second pass answers from the cache
        for p in snap.pending:
            for subset in (names, names[:1], names[1:]):
                expected = tuple(c.name for c in ever_holding(p.job, [rnd.state.clusters[n] for n in subset]))
                assert rnd.ever_holding(p.job, subset) == expected


@pytest.mark.parametrize("service", [0.0, 600.0])
@pytest.mark.parametrize("queue_wait", [None, 0.0, 120.0])
@pytest.mark.parametrize("job_wait", [None, 0.0, 30.0])
@pytest.mark.parametrize("topology", [None, NetworkTopology("hard", highest_tier_allowed=1),
                                      NetworkTopology("soft", highest_tier_allowed=1)])
@pytest.mark.parametrize("pods", [1, 4])
def test_wait_seconds_is_topology_wait_seconds(service: float, queue_wait: float | None, job_wait: float | None,
                                               topology: NetworkTopology | None, pods: int) -> None:
    """The planner's ``wait_seconds`` skips only the explanation of ``topology_wait``."""
    job = gang("j", "q", pods, topology=topology, topology_wait_seconds=job_wait)
    for queue in (None, Queue("q", topology_wait_seconds=queue_wait)):
        assert wait_seconds(job, queue, service) == topology_wait(job, queue, service).seconds


def test_ledger_requests_per_gang_shape_match_each_job() -> None:
    """Jobs share one request vector per gang shape; an elastic job's gang (its minAvailable)
    is a different shape from the same tasks started whole."""
    whole, elastic = gang("whole", "q", 4, 8), gang("elastic", "q", 4, 8, min_available=2)
    twin = gang("twin", "q", 4, 8)
    snap = FederationSnapshot((tiered_cluster("a", 8),), (Queue("q"),),
                              tuple(PendingJob(j, 0.0) for j in (whole, elastic, twin)), now=1.0)
    led = QueueLedger(snap)
    for p in (*snap.pending, *ROUNDS[2].pending):
        assert led.req(p.job) == _job_requests(p.job)
    assert led.req(whole) is led.req(twin)
    assert led.req(elastic) != led.req(whole)


@pytest.mark.parametrize("a, b", [
    ({"cpu": 8_000, "nvidia.com/gpu": 8}, {"cpu": 8_000, "memory": 1 << 30}),
    ({"cpu": 1}, {"cpu": 1}),
    ({}, {"nvidia.com/gpu": 2, "example.com/fpga": 1}),
    ({"memory": 5, "cpu": 3}, {"cpu": 7, "memory": -5}),
])
def test_resource_arithmetic_matches_per_key_definition(a: dict[str, int], b: dict[str, int]) -> None:
    """``Resources`` +, - and dominant share (rewritten to read the plain dicts) keep their
    per-key definition: the sum or difference of every key, zeros dropped, keys sorted."""
    ra, rb = Resources(a), Resources(b)
    keys = sorted(set(a) | set(b))
    plus = {k: a.get(k, 0) + b.get(k, 0) for k in keys if a.get(k, 0) + b.get(k, 0)}
    minus = {k: a.get(k, 0) - b.get(k, 0) for k in keys if a.get(k, 0) - b.get(k, 0)}
    assert list((ra + rb).amounts.items()) == list(plus.items())
    assert list((ra - rb).amounts.items()) == list(minus.items())
    shares = [v / b[k] for k, v in a.items() if b.get(k, 0) > 0]
    assert ra.dominant_share(rb) == max([0.0, *shares])


def test_shape_ids_partition_jobs_as_shape_key_does() -> None:
    """In one round (job names unique), two jobs get one shape id exactly when their
    ``shape_key`` is equal; asked twice, the memoised answer is the same."""
    extra = [gang("e1", "q", 4, 8, min_available=2), gang("e2", "q", 4, 8, min_available=3), gang("e3", "q", 4, 8)]
    for snap in ROUNDS:
        jobs = [p.job for p in snap.pending] + extra
        ids = ShapeIds()
        for _ in range(2):
            for a in jobs:
                for b in jobs:
                    assert (ids(a) == ids(b)) == (shape_key(a) == shape_key(b)), (a.name, b.name)
