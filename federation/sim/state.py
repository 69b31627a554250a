"""The simulator's mutable view of the federation, and the snapshots it hands to planners.

Planners only ever see immutable ``FederationSnapshot`` values; this module is the one
place that mutates (node usage, health, pending and running jobs). Every placement is
re-checked here against the live state before it is applied, so a buggy or optimistic
planner can lose a placement but never corrupt the simulation (double-booked GPUs would
make every metric meaningless).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from federation.domain.clusters import ClusterSnapshot
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, RunningJob
from federation.domain.queues import Queue
from federation.domain.resources import Resources, total
from federation.placement.eligibility import affinity_terms, cluster_block, pod_allows, tier_limit
from federation.sim.clusters import ClusterSpec
from federation.sim.workload import ScenarioJob


@dataclass
class Run:
    """A job running now; ``epoch`` invalidates the finish event of an earlier run.

    ``progress`` is the fraction of the job's work done by ``since`` (an elastic job's
    speed changes when it grows; simulator.py)."""

    spec: ScenarioJob
    placement: Placement
    requests: Resources
    started_at: float
    ends_at: float
    epoch: int
    tier: int
    progress: float = 0.0
    since: float = 0.0

    @property
    def short(self) -> bool:
        """An elastic job running fewer pods than its replicas (it may grow)."""
        return len(self.placement.pods) < self.spec.job.total_replicas


@dataclass
class ClusterState:
    spec: ClusterSpec
    healthy: bool = True
    not_ready: set[str] = field(default_factory=set)
    used: dict[str, Resources] = field(default_factory=dict)
    _nodes: dict[str, Node] = field(default_factory=dict)  # snapshot nodes, dropped when they change

    def free(self, node: Node) -> Resources:
        return node.allocatable - self.used.get(node.name, Resources())

    def touch(self, node: str) -> None:
        """Forget the cached snapshot node after its usage or readiness changed."""
        self._nodes.pop(node, None)

    def node(self, n: Node) -> Node:
        found = self._nodes.get(n.name)
        if found is None:
            found = Node(n.name, n.allocatable, self.free(n), n.labels, n.taints, ready=n.name not in self.not_ready)
            self._nodes[n.name] = found
        return found

    def snapshot(self, now: float) -> ClusterSnapshot:
        nodes = tuple(self.node(n) for n in self.spec.nodes)
        return rebuilt(self.spec.empty, nodes, self.healthy, now)

    def usable_capacity(self) -> Resources:
        if not self.healthy:
            return Resources()
        return total(n.allocatable for n in self.spec.nodes if n.name not in self.not_ready)


def rebuilt(template: ClusterSnapshot, nodes: tuple[Node, ...], healthy: bool, now: float) -> ClusterSnapshot:
    """``template`` with new node states, reusing its already-validated HyperNode tree.

    The tree depends only on node names and labels, which never change during a run, so
    re-resolving every HyperNode selector each round (what ``ClusterSnapshot.__init__``
    does) would only cost time. The copy is a genuine frozen ``ClusterSnapshot``.
    """
    snap = object.__new__(ClusterSnapshot)
    for name, value in (
        ("name", template.name), ("nodes", nodes), ("hypernodes", template.hypernodes),
        ("labels", template.labels), ("taints", template.taints), ("healthy", healthy), ("taken_at", now),
        ("tree", template.tree),
    ):
        object.__setattr__(snap, name, value)
    return snap


class FederationState:
    """Clusters, queues, pending and running jobs at the simulated instant ``now``."""

    def __init__(self, clusters: tuple[ClusterSpec, ...], queues: tuple[Queue, ...],
                 holdable: Callable[[str], bool] = lambda _: True) -> None:
        self.clusters = {c.name: ClusterState(c) for c in clusters}
        self.queues = queues
        self.queue_by_name = {q.name: q for q in queues}
        self.pending: list[tuple[float, int, ScenarioJob]] = []  # (submitAt, arrival order, job)
        self.running: dict[str, Run] = {}
        self.node_cluster = {n.name: c.name for c in clusters for n in c.nodes}
        self.order: dict[str, int] = {}
        # Kept incrementally because metrics sample them after every event.
        self.holdable = holdable
        self.queue_usage: dict[str, Resources] = {}
        self.pending_demand: dict[str, Resources] = {}
        self.used_gpus = 0
        self._requests: dict[str, Resources] = {}

    # -- snapshots ---------------------------------------------------------------
    def snapshot(self, now: float) -> FederationSnapshot:
        return FederationSnapshot(
            clusters=tuple(c.snapshot(now) for c in self.clusters.values()),
            queues=self.queues,
            pending=tuple(PendingJob(job.job, submitted) for submitted, _, job in self.pending),
            running=tuple(RunningJob(r.spec.job, r.placement, r.started_at) for r in self.running.values()),
            now=now,
        )

    def usable_capacity(self) -> Resources:
        return total(c.usable_capacity() for c in self.clusters.values())

    def usage_by_queue(self) -> dict[str, Resources]:
        return {q: r for q, r in self.queue_usage.items() if r}

    def demand_by_queue(self) -> dict[str, Resources]:
        """Running usage plus the requests of pending jobs an empty federation could hold."""
        out = dict(self.usage_by_queue())
        for queue, want in self.pending_demand.items():
            if want:
                out[queue] = out.get(queue, Resources()) + want
        return out

    def _job_requests(self, job: ScenarioJob) -> Resources:
        name = job.job.name
        if name not in self._requests:
            self._requests[name] = job.job.requests
        return self._requests[name]

    def _shift_demand(self, job: ScenarioJob, sign: int) -> None:
        if not self.holdable(job.job.name):
            return
        queue = job.job.queue
        have = self.pending_demand.get(queue, Resources())
        req = self._job_requests(job)
        self.pending_demand[queue] = have + req if sign > 0 else have - req

    # -- pending -----------------------------------------------------------------
    def enqueue(self, job: ScenarioJob) -> None:
        """Add (or return) a job to the pending list, kept in original submission order."""
        order = self.order.setdefault(job.job.name, len(self.order))
        bisect.insort(self.pending, (job.submit_at, order, job), key=lambda e: (e[0], e[1]))
        self._shift_demand(job, +1)

    def dequeue(self, name: str) -> ScenarioJob | None:
        for i, (_, _, job) in enumerate(self.pending):
            if job.job.name == name:
                del self.pending[i]
                self._shift_demand(job, -1)
                return job
        return None

    def pending_job(self, name: str) -> ScenarioJob | None:
        for _, _, job in self.pending:
            if job.job.name == name:
                return job
        return None

    # -- placement ---------------------------------------------------------------
    def check(self, spec: ScenarioJob, placement: Placement) -> str | None:
        """Why ``placement`` cannot be applied to the live state now (None: it can)."""
        job = spec.job
        state = self.clusters.get(placement.cluster)
        if state is None:
            return f"unknown cluster {placement.cluster!r}"
        snap = state.spec.empty
        if not state.healthy:
            return f"cluster {placement.cluster} is down"
        if all(cluster_block(job, snap, term) is not None for term in affinity_terms(job)):
            return f"cluster {placement.cluster} is not allowed for the job (affinity/taints)"
        if not placement.pods:
            return "placement has no pods"
        seen: set[tuple[str, int]] = set()
        replicas = {t.name: t.replicas for t in job.tasks}
        for pod in placement.pods:
            if pod.task not in replicas or not 0 <= pod.index < replicas[pod.task]:
                return f"unknown pod {pod.task}[{pod.index}]"
            if (pod.task, pod.index) in seen:
                return f"pod {pod.task}[{pod.index}] assigned twice"
            seen.add((pod.task, pod.index))
        if len(seen) < job.gang_size:
            return f"gang needs {job.gang_size} pods, placement has {len(seen)}"
        nodes = {n.name: n for n in snap.nodes}
        want: dict[str, Resources] = {}
        for pod in placement.pods:
            if pod.node not in nodes:
                return f"node {pod.node!r} is not in cluster {placement.cluster}"
            if pod.node in state.not_ready:
                return f"node {pod.node} is not ready"
            if not pod_allows(job, pod.task, nodes[pod.node]):  # what a kubelet refuses on admission
                return f"node {pod.node} is excluded by the node constraints of task {pod.task}"
            want[pod.node] = want.get(pod.node, Resources()) + job.task(pod.task).resources
        for name, need in want.items():
            if not need.fits_in(state.free(nodes[name])):
                return f"pods do not fit on node {name}"
        domain = snap.tree.domains.get(placement.hypernode)
        if domain is None:
            return f"unknown HyperNode {placement.hypernode!r} in cluster {placement.cluster}"
        if not set(want) <= domain.nodes:
            return f"pods leave HyperNode {placement.hypernode}"
        limit = tier_limit(job, snap)
        if limit is not None and self.gang_tier(placement) > limit:
            return f"hard topology: gang spans tier {self.gang_tier(placement)} > highestTierAllowed {limit}"
        queue = self.queue_by_name.get(job.queue)
        if queue is not None and queue.capability is not None:
            more = self.requests(spec, placement)
            used = self.queue_usage.get(job.queue, Resources()) + more
            over = {k: f"{used.get(k)} > {cap}" for k, cap in queue.capability if more.get(k) > 0 and used.get(k) > cap}
            if over:
                return f"queue {job.queue} capability would be exceeded ({over})"
        return None

    def requests(self, spec: ScenarioJob, placement: Placement) -> Resources:
        return total(spec.job.task(p.task).resources for p in placement.pods)

    def gang_tier(self, placement: Placement) -> int:
        """Tier of the lowest domain holding every node the gang uses."""
        return self.clusters[placement.cluster].spec.empty.tree.tier_holding(p.node for p in placement.pods)

    def start(self, spec: ScenarioJob, placement: Placement, now: float, runtime: float, epoch: int) -> Run:
        state = self.clusters[placement.cluster]
        for pod in placement.pods:
            res = spec.job.task(pod.task).resources
            state.used[pod.node] = state.used.get(pod.node, Resources()) + res
            state.touch(pod.node)
        run = Run(spec, placement, self.requests(spec, placement), now, now + runtime, epoch, self.gang_tier(placement),
                  since=now)
        self.running[spec.job.name] = run
        queue = spec.job.queue
        self.queue_usage[queue] = self.queue_usage.get(queue, Resources()) + run.requests
        self.used_gpus += run.requests.gpus
        return run

    def check_growth(self, growth: Placement) -> str | None:
        """Why ``growth`` (added pods of a running job) cannot be applied now (None: it can)."""
        run = self.running.get(growth.job)
        if run is None:
            return "job is not running"
        was = run.placement
        if (growth.cluster, growth.hypernode) != (was.cluster, was.hypernode):
            return f"growth moves the job to {growth.cluster}/{growth.hypernode}"
        have = {(a.task, a.index) for a in was.pods}
        if not growth.pods or any((a.task, a.index) in have for a in growth.pods):
            return "growth repeats a running pod"
        whole = replace(was, pods=was.pods + growth.pods)
        used = self.clusters[was.cluster].used
        # Check the whole placement with the job's running pods' room given back.
        for a in was.pods:
            used[a.node] = used[a.node] - run.spec.job.task(a.task).resources
        try:
            queue = run.spec.job.queue
            self.queue_usage[queue] = self.queue_usage[queue] - run.requests
            return self.check(run.spec, whole)
        finally:
            self.queue_usage[queue] = self.queue_usage[queue] + run.requests
            for a in was.pods:
                used[a.node] = used.get(a.node, Resources()) + run.spec.job.task(a.task).resources

    def grow(self, growth: Placement) -> Run:
        """Add ``growth``'s pods to the running job (checked by ``check_growth``)."""
        run = self.running[growth.job]
        state = self.clusters[growth.cluster]
        for pod in growth.pods:
            state.used[pod.node] = state.used.get(pod.node, Resources()) + run.spec.job.task(pod.task).resources
            state.touch(pod.node)
        more = self.requests(run.spec, growth)
        run.placement = replace(run.placement, pods=run.placement.pods + growth.pods)
        run.requests = run.requests + more
        run.tier = self.gang_tier(run.placement)
        queue = run.spec.job.queue
        self.queue_usage[queue] = self.queue_usage.get(queue, Resources()) + more
        self.used_gpus += more.gpus
        return run

    def stop(self, name: str) -> Run | None:
        """Remove a running job and free its resources."""
        run = self.running.pop(name, None)
        if run is None:
            return None
        queue = run.spec.job.queue
        self.queue_usage[queue] = self.queue_usage[queue] - run.requests
        self.used_gpus -= run.requests.gpus
        state = self.clusters[run.placement.cluster]
        for pod in run.placement.pods:
            state.touch(pod.node)
            left = state.used[pod.node] - run.spec.job.task(pod.task).resources
            if left:
                state.used[pod.node] = left
            else:
                del state.used[pod.node]
        return run

    def runs_on_node(self, node: str) -> list[str]:
        return sorted(name for name, r in self.running.items() if any(p.node == node for p in r.placement.pods))

    def runs_in_cluster(self, cluster: str) -> list[str]:
        return sorted(name for name, r in self.running.items() if r.placement.cluster == cluster)
