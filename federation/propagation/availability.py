"""'Unavailable' is not 'impossible': a pending job whose allowed clusters are down waits.

The planner decides ``Unplaced.unschedulable`` — no allowed cluster could ever hold the
job, even empty — over the clusters it may use *now*, and a lost or unhealthy cluster is
not one of them (``placement.eligibility.cluster_block``). So a job whose only allowed
cluster was lost was marked unschedulable, although it is placed again the moment the
cluster returns. 'Could ever hold' must range over every registered cluster, lost ones
included (their last valid snapshot), and a cluster not yet reporting (no snapshot) must
count as unknown, never as too small.

This pure step runs on the service side after the planner: when no *available* allowed
cluster could ever hold a job but an unavailable one could (or might: unknown size), the
job is ``Waiting`` with the reason "allowed clusters unavailable: …" instead of
unschedulable. It reuses the planner's own eligibility functions with the cluster's
health set aside, so the rule cannot drift from the planner's. When the planner learns
to tell the two apart itself (it is given the lost clusters as ``healthy=False``), this
step agrees with it and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, Plan, Unplaced
from federation.placement.eligibility import affinity_terms, can_ever_hold, cluster_block

UNAVAILABLE_REASON = "allowed clusters unavailable: {clusters}; it is placed when one returns"


def _admits(job: Job, cluster: ClusterSnapshot, memo: dict[tuple[object, str], bool] | None = None) -> bool:
    """The job's propagation policy admits ``cluster`` (any affinity term; tolerations).

    It depends on the job only through ``job.propagation`` (``cluster_block``), so
    ``memo`` keeps one answer per (policy, cluster) for a whole round: a backlog of
    similar jobs times many clusters was the round's largest cost with 50 registered
    clusters (the fan-out benchmark, docs/benchmarks.md)."""
    if memo is None:
        return any(cluster_block(job, cluster, term) is None for term in affinity_terms(job))
    key = (job.propagation, cluster.name)
    found = memo.get(key)
    if found is None:
        found = memo[key] = any(cluster_block(job, cluster, term) is None for term in affinity_terms(job))
    return found


def _could_hold(job: Job, cluster: ClusterSnapshot, known: bool) -> bool:
    return not known or can_ever_hold(job, cluster)


def waiting_for(job: Job, available: Iterable[ClusterSnapshot], unavailable: Sequence[tuple[ClusterSnapshot, bool]],
                why: Mapping[str, str], memo: dict[tuple[object, str], bool] | None = None) -> Unplaced | None:
    """The ``Waiting`` verdict for ``job`` when only unavailable clusters could hold it, else None.

    ``unavailable`` holds each unavailable cluster as if healthy, with whether its size is
    known (a last valid snapshot) or not (registered, nothing reported yet).
    """
    if any(_admits(job, c, memo) and can_ever_hold(job, c) for c in available):
        return None  # an available cluster could hold it: the planner's reason stands
    names = [c.name for c, known in unavailable if _admits(job, c, memo) and _could_hold(job, c, known)]
    if not names:
        return None
    listed = ", ".join(f"{n} ({why.get(n, 'unavailable')})" for n in names)
    return Unplaced(job.name, UNAVAILABLE_REASON.format(clusters=listed), "capacity", names[0], unschedulable=False)


def with_availability(plan: Plan, snapshot: FederationSnapshot, unknown: Sequence[ClusterSnapshot] = (),
                      why: Mapping[str, str] | None = None) -> Plan:
    """``plan`` with every unplaced job that only unavailable clusters could hold turned
    into ``Waiting`` (see the module doc). ``snapshot`` holds the available clusters and
    the unavailable ones with a last valid snapshot (``healthy=False``); ``unknown`` the
    registered clusters with no snapshot yet; ``why`` says, per cluster, why it is
    unavailable (lost, unhealthy, no snapshot yet)."""
    down = [c for c in snapshot.clusters if not c.healthy]
    if not plan.unplaced or not (down or unknown):
        return plan
    available = [c for c in snapshot.clusters if c.healthy]
    unavailable = [(replace(c, healthy=True), True) for c in down]
    unavailable += [(replace(c, healthy=True), False) for c in unknown]
    jobs = {p.job.name: p.job for p in snapshot.pending}
    verdicts: list[Unplaced] = []
    memo: dict[tuple[object, str], bool] = {}
    for u in plan.unplaced:
        job = jobs.get(u.job)
        waiting = waiting_for(job, available, unavailable, why or {}, memo) if job is not None else None
        verdicts.append(u if waiting is None else waiting)
    return replace(plan, unplaced=tuple(verdicts))
