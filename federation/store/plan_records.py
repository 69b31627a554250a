"""Turn a planner's ``Plan`` into what ``AuditRepository.record_round`` writes.

Pure functions, so the round loop does not have to know the audit's shape and the
mapping (placed → placed with cluster and domain; unplaced → still pending with reason,
an ``Unschedulable`` or ``Waiting`` event; preempted → back to pending) is decided in
one place next to the store that enforces it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from federation.domain.plans import FederationSnapshot, Plan
from federation.domain.states import JobState, pending_event
from federation.domain.works import work_payload
from federation.store.records import Decision, JobUpdate, QueueCounts, RoundRecord


def decisions_from_plan(plan: Plan) -> tuple[Decision, ...]:
    out: list[Decision] = []
    for p in plan.placements:
        out.append(Decision(job=p.job, outcome="placed", cluster=p.cluster, hypernode=p.hypernode, tier=p.tier,
                            pods=p.pods, score_terms=dict(plan.score_terms.get(p.job, {}))))
    for u in plan.unplaced:
        out.append(Decision(job=u.job, outcome="unplaced", reason=u.reason, constraint=u.constraint,
                            closest_cluster=u.closest_cluster, score_terms=dict(plan.score_terms.get(u.job, {}))))
    for v in plan.preemptions:
        out.append(Decision(job=v.job, outcome="preempted", reason=v.reason, preemptor=v.preemptor))
    return tuple(out)


def updates_from_plan(plan: Plan, versions: Mapping[str, int] | None = None) -> tuple[JobUpdate, ...]:
    """Job changes for a plan; ``versions`` (job → version the planner read) makes each
    update conditional, so jobs changed during the round are skipped instead of clobbered.
    A placement carries its Work's payload, written in the same transaction."""
    seen = versions or {}
    out: list[JobUpdate] = []
    for v in plan.preemptions:
        out.append(JobUpdate(job=v.job, state=JobState.PENDING, reason=v.reason, event="Preempted",
                             expected_version=seen.get(v.job)))
    for p in plan.placements:
        out.append(JobUpdate(job=p.job, state=JobState.PLACED, cluster=p.cluster, hypernode=p.hypernode, tier=p.tier,
                             expected_version=seen.get(p.job), work=work_payload(p)))
    for u in plan.unplaced:
        out.append(JobUpdate(job=u.job, reason=u.reason, unschedulable=u.unschedulable,
                             expected_version=seen.get(u.job), event=pending_event(u.unschedulable)))
    return tuple(out)


def queue_counts(plan: Plan, snapshot: FederationSnapshot) -> tuple[QueueCounts, ...]:
    """The round's counts split by queue (what each tenant may see of the round): pending
    jobs of the snapshot, and the plan's placements, unplaced jobs and victims, each
    counted in its job's queue. Sums over all queues equal the round's totals."""
    queue_of = {p.job.name: p.job.queue for p in snapshot.pending}
    queue_of.update((r.job.name, r.job.queue) for r in snapshot.running)
    pending = Counter(p.job.queue for p in snapshot.pending)
    placed = Counter(queue_of.get(p.job, "") for p in plan.placements)
    unplaced = Counter(queue_of.get(u.job, "") for u in plan.unplaced)
    preempted = Counter(queue_of.get(v.job, "") for v in plan.preemptions)
    names = sorted(set(pending) | set(placed) | set(unplaced) | set(preempted))
    return tuple(QueueCounts(q, pending[q], placed[q], unplaced[q], preempted[q]) for q in names)


def round_from_plan(
    plan: Plan,
    *,
    started_at: datetime,
    ended_at: datetime,
    trigger: str = "",
    policy: str = "",
    input_digest: str = "",
    pending_count: int = 0,
    queue_counts: Sequence[QueueCounts] = (),
) -> RoundRecord:
    return RoundRecord(
        started_at=started_at, ended_at=ended_at, trigger=trigger, policy=policy, solver_status=plan.status,
        objective=plan.objective, bound=plan.bound, input_digest=input_digest, pending_count=pending_count,
        placed_count=len(plan.placements), unplaced_count=len(plan.unplaced),
        preempted_count=len(plan.preemptions), solve_seconds=plan.solve_seconds, queue_counts=tuple(queue_counts),
    )
