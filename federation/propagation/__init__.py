"""Propagation: turn a round's placements into versioned Works, and fail over lost clusters.

Pure functions over domain types and store records; the round loop and the agent hub do
the I/O. Karmada-style policy matching (clusterAffinity, ordered clusterAffinities,
clusterTolerations) is *not* re-implemented here: it lives in
``federation.placement.eligibility`` and is reused, so the planner, ``validate()`` and
propagation can never disagree about which clusters a job may use.
"""

from federation.propagation.failover import LOST_REASON, loss_reason, lost_clusters
from federation.propagation.works import admissible, reflected_in_snapshot, refuse_inadmissible

__all__ = [
    "LOST_REASON",
    "admissible",
    "loss_reason",
    "lost_clusters",
    "reflected_in_snapshot",
    "refuse_inadmissible",
]
