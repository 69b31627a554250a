"""Work generation: one versioned Work per placed job, for the cluster it was placed in.

Why a Work per job (and not per task or per pod): a gang is placed whole in one cluster
and must be realised whole there, so the unit the agent applies, versions and withdraws is
the job. The store numbers versions (``WorkRepository.create`` takes the job's next
version and withdraws the older active work in the same transaction); this module only
decides *which* works to create and what they carry.

The payload holds the placement (cluster, HyperNode, tier and the pod→node assignment the
agent may use). The job spec is not copied into it: it is immutable once submitted and
read from the job record when the Work is sent, so a payload stays small.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, Placement, Plan, PodAssignment, Unplaced
from federation.domain.states import BOUND_WORK_STATES
from federation.domain.works import Work, payload_generation, placement_from_payload
from federation.placement.eligibility import affinity_terms, cluster_block


def work_from_payload(work_id: int, job: Job, version: int, payload: Mapping[str, Any]) -> Work:
    """The domain ``Work`` of a stored work: its id, the job spec and the placement it carries."""
    return Work(str(work_id), job, version, placement_from_payload(job.name, payload),
                generation=payload_generation(payload))


def growing_pods(job: str, payload: Mapping[str, Any]) -> tuple[PodAssignment, ...]:
    """Pods a growth added that the agent has not yet reported bound (their room must be
    held by the planner even when the cluster's snapshot reflects the rest of the job)."""
    return placement_from_payload(job, {"pods": payload.get("growing", ())}).pods


def admissible(job: Job, cluster: ClusterSnapshot) -> str | None:
    """Why ``job`` must not be propagated to ``cluster`` (a BLOCKED_BY name), or None.

    A defensive re-check at the edge: the planner already honours the propagation policy,
    but a Work is what actually lands pods in a cluster, so a planner bug must not be able
    to put a job where its policy forbids. Any one affinity term admitting the cluster is
    enough (ordered ``clusterAffinities`` fall back term by term).
    """
    reasons = [cluster_block(job, cluster, term) for term in affinity_terms(job)]
    if any(r is None for r in reasons):
        return None
    return reasons[0] or "affinity"


def refuse_inadmissible(plan: Plan, snapshot: FederationSnapshot) -> tuple[Plan, tuple[tuple[str, str, str], ...]]:
    """The plan with every placement its propagation policy forbids turned into an unplaced
    decision, and the refused ``(job, cluster, reason)``.

    Never expected (the planner honours the policy), but the round records a placement and
    its Work together, so the check is made before recording: a refused placement is
    neither placed nor dispatched, and the next round plans the job again.
    """
    jobs = {p.job.name: p.job for p in snapshot.pending}
    refused: list[tuple[str, str, str]] = []
    kept: list[Placement] = []
    for placement in plan.placements:
        job, cluster = jobs.get(placement.job), snapshot.cluster(placement.cluster)
        blocked = admissible(job, cluster) if job is not None and cluster is not None else None
        if blocked is None:
            kept.append(placement)
        else:
            refused.append((placement.job, placement.cluster, blocked))
    if not refused:
        return plan, ()
    unplaced = tuple(
        Unplaced(job, f"placement in {cluster} refused: its propagation policy forbids it ({why})", "propagation")
        for job, cluster, why in refused)
    return replace(plan, placements=tuple(kept), unplaced=plan.unplaced + unplaced), tuple(refused)


def reflected_in_snapshot(work_state: str | None, work_updated: datetime | None,
                          snapshot_received: datetime | None) -> bool:
    """True when the cluster's latest snapshot already counts the job's pods on their nodes.

    A snapshot's free resources count only *bound* pods. Between a placement and the first
    snapshot taken after the agent bound the gang, the planner must treat the room as taken
    or it would place a second gang on it. The agent reports the binding (work state
    ``bound``) before it sends the snapshot built after binding, on the same ordered
    stream, so "the work was seen bound before the snapshot was received" means the
    snapshot reflects it. Anything else is treated as not yet reflected (conservative).
    """
    if work_state not in BOUND_WORK_STATES or work_updated is None or snapshot_received is None:
        return False
    return work_updated <= snapshot_received
