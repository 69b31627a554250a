"""What the demo has observed through the public API: the model behind the view and the report.

Everything here is filled from the same gRPC calls ``fedctl`` makes (ListClusters,
ListJobs, ExplainJob, WatchJobs), plus the demo's own log of the faults it injected. The
per-queue shares are computed with ``federation.placement.fairshare`` — the definition
the planner and the bench metric use — over the jobs the API reports as holding
resources, and sampled over simulated time so the report can give time-weighted means.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from federation.domain.queues import Queue
from federation.domain.resources import GPU, Resources, total
from federation.placement.fairshare import dominant_share, fair_shares
from federation.sim.scenario import Scenario
from federation.sim.tracking import feasibility
from federation.v1 import clusters_pb2, jobs_pb2

HOLDING = frozenset({jobs_pb2.JOB_STATE_PLACED, jobs_pb2.JOB_STATE_DISPATCHED, jobs_pb2.JOB_STATE_RUNNING})
TERMINAL = frozenset({jobs_pb2.JOB_STATE_SUCCEEDED, jobs_pb2.JOB_STATE_FAILED, jobs_pb2.JOB_STATE_CANCELLED})
DECISIONS = frozenset({"PLACED", "PREEMPTED", "UNSCHEDULABLE", "WAITING"})
RECOVERY = frozenset({"RESTARTED", "REQUEUED", "FAILED", "FAULT"})


@dataclass(frozen=True)
class ClusterView:
    name: str
    fabric: str
    health: str  # healthy | unhealthy | lost | down (agent stopped, not yet declared lost)
    gpus: int
    gpus_used: int
    nodes: int
    ready_nodes: int
    active_jobs: int


@dataclass(frozen=True)
class QueueView:
    name: str
    weight: int
    running: int
    pending: int
    gpus: int
    share: float
    fair: float


@dataclass(frozen=True)
class EventLine:
    at: float  # simulated seconds
    kind: str  # PLACED, RUNNING, SUCCEEDED, RESTARTED, REQUEUED, FAULT, ...
    job: str
    text: str


@dataclass(frozen=True)
class ShareSample:
    at: float
    shares: Mapping[str, tuple[float, float]]  # queue -> (dominant share, fair share)


def _gpus(quantities: Mapping[str, str]) -> int:
    try:
        return Resources.parse({GPU: quantities.get(GPU, "0")}).gpus
    except ValueError:
        return 0


def cluster_view(msg: clusters_pb2.Cluster, down: bool) -> ClusterView:
    health = clusters_pb2.ClusterHealth.Name(msg.health).removeprefix("CLUSTER_HEALTH_").lower()
    if down and health != "lost":
        health = "down"
    snap = msg.last_snapshot
    gpus = _gpus(snap.allocatable)
    return ClusterView(msg.name, msg.labels.get("fabric", ""), health, gpus, max(0, gpus - _gpus(snap.free)),
                       snap.nodes, snap.ready_nodes, msg.active_jobs)


def event_line(at: float, ev: jobs_pb2.JobEvent) -> EventLine:
    kind = jobs_pb2.JobEventType.Name(ev.type).removeprefix("JOB_EVENT_TYPE_")
    job = ev.job
    if kind == "UNSCHEDULABLE" and not job.unschedulable:
        kind = "WAITING"  # the round could not place it now; it stays pending
    if kind == "PLACED":
        text = (f"placed on {job.cluster}/{job.hypernode or '-'} (tier {job.tier})" if job.cluster
                else "placed (since withdrawn: see the events that follow)")
    elif kind == "RUNNING":
        text = f"running on {job.cluster}"
    elif kind == "SUCCEEDED":
        text = "succeeded"
    else:
        text = ev.message or kind.lower()
    return EventLine(at, kind, job.spec.name, text)


@dataclass
class DemoState:
    """The latest observation, the event feed and the share samples."""

    scenario: Scenario
    address: str = ""
    speed: float = 1.0
    sim_now: float = 0.0
    wall: float = 0.0
    submitted: int = 0
    clusters: list[ClusterView] = field(default_factory=list)
    queues: list[QueueView] = field(default_factory=list)
    jobs: dict[str, jobs_pb2.Job] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # pending job -> ExplainJob reason
    events: list[EventLine] = field(default_factory=list)
    recent: deque[EventLine] = field(default_factory=lambda: deque(maxlen=12))
    samples: list[ShareSample] = field(default_factory=list)
    done: bool = False
    never: frozenset[str] = frozenset()  # jobs no allowed cluster could hold even empty

    def __post_init__(self) -> None:
        self.never = frozenset(name for name, f in feasibility(self.scenario).items() if not f.holdable)

    def settled(self, job: jobs_pb2.Job) -> bool:
        """Terminal, or pending with the unschedulable verdict for a job the scenario says no
        cluster could ever hold (a job held back only while its cluster is lost is waited for)."""
        return job.state in TERMINAL or (job.unschedulable and job.spec.name in self.never)

    @property
    def total(self) -> int:
        return len(self.scenario.jobs)

    @property
    def finished(self) -> int:
        return sum(1 for j in self.jobs.values() if self.settled(j))

    def add(self, line: EventLine) -> None:
        self.events.append(line)
        self.recent.append(line)

    def pending(self) -> list[jobs_pb2.Job]:
        return [j for j in self.jobs.values() if j.state == jobs_pb2.JOB_STATE_PENDING]

    def update_jobs(self, jobs: Iterable[jobs_pb2.Job], clusters: Sequence[ClusterView]) -> None:
        self.jobs = {j.spec.name: j for j in jobs}
        self.clusters = list(clusters)
        self.queues = self._queues()
        self.samples.append(ShareSample(self.sim_now, {q.name: (q.share, q.fair) for q in self.queues}))

    def _queues(self) -> list[QueueView]:
        specs = {j.job.name: j.job for j in self.scenario.jobs}
        usage: dict[str, Resources] = {}
        demand: dict[str, Resources] = {}
        running: dict[str, int] = {}
        pending: dict[str, int] = {}
        for name, job in self.jobs.items():
            spec = specs.get(name)
            if spec is None:
                continue
            q = spec.queue
            if job.state in HOLDING:
                usage[q] = usage.get(q, Resources()) + spec.requests
                demand[q] = demand.get(q, Resources()) + spec.requests
                running[q] = running.get(q, 0) + 1
            elif job.state == jobs_pb2.JOB_STATE_PENDING and not job.unschedulable:
                demand[q] = demand.get(q, Resources()) + spec.requests
                pending[q] = pending.get(q, 0) + 1
        capacity = self.capacity()
        queues: Sequence[Queue] = self.scenario.queues
        fair = fair_shares(queues, demand, capacity) if capacity else {q.name: 0.0 for q in queues}
        return [QueueView(q.name, q.weight, running.get(q.name, 0), pending.get(q.name, 0),
                          usage.get(q.name, Resources()).gpus,
                          dominant_share(usage.get(q.name, Resources()), capacity) if capacity else 0.0,
                          fair.get(q.name, 0.0))
                for q in queues]

    def capacity(self) -> Resources:
        """What the clusters that are not lost offer (the planner plans over the same)."""
        live = {c.name for c in self.clusters if c.health != "lost"}
        return total(n.allocatable for c in self.scenario.clusters if c.name in live for n in c.nodes)
