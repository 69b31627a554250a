"""Propagation: turn a round's placements into versioned Works, and fail over lost clusters.

Pure functions over domain types and store records; the round loop and the agent hub do
the I/O. Karmada-style policy matching (clusterAffinity, ordered clusterAffinities,
clusterTolerations) is *not* re-implemented here: it lives in
``federation.placement.eligibility`` and is reused, so the planner, ``validate()`` and
propagation can never disagree about which clusters a job may use.
"""

from federation.propagation.failover import LOST_REASON, loss_reason, lost_clusters
from federation.propagation.works import (
    admissible,
    jobs_without_work,
    placement_from_payload,
    reflected_in_snapshot,
    work_payload,
    works_to_create,
)

__all__ = [
    "LOST_REASON",
    "admissible",
    "jobs_without_work",
    "loss_reason",
    "lost_clusters",
    "placement_from_payload",
    "reflected_in_snapshot",
    "work_payload",
    "works_to_create",
]
