"""Failover decisions: which clusters are lost, and what we tell users why.

The action itself (requeue the cluster's jobs, withdraw its works) is one store
transaction (``ClusterRepository.mark_lost``) so a crash can never leave a cluster half
failed-over. What is decided here, purely, is *when*: a cluster is lost once nothing has
been heard from its agent for longer than the grace period. Silence, not a dropped stream,
is the signal: streams drop on every network blip and agent restart, and re-planning a
gang that is still running would waste its progress. Only after the grace period do we
pay that price, because Armada's alternative (fail the jobs) is worse for users.
"""

from __future__ import annotations

from collections.abc import Mapping

LOST_REASON = "cluster {cluster} unreachable: no heartbeat for {silent:.0f}s (grace {grace:g}s)"


def lost_clusters(last_seen: Mapping[str, float], now: float, grace_seconds: float) -> tuple[str, ...]:
    """Clusters silent for longer than ``grace_seconds`` at ``now``, by name."""
    return tuple(sorted(name for name, seen in last_seen.items() if now - seen > grace_seconds))


def loss_reason(cluster: str, silent_seconds: float, grace_seconds: float) -> str:
    return LOST_REASON.format(cluster=cluster, silent=silent_seconds, grace=grace_seconds)
