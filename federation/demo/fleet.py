"""The demo's member clusters: in-memory clusters on one simulated clock, each with a real agent.

Each scenario cluster becomes an ``agents.fake.cluster.FakeCluster`` (nodes and the
cluster's own HyperNode objects) driven by a ``ManualClock`` that the demo advances at
``speed`` simulated seconds per wall second, and a real ``agents.runtime.AgentRuntime``
connected to the central service over gRPC. The agents and the clusters share that clock
(restart-policy timeouts compare pod timestamps with it); the central service keeps the
wall clock, so its lost-agent grace and round latencies are real seconds.

What is simulated here, and only here, is the workload itself: a pod "runs" from the
moment the agent binds it. A gang starts when ``minAvailable`` of its pods run; its
runtime is the scenario's ``durationSeconds`` times the ``commModel`` slowdown for the
tier of the lowest domain holding all its pods (one pod, or all pods on one node: 1.0);
when it is over, every pod of the gang succeeds. A replacement pod (RestartPod after a
pod or node failure) joins the running gang, which keeps its end time (it resumes from a
checkpoint); a job re-placed on another cluster after an outage starts from scratch.

Faults are the scenario's events: ``nodeFail``/``nodeRecover`` flip node readiness,
``podFail`` fails one running pod, ``clusterDown`` stops the cluster's agent (its stream
drops and heartbeats stop, so central declares the cluster lost after its grace) and
freezes the cluster (no pod progresses), ``clusterUp`` starts a new agent (newer epoch)
that central syncs: work re-placed meanwhile is withdrawn from the returning cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from agents.core.records import ANNOTATION_WORK_ID, LABEL_JOB, NodeRecord, PodRecord
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from agents.runtime import AgentRuntime, Fenced, RuntimeConfig
from federation.domain.states import PodPhase
from federation.domain.topology import HyperNodeTree
from federation.sim.clusters import ClusterSpec
from federation.sim.scenario import Scenario

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentTiming:
    """Agent knobs in wall seconds (shrunk so an outage shows within seconds)."""

    heartbeat_seconds: float = 0.5
    snapshot_debounce_seconds: float = 0.1
    snapshot_period_seconds: float = 5.0
    resync_seconds: float = 3.0  # passes run on every watch event; this is only the safety net
    status_period_seconds: float = 10.0
    backoff_initial_seconds: float = 0.2
    backoff_max_seconds: float = 1.0


@dataclass
class JobRun:
    """One realisation of a job: a Work on one cluster, from gang start to its end."""

    job: str
    cluster: str
    work_id: str
    started: float  # simulated seconds since the demo began
    ends: float
    domain: str
    tier: int
    slowdown: float
    nodes: tuple[str, ...]
    finished: float | None = None
    abandoned: float | None = None  # its pods went away before its end (withdrawn, preempted, lost)


@dataclass
class _Agent:
    runtime: AgentRuntime
    task: asyncio.Task[None]


@dataclass
class SimFleet:
    """The scenario's clusters, their agents and the simulated workload's progress."""

    scenario: Scenario
    server: str
    tokens: Mapping[str, str]
    timing: AgentTiming = field(default_factory=AgentTiming)
    clock: ManualClock = field(default_factory=lambda: ManualClock(time.time()))

    def __post_init__(self) -> None:
        self.t0 = self.clock()
        self.specs: dict[str, ClusterSpec] = {c.name: c for c in self.scenario.clusters}
        self.clusters: dict[str, FakeCluster] = {
            c.name: FakeCluster(c.name, [NodeRecord(n.name, n.allocatable, dict(n.labels)) for n in c.nodes],
                                c.hypernodes, clock=self.clock)
            for c in self.scenario.clusters}
        self.trees: dict[str, HyperNodeTree] = {c.name: c.empty.tree for c in self.scenario.clusters}
        self.jobs = {j.job.name: j for j in self.scenario.jobs}
        self.node_cluster = {n.name: c.name for c in self.scenario.clusters for n in c.nodes}
        self.agents: dict[str, _Agent] = {}
        self.down: dict[str, float] = {}  # cluster -> when it went down
        self.failed_nodes: set[str] = set()  # NotReady now
        self.nodes_failed: set[str] = set()  # NotReady at some point of the run
        self.runs: dict[tuple[str, str], JobRun] = {}  # (cluster, work id) -> run

    # ------------------------------------------------------------------ time
    def now(self) -> float:
        """Simulated seconds since the demo began."""
        return self.clock() - self.t0

    def advance(self, seconds: float) -> None:
        """Move simulated time on; pods finish, gangs start and end (frozen while a cluster is down)."""
        self.clock.advance(seconds)
        for name, cluster in self.clusters.items():
            if name not in self.down:
                self._progress(name, cluster)

    def _progress(self, name: str, cluster: FakeCluster) -> None:
        now = self.now()
        gangs: dict[tuple[str, str], list[PodRecord]] = {}
        for pod in cluster.pods():
            job = pod.labels.get(LABEL_JOB)
            if job and pod.node is not None and pod.phase == PodPhase.RUNNING and not pod.deleting:
                gangs.setdefault((job, pod.annotations.get(ANNOTATION_WORK_ID, "")), []).append(pod)
        for (job, work_id), pods in gangs.items():
            spec = self.jobs.get(job)
            if spec is None:
                continue
            run = self.runs.get((name, work_id))
            if run is None:
                if len(pods) < spec.job.gang_size:
                    continue
                run = self._start(name, job, work_id, pods)
            run.abandoned = None
            moved = {p.node for p in pods if p.node is not None} - set(run.nodes)
            if moved:  # a replacement pod (RestartPod after a pod or node failure) landed here
                run.nodes = tuple(sorted({*run.nodes, *moved}))
            if run.finished is None and now >= run.ends:
                run.finished = now
                log.info("demo: gang %s finished on %s/%s at t=%.0f", job, name, run.domain, now)
            if run.finished is not None:
                for pod in pods:
                    cluster.succeed_pod(pod.name, pod.namespace)
        for (cluster_name, work_id), run in self.runs.items():
            if (cluster_name == name and run.finished is None and run.abandoned is None
                    and (run.job, work_id) not in gangs):
                run.abandoned = now
                log.info("demo: gang %s on %s/%s stopped before its end at t=%.0f", run.job, name, run.domain, now)

    def _start(self, cluster: str, job: str, work_id: str, pods: list[PodRecord]) -> JobRun:
        nodes = tuple(sorted({p.node for p in pods if p.node is not None}))
        domain = self.trees[cluster].lowest_domain_holding(nodes)
        tier = domain.tier if domain is not None else 0
        slowdown = self.scenario.gang_slowdown(len(nodes), tier)
        duration = self.jobs[job].duration_seconds * slowdown
        now = self.now()
        run = JobRun(job, cluster, work_id, now, now + duration, domain.name if domain else "", tier, slowdown, nodes)
        self.runs[(cluster, work_id)] = run
        log.info("demo: gang %s (work %s) started on %s/%s (tier %d, x%g) at t=%.0f, ends at t=%.0f", job, work_id,
                 cluster, run.domain, tier, slowdown, now, run.ends)
        return run

    def runs_of(self, job: str) -> list[JobRun]:
        return sorted((r for r in self.runs.values() if r.job == job), key=lambda r: r.started)

    # ------------------------------------------------------------------ agents
    def config(self, name: str) -> RuntimeConfig:
        t = self.timing
        return RuntimeConfig(
            cluster=name, server=self.server, agent_id=f"demo-agent-{name}", token=self.tokens.get(name),
            heartbeat_seconds=t.heartbeat_seconds, snapshot_debounce_seconds=t.snapshot_debounce_seconds,
            snapshot_period_seconds=t.snapshot_period_seconds, resync_seconds=t.resync_seconds,
            status_period_seconds=t.status_period_seconds, backoff_initial_seconds=t.backoff_initial_seconds,
            backoff_max_seconds=t.backoff_max_seconds, cluster_labels=dict(self.specs[name].labels))

    def start_agent(self, name: str) -> AgentRuntime:
        """A new agent process for ``name`` (a newer epoch than any before it)."""
        runtime = AgentRuntime(self.clusters[name], self.config(name), clock=self.clock, epoch=time.time_ns())
        self.agents[name] = _Agent(runtime, asyncio.create_task(self._run(runtime), name=f"demo-agent-{name}"))
        return runtime

    @staticmethod
    async def _run(runtime: AgentRuntime) -> None:
        try:
            await runtime.run()
        except Fenced as exc:
            log.warning("agent of %s fenced: %s", runtime.config.cluster, exc)

    async def stop_agent(self, name: str) -> None:
        agent = self.agents.pop(name, None)
        if agent is None:
            return
        agent.runtime.stop()
        started = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(agent.task), 5.0)
        except TimeoutError:
            log.warning("demo: the agent of %s did not stop within 5 s; cancelling it", name)
            agent.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await agent.task
        log.info("demo: agent of %s stopped in %.2f s", name, time.monotonic() - started)

    async def stop(self) -> None:
        for name in list(self.agents):
            await self.stop_agent(name)

    # ------------------------------------------------------------------ faults
    def node_fail(self, node: str) -> str:
        cluster = self.node_cluster[node]
        jobs = sorted({p.labels.get(LABEL_JOB, "") for p in self.clusters[cluster].pods()
                       if p.node == node and not p.terminal} - {""})
        self.clusters[cluster].set_node_ready(node, False)
        self.failed_nodes.add(node)
        self.nodes_failed.add(node)
        held = f"; its pods of {', '.join(jobs)} must move" if jobs else " (no pods of ours on it)"
        return f"node {node} of {cluster} is NotReady{held}"

    def node_recover(self, node: str) -> str:
        cluster = self.node_cluster[node]
        self.clusters[cluster].set_node_ready(node, True)
        self.failed_nodes.discard(node)
        return f"node {node} of {cluster} is Ready again"

    def pod_fail(self, job: str) -> str | None:
        """Fail one running pod of ``job`` (None when none runs now: the caller retries)."""
        for name, cluster in self.clusters.items():
            if name in self.down:
                continue
            pods = [p for p in cluster.pods({LABEL_JOB: job})
                    if p.node is not None and p.phase == PodPhase.RUNNING and not p.deleting]
            if pods:
                pod = pods[-1]
                cluster.fail_pod(pod.name, exit_code=1, reason="Error", namespace=pod.namespace)
                return f"pod {pod.name} of {job} on {name}/{pod.node} failed (exit code 1)"
        return None

    async def cluster_down(self, name: str) -> str:
        self.down[name] = self.now()
        running = sorted({p.labels.get(LABEL_JOB, "") for p in self.clusters[name].pods()
                          if p.node is not None and not p.terminal} - {""})
        await self.stop_agent(name)
        return (f"cluster {name} is down: its agent stopped (stream dropped, no heartbeats)"
                + (f"; it held {', '.join(running)}" if running else ""))

    def cluster_up(self, name: str) -> str:
        since = self.down.pop(name, None)
        if since is not None:  # the cluster was frozen: its gangs resume where they stopped
            for run in self.runs.values():
                if run.cluster == name and run.finished is None:
                    run.ends += self.now() - since
        if name not in self.agents:
            self.start_agent(name)
        return f"cluster {name} is back: a new agent connects and is synced"
