"""Cluster NoExecute taints and how long each job may stay: Karmada's taint manager, purely.

Modelled on karmada-io/karmada ``pkg/controllers/cluster/taint_manager.go``
(``needEvictionWithCurrentTime``) and ``pkg/util/helper/taint.go``, which follow the
Kubernetes node taint manager:

- a cluster's **NoExecute** taints are the ones that evict (NoSchedule and
  PreferNoSchedule only keep new placements away);
- every NoExecute taint must be tolerated by the job's ``clusterTolerations``, else the
  job leaves at once;
- each taint is paired with the first toleration that tolerates it; one without
  ``tolerationSeconds`` tolerates for ever, one with it until the taint's ``timeAdded`` +
  ``tolerationSeconds``; the job leaves at the earliest such time (none: it stays);
- Karmada's webhook gives every policy a toleration of ``cluster.karmada.io/not-ready``
  and ``cluster.karmada.io/unreachable`` (NoExecute, ``--default-not-ready-toleration-seconds``
  and ``--default-unreachable-toleration-seconds``, 300 s) unless it has one
  (``pkg/webhook/propagationpolicy/mutating.go``, ``helper.AddTolerations``). Here that
  default is the service's failover grace (``federation serve --failover-grace``), and it
  is added where the job's own tolerations do not already tolerate the taint.

The service puts ``cluster.karmada.io/unreachable:NoExecute`` on a cluster whose agent has
been silent past the agent grace period (``service/agent_hub.py``), and admins put any
taint with ``fedctl cluster taint``. "Leaving" is requeueing the job and withdrawing its
Work (``ClusterRepository.evict``); the planner then places it elsewhere, never on a
cluster whose NoExecute taint it tolerates only for a while
(``PropagationPolicy.placement_tolerations``), so it
cannot bounce back onto the cluster it just left.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from federation.domain.nodes import MAX_TOLERATION_SECONDS, Taint, Toleration

NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"
NO_EXECUTE = "NoExecute"
DEFAULT_FAILOVER_GRACE_SECONDS = 0.0


def unreachable_taint(now: float) -> Taint:
    """The taint the service puts on a cluster whose agent went silent."""
    return Taint(UNREACHABLE, "", NO_EXECUTE, time_added=now)


def no_execute(taints: Iterable[Taint]) -> tuple[Taint, ...]:
    return tuple(t for t in taints if t.effect == NO_EXECUTE)


def evicting_taints(taints: Iterable[Taint], lost: bool, last_heard: float) -> tuple[Taint, ...]:
    """A cluster's NoExecute taints (the agent's, the service's and the admins'). A lost
    cluster always carries ``unreachable``: one declared lost before this taint existed,
    or by ``mark_lost``, counts from ``last_heard``, when its agent was last heard."""
    out = no_execute(taints)
    if lost and not any(t.key == UNREACHABLE for t in out):
        out += (Taint(UNREACHABLE, "", NO_EXECUTE, time_added=last_heard),)
    return out


def with_defaults(tolerations: Sequence[Toleration], grace_seconds: float) -> tuple[Toleration, ...]:
    """``tolerations`` plus the default not-ready/unreachable ones (``grace_seconds``) for
    each of the two taints they do not tolerate already (Karmada's ``AddTolerations``)."""
    out = list(tolerations)
    seconds = min(MAX_TOLERATION_SECONDS, max(0, round(grace_seconds)))
    for key in (NOT_READY, UNREACHABLE):
        if not any(t.tolerates(Taint(key, "", NO_EXECUTE)) for t in tolerations):
            out.append(Toleration(key, "Exists", "", NO_EXECUTE, seconds=seconds))
    return tuple(out)


@dataclass(frozen=True)
class Verdict:
    """When a job must leave a cluster: ``at`` (None: it may stay for ever) and why."""

    at: float | None
    reason: str = ""


STAYS = Verdict(None)


def _added(taint: Taint, now: float) -> float:
    return taint.time_added if taint.time_added is not None else now


def eviction(taints: Sequence[Taint], tolerations: Sequence[Toleration], grace_seconds: float,
             now: float) -> Verdict:
    """When a job with ``tolerations`` (its policy's clusterTolerations) must leave a
    cluster carrying ``taints``; pure. A taint without ``time_added`` counts from ``now``."""
    evicting = no_execute(taints)
    if not evicting:
        return STAYS
    tols = with_defaults(tolerations, grace_seconds)
    best = STAYS
    for taint in evicting:
        used = next((t for t in tols if t.tolerates(taint)), None)
        name = f"{taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect}"
        if used is None:
            return Verdict(_added(taint, now), f"taint {name} not tolerated")
        if used.seconds is None:
            continue
        at = _added(taint, now) + max(0, used.seconds)
        why = (f"taint {name} tolerated for {used.seconds}s (tolerationSeconds)" if used in tolerations
               else f"taint {name}: failover grace {used.seconds}s")
        if best.at is None or at < best.at:
            best = Verdict(at, why)
    return best
