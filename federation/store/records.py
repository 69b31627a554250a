"""What the repositories take and return: frozen dataclasses, no SQLAlchemy.

Why separate from the models: callers (servicers, the round loop, the agent hub) must
not hold ORM rows that lazily touch a closed session, and a frozen record can be passed
between threads and tasks freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from federation.domain.jobs import Job
from federation.domain.nodes import Taint
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.states import ACTIVE_STATES, ACTIVE_WORK_STATES, TERMINAL_STATES

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a keyset-paged listing; ``next_token`` is empty on the last page."""

    items: tuple[T, ...]
    next_token: str = ""


@dataclass(frozen=True)
class JobRecord:
    """A job as stored: its spec plus where it is in its life."""

    name: str
    queue: str
    tenant: str
    job: Job
    spec_digest: str
    state: str
    unschedulable: bool
    reason: str
    message: str
    cluster: str | None
    hypernode: str | None
    tier: int | None
    restarts: int
    created_at: datetime
    updated_at: datetime
    version: int
    # When it is deleted under its ttlSecondsAfterFinished (set once it finished; else None).
    expires_at: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def active(self) -> bool:
        """Placed, dispatched or running: holding capacity in ``cluster``."""
        return self.state in ACTIVE_STATES


@dataclass(frozen=True)
class Submitted:
    """Result of a submission: ``created`` is False for an identical resubmission."""

    record: JobRecord
    created: bool


@dataclass(frozen=True)
class JobEvent:
    """One entry of the WatchJobs feed; ``state`` is the job's state after the event."""

    id: int
    job: str
    queue: str
    type: str
    state: str
    message: str
    time: datetime


@dataclass(frozen=True)
class EventPage:
    """Events after a cursor; pass ``cursor`` back as ``after_id`` to resume exactly."""

    events: tuple[JobEvent, ...]
    cursor: int


@dataclass(frozen=True)
class QueueUsage:
    """Per-queue job counts by state (for QueueStatus)."""

    queue: str
    counts: Mapping[str, int]

    def count(self, state: str) -> int:
        return self.counts.get(state, 0)


@dataclass(frozen=True)
class SnapshotSummary:
    taken_at: datetime
    nodes: int
    ready_nodes: int
    hypernodes: int
    max_tier: int
    allocatable: Resources
    free: Resources


@dataclass(frozen=True)
class ClusterRecord:
    name: str
    epoch: int
    agent_id: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    healthy: bool
    lost: bool
    registered_at: datetime
    last_heartbeat: datetime
    summary: SnapshotSummary | None
    tree_error: str | None
    active_jobs: int = 0
    admin_taints: tuple[Taint, ...] = ()

    @property
    def all_taints(self) -> tuple[Taint, ...]:
        """What the planner checks clusterTolerations against: the agent's and the admin's."""
        return self.taints + tuple(t for t in self.admin_taints if t not in self.taints)

    @property
    def health(self) -> str:
        """lost | unhealthy | healthy (lateness within the grace period is the caller's call)."""
        if self.lost:
            return "lost"
        return "healthy" if self.healthy else "unhealthy"


@dataclass(frozen=True)
class Registration:
    """Result of an agent hello. ``accepted`` False means the epoch is stale: fenced."""

    cluster: ClusterRecord
    accepted: bool
    previous_epoch: int | None = None


@dataclass(frozen=True)
class ClusterLoss:
    """What marking a cluster lost did, in the same transaction (``marked`` False: it was
    heard from within the window the caller gave, and nothing changed)."""

    cluster: ClusterRecord
    requeued: tuple[str, ...]
    withdrawn_works: tuple[int, ...]
    marked: bool = True


@dataclass(frozen=True)
class WorkRecord:
    id: int
    job: str
    cluster: str
    version: int
    state: str
    message: str
    payload: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_WORK_STATES


@dataclass(frozen=True)
class QueueCounts:
    """One queue's part of a round: its pending jobs and the round's decisions about them.

    Recorded beside the round so a tenant's ``ListRounds`` shows its own queues' counts,
    never the federation's totals (issue 10: counts of other tenants' jobs are theirs)."""

    queue: str
    pending: int = 0
    placed: int = 0
    unplaced: int = 0
    preempted: int = 0


@dataclass(frozen=True)
class RoundRecord:
    """One planning round; ``id`` is 0 until recorded. ``queue_counts`` is written with the
    round (``AuditRepository.record_round``) and not read back by ``list_rounds``."""

    started_at: datetime
    ended_at: datetime
    trigger: str = ""
    policy: str = ""
    solver_status: str = ""
    objective: float = 0.0
    bound: float = 0.0
    input_digest: str = ""
    pending_count: int = 0
    placed_count: int = 0
    unplaced_count: int = 0
    preempted_count: int = 0
    solve_seconds: float = 0.0
    id: int = 0
    queue_counts: tuple[QueueCounts, ...] = ()


@dataclass(frozen=True)
class Decision:
    """One round's decision about one job: ``outcome`` is placed | unplaced | preempted."""

    job: str
    outcome: str
    cluster: str | None = None
    hypernode: str | None = None
    tier: int | None = None
    pods: tuple[PodAssignment, ...] = ()
    score_terms: Mapping[str, float] = field(default_factory=dict)
    reason: str = ""
    constraint: str = ""
    closest_cluster: str | None = None
    preemptor: str | None = None


@dataclass(frozen=True)
class DecisionRecord:
    id: int
    round: RoundRecord
    decision: Decision


@dataclass(frozen=True)
class JobUpdate:
    """A job change a round makes, written in the round's transaction.

    ``state`` None keeps the state and only records ``reason``/``unschedulable`` (an
    unplaced job). ``expected_version`` is the version the planner saw: when the job
    changed since (cancelled mid-round, say), the update is skipped and reported rather
    than failing the whole round. ``event`` overrides the event type (e.g. Preempted).

    ``work`` is the payload of the Work a placement creates (``domain.works.work_payload``):
    a move to ``placed`` must carry it, and the Work row is written in the same
    transaction as the job's placement and the round's decisions, so no crash can leave a
    placed job without its Work, or a Work for a job the round did not place.
    """

    job: str
    state: str | None = None
    reason: str = ""
    unschedulable: bool = False
    cluster: str | None = None
    hypernode: str | None = None
    tier: int | None = None
    expected_version: int | None = None
    event: str | None = None
    work: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RoundResult:
    """The recorded round's id, which job updates were applied or skipped as stale, the
    works withdrawn because their jobs were preempted, and the works created for the jobs
    it placed (tell the agents of both)."""

    round_id: int
    applied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    withdrawn_works: tuple[int, ...] = ()
    created_works: tuple[WorkRecord, ...] = ()
