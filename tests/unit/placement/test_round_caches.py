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
from federation.placement.eligibility import ever_holding
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
