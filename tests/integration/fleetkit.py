"""A small federation on loopback for the control-loop tests: the real server
(``build_server``) over a real store, and in-memory member clusters (agents/fake) driven
by real ``AgentRuntime``s over real gRPC.

Timings are shrunk (heartbeats every 0.1 s, grace 1.5 s, debounce 50 ms) so failover
tests take seconds; the wall clock is real, because every component (store, hub, agents,
fake clusters) must agree on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from servicekit import EAST, NLP, WEST, secured

from agents.core.records import LABEL_JOB, NodeRecord
from agents.fake.cluster import FakeCluster
from agents.metrics import NO_AGENT_METRICS, AgentMetrics, measured
from agents.runtime import AgentRuntime, RuntimeConfig
from federation.client import FederationClient
from federation.domain.plans import PlanLimits
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector
from federation.service.agent_hub import AgentHub
from federation.service.server import RunningServer, build_server
from federation.store import Store
from federation.v1 import types_pb2

TOKENS = {"east": EAST, "west": WEST}
GRACE = 1.5


def tree(prefix: str) -> tuple[list[NodeRecord], list[HyperNodeSpec]]:
    """Four 8-GPU nodes in two tier-1 leaves under one tier-2 spine."""
    nodes = [NodeRecord(f"{prefix}-n{i}", Resources.of(gpu=8, cpu=64_000, memory=512 << 30)) for i in range(4)]

    def node_members(*names: str) -> tuple[HyperNodeMember, ...]:
        return tuple(HyperNodeMember("Node", MemberSelector(exact_name=n)) for n in names)

    leaves = [HyperNodeSpec(f"{prefix}-leaf0", 1, node_members(f"{prefix}-n0", f"{prefix}-n1")),
              HyperNodeSpec(f"{prefix}-leaf1", 1, node_members(f"{prefix}-n2", f"{prefix}-n3"))]
    spine = HyperNodeSpec(f"{prefix}-spine", 2, tuple(HyperNodeMember("HyperNode", MemberSelector(exact_name=h.name))
                                                      for h in leaves))
    return nodes, [*leaves, spine]


def job_spec(name: str, *, pods: int = 2, gpus: int = 8, tier: int | None = 1,
             clusters: tuple[str, ...] = (), policies: tuple[tuple[str, str], ...] = ()) -> types_pb2.JobSpec:
    """A gang of ``pods`` pods of ``gpus`` GPUs in queue ``research`` (hard tier limit ``tier``)."""
    msg = types_pb2.JobSpec(
        name=name, queue="research",
        tasks=[types_pb2.TaskSpec(name="worker", replicas=pods,
                                  resources={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)})])
    if tier is not None:
        msg.network_topology.CopyFrom(types_pb2.NetworkTopology(mode="hard", highest_tier_allowed=tier))
    if clusters:
        msg.propagation.cluster_affinity.cluster_names.extend(clusters)
    for action, event in policies:
        msg.policies.append(types_pb2.LifecyclePolicy(action=action, events=[event]))
    return msg


@dataclass
class Agent:
    runtime: AgentRuntime
    task: asyncio.Task[None]


@dataclass
class Fleet:
    store: Store
    server: RunningServer
    clusters: dict[str, FakeCluster] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    runtimes: dict[str, float] = field(default_factory=dict)
    _ticker: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    @property
    def hub(self) -> AgentHub:
        """The server's agent hub (a fleet's server always runs one)."""
        assert self.server.hub is not None
        return self.server.hub

    def client(self, token: str = NLP) -> FederationClient:
        return FederationClient(self.address, token=token, timeout=20.0)

    def add_cluster(self, name: str) -> FakeCluster:
        nodes, hypernodes = tree(name)
        cluster = FakeCluster(name, nodes, hypernodes, clock=time.time, runtime=self._runtime)
        self.clusters[name] = cluster
        return cluster

    def _runtime(self, manifest: Any) -> float | None:
        job = manifest.labels.get(LABEL_JOB, "")
        return self.runtimes.get(job)

    def config(self, name: str, **overrides: Any) -> RuntimeConfig:
        fields: dict[str, Any] = dict(
            cluster=name, server=self.address, token=TOKENS.get(name), heartbeat_seconds=0.1,
            snapshot_debounce_seconds=0.05, snapshot_period_seconds=2.0, resync_seconds=0.2,
            status_period_seconds=2.0, backoff_initial_seconds=0.05, backoff_max_seconds=0.3)
        fields.update(overrides)
        return RuntimeConfig(**fields)

    def start_agent(self, name: str, *, epoch: int | None = None, metrics: AgentMetrics = NO_AGENT_METRICS,
                    **overrides: Any) -> AgentRuntime:
        runtime = AgentRuntime(measured(self.clusters[name], metrics), self.config(name, **overrides), epoch=epoch,
                               metrics=metrics)
        self.agents[name] = Agent(runtime, asyncio.create_task(runtime.run(), name=f"agent-{name}"))
        return runtime

    async def kill_agent(self, name: str) -> None:
        """The agent process dies: its stream drops, heartbeats stop, pods stay."""
        agent = self.agents.pop(name)
        agent.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await agent.task

    async def tick_forever(self) -> None:
        while True:
            for cluster in self.clusters.values():
                cluster.tick()
            await asyncio.sleep(0.05)

    def job_pods(self, cluster: str, job: str) -> dict[str, str | None]:
        return {p.name: p.node for p in self.clusters[cluster].pods({LABEL_JOB: job}) if not p.deleting}

    def leftovers(self, cluster: str, job: str) -> int:
        c = self.clusters[cluster]
        return (len(c.pods({LABEL_JOB: job})) + sum(1 for s in c.services() if s.labels.get(LABEL_JOB) == job)
                + sum(1 for m in c.config_maps() if m.labels.get(LABEL_JOB) == job))


async def start_server(store: Store, listen: str = "127.0.0.1:0", **kwargs: Any) -> RunningServer:
    kwargs.setdefault("agent_grace_seconds", GRACE)
    kwargs.setdefault("round_debounce_seconds", 0.05)
    kwargs.setdefault("plan_limits", PlanLimits(time_limit_seconds=0.5))
    return await build_server(store, listen=listen, auth=secured(), control_loop=True, **kwargs)


@contextlib.asynccontextmanager
async def fleet(url: str, clusters: tuple[str, ...] = ("east", "west"), *, agents: bool = True,
                **server_kwargs: Any) -> AsyncIterator[Fleet]:
    store = Store(url)
    store.queues.create(Queue("research", owners=("nlp",)))
    server = await start_server(store, **server_kwargs)
    f = Fleet(store, server)
    for name in clusters:
        f.add_cluster(name)
        if agents:
            f.start_agent(name)
    f._ticker = asyncio.create_task(f.tick_forever())
    try:
        yield f
    finally:
        f._ticker.cancel()
        for name in list(f.agents):
            await f.kill_agent(name)
        await f.server.stop(grace=1.0)
        store.dispose()


async def eventually(check: Callable[[], Awaitable[bool]] | Callable[[], bool], timeout: float = 20.0,
                     what: str = "") -> None:
    """Poll ``check`` (sync or async) until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        await asyncio.sleep(0.05)


def has_snapshot(f: Fleet, cluster: str) -> bool:
    """True once the store holds a valid snapshot of ``cluster``."""
    from federation.store import NotFound

    try:
        return f.store.clusters.get(cluster).summary is not None
    except NotFound:
        return False
