"""What the planner reads (a federation snapshot) and returns (a plan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.queues import Queue

# Names of the constraint that blocked an unplaced job (``Unplaced.constraint``).
BLOCKED_BY = (
    "capacity",          # no cluster has room now (pod-level packing)
    "topology",          # hard networkTopology: no domain within the tier limit has room
    "affinity",          # propagation clusterAffinity/affinities exclude every cluster with room
    "taints",            # every candidate cluster is tainted against the job
    "queue-capability",  # the queue's capability would be exceeded
    "fairness",          # capacity is held for queues under their fair share / guarantees
    "priority",          # higher-priority work took the room this round
    "unschedulable",     # no allowed cluster could ever hold it, even empty
    "node-constraints",  # a task's nodeSelector / node affinity / tolerations match no node of any allowed cluster
    "time-limit",        # the solver ran out of time before placing it
)


@dataclass(frozen=True)
class PodAssignment:
    task: str
    index: int
    node: str


@dataclass(frozen=True)
class Placement:
    """A gang placed in one cluster, inside one domain (HyperNode) it must stay in."""

    job: str
    cluster: str
    hypernode: str
    tier: int
    pods: tuple[PodAssignment, ...] = ()


@dataclass(frozen=True)
class RunningJob:
    job: Job
    placement: Placement
    started_at: float = 0.0


@dataclass(frozen=True)
class PendingJob:
    job: Job
    submitted_at: float = 0.0
    # False when the job's PriorityClass says ``preemptionPolicy: Never``: it waits for room
    # and never evicts another gang (Kubernetes non-preempting priority classes).
    may_preempt: bool = True


@dataclass(frozen=True)
class FederationSnapshot:
    """Immutable input of one planning round. ``pending`` is in submission order."""

    clusters: tuple[ClusterSnapshot, ...]
    queues: tuple[Queue, ...]
    pending: tuple[PendingJob, ...] = ()
    running: tuple[RunningJob, ...] = ()
    now: float = 0.0

    def cluster(self, name: str) -> ClusterSnapshot | None:
        for c in self.clusters:
            if c.name == name:
                return c
        return None

    def queue(self, name: str) -> Queue | None:
        for q in self.queues:
            if q.name == name:
                return q
        return None


@dataclass(frozen=True)
class Unplaced:
    job: str
    reason: str
    constraint: str
    closest_cluster: str | None = None
    unschedulable: bool = False


@dataclass(frozen=True)
class Preemption:
    job: str
    reason: str
    preemptor: str | None = None


@dataclass(frozen=True)
class PlanLimits:
    """Knobs of a planning round (the planner may add defaults-only fields)."""

    time_limit_seconds: float = 1.0
    # CP-SAT workers of a large round; a round of at most SMALL_ROUND_JOBS pending jobs
    # (placement/cpsat/windows.py) is searched with one, so it gives the same plan on
    # any host (placement/cpsat/solve._solver).
    workers: int = 2
    seed: int = 0
    # A pending gang may cause preemption or reclaim once it has waited this long (seconds
    # since submission); None never evicts, the default of Volcano and Kueue
    # (docs/design/preemption-and-topology-wait.md).
    preemption_grace_seconds: float | None = None
    # The service default of the opt-in topology wait: a gang with a networkTopology and
    # no wait of its own (job annotation, queue default) holds out this long (since
    # submission) for a domain of the lowest tier that could hold it before the wider
    # domains its constraint allows are offered. 0 (default): Volcano semantics, no gang is
    # held back (docs/design/topology-intent.md, placement/intent.py).
    topology_wait_seconds: float = 0.0
    # A job pending this long that cannot be placed, of a queue well below its fair share,
    # gets the fewest nodes that could hold it kept: jobs of its band and below from queues
    # not short of their share may not start there (placement/reserve.py); None disables.
    reserve_after_seconds: float | None = None
    # A gang of several pods pending this long that cannot be placed gets the nodes it
    # needs held in the domain of its lowest feasible tier closest to holding it: other
    # jobs of its band and below may not start there (placement/admission.py); None disables.
    gang_hold_after_seconds: float | None = None
    # Volcano-style enqueue gate: pending jobs are admitted oldest first (by band) while the
    # admitted jobs' requests fit this factor x healthy capacity - used; the rest wait
    # unplanned this round (placement/admission.py); None admits everything.
    enqueue_overcommit: float | None = None
    # Tier reservation (opt-in; 300 s is the measured setting): a gang a leaf could hold that
    # has waited this long is placed only in a domain of its lowest feasible tier, the nodes
    # it needs held there; other jobs of its band and below may not start on those nodes
    # (placement/tier_reserve.py); None (default) disables: measured neutral to -4 % avg JCT
    # once main's packing change landed (docs/benchmarks.md, issue 12, third session, tiers).
    tier_reserve_after_seconds: float | None = None
    # Wide gangs (no leaf can hold them) that have waited this long take room in age order:
    # a newer one, of the same band or a lower one, may not take the nodes an older one can
    # use this round (placement/wide_order.py); None disables. Default 0: measured on
    # volcano-1cluster's six seeds (docs/benchmarks.md, issue 12, fourth session, tiers2).
    wide_order_after_seconds: float | None = 0.0


@dataclass(frozen=True)
class Plan:
    placements: tuple[Placement, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    status: str = "UNKNOWN"  # OPTIMAL | FEASIBLE | GREEDY | EMPTY | ...
    objective: float = 0.0
    bound: float = 0.0
    solve_seconds: float = 0.0
    score_terms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # Running elastic jobs given more pods this round, inside the HyperNode they already
    # run in: each entry has the job's cluster, HyperNode and tier, and ``pods`` holds the
    # ADDED pods only; the pods that run are never moved (placement/growth.py,
    # docs/design/elastic-gangs.md).
    growths: tuple[Placement, ...] = ()

    def placement(self, job: str) -> Placement | None:
        for p in self.placements:
            if p.job == job:
                return p
        return None
