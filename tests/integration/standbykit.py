"""Two central replicas as real processes (``federation serve --leader-election``) on one
PostgreSQL database, in-memory member clusters whose real ``AgentRuntime``s reach the
replicas through a health-routed loopback proxy, a submitter, and an observer polling
both replicas' gRPC health. Used by the standby test (3 kills) and the takeover
benchmark (tests/perf/test_takeover.py, 10 kills per lease).

Why a proxy: in Kubernetes the agents dial the central Service, which routes new
connections only to ready pods, and the readiness probe is the gRPC health check, so
only the leader. ``HealthRouter`` does exactly that on loopback: it polls each replica's
overall health and forwards each new connection to the one reporting SERVING (none:
the connection is closed and the agent retries after its backoff).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import yaml
from fleetkit import TOKENS as AGENT_TOKENS
from fleetkit import Fleet, eventually, job_spec
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servicekit import NLP, TOKENS

from federation.client import FederationClient, ServiceError
from federation.domain.queues import Queue
from federation.store import Store
from tests.fixtures.ports import free_port

SERVING = health_pb2.HealthCheckResponse.SERVING
JOB_SECONDS = 0.5


async def health_of(port: int, timeout: float = 2.0) -> int | None:
    """The overall status of the replica on ``port``; None when it does not answer."""
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            return int(reply.status)
    except (grpc.aio.AioRpcError, TimeoutError, OSError):
        return None


@dataclass
class Replica:
    """One ``federation serve`` process; ``kill()`` is SIGKILL (no release, no cleanup)."""

    name: str
    port: int
    argv: list[str]
    log: Path
    process: asyncio.subprocess.Process | None = None
    starts: int = 0
    killing: bool = False  # the rig is killing it on purpose (not restarted by the supervisor)

    async def start(self) -> None:
        self.starts += 1
        out = self.log.open("ab")
        out.write(f"\n===== start {self.starts} =====\n".encode())
        out.flush()
        self.process = await asyncio.create_subprocess_exec(*self.argv, stdout=out, stderr=out)
        out.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def kill(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()

    async def terminate(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                await self.kill()


class HealthRouter:
    """A loopback stand-in for a Kubernetes Service with a gRPC readiness probe."""

    def __init__(self, replicas: list[Replica], period: float = 0.1) -> None:
        self._replicas = replicas
        self._period = period
        self.serving: dict[str, int | None] = {}
        self.samples: list[tuple[float, tuple[str, ...], dict[str, int | None]]] = []  # (monotonic, SERVING, all)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._poller: asyncio.Task[None] | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._poller = asyncio.create_task(self._poll())

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()

    def leaders(self) -> list[str]:
        return [name for name, status in self.serving.items() if status == SERVING]

    async def _poll(self) -> None:
        while True:
            statuses = await asyncio.gather(*(health_of(r.port) for r in self._replicas))
            self.serving = {r.name: s for r, s in zip(self._replicas, statuses, strict=True)}
            self.samples.append((time.monotonic(), tuple(self.leaders()), dict(self.serving)))
            await asyncio.sleep(self._period)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        leaders = self.leaders()
        target = next((r for r in self._replicas if r.name in leaders), None)
        if target is None:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target.port)
        except OSError:
            writer.close()
            return
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()


@dataclass
class Submitter:
    """Submits ``job-<i>`` through the router, retrying each name until it is acknowledged."""

    address: str
    acknowledged: list[str] = field(default_factory=list)
    refused: int = 0
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        i = 0
        while True:
            name = f"job-{i:04d}"
            try:
                async with FederationClient(self.address, token=NLP, timeout=5.0) as c:
                    await c.submit_job(job_spec(name, pods=1, gpus=1, tier=None))
            except (ServiceError, grpc.aio.AioRpcError, OSError):
                self.refused += 1  # no leader right now (or the call was cut): retry the same name
                await asyncio.sleep(0.1)
                continue
            self.acknowledged.append(name)
            i += 1
            await asyncio.sleep(0.15)


@dataclass
class Takeover:
    killed: str
    successor: str
    seconds: float
    at: float  # monotonic time of the kill


class Federation:
    """The whole rig; see the module docstring."""

    def __init__(self, url: str, directory: Path, lease_seconds: float) -> None:
        self.url = url
        self.directory = directory
        self.lease_seconds = lease_seconds
        tokens = directory / "tokens.yaml"
        tokens.write_text(yaml.safe_dump(TOKENS))
        self.replicas = [self._replica(name, tokens) for name in ("a", "b")]
        self.router = HealthRouter(self.replicas)
        self.fleet: Fleet | None = None
        self.takeovers: list[Takeover] = []
        self.submitter = Submitter("")
        self.exits: list[tuple[str, int | None]] = []  # replicas that exited by themselves (lost their lease)
        self._supervisor: asyncio.Task[None] | None = None

    def _replica(self, name: str, tokens: Path) -> Replica:
        port = free_port()
        argv = [sys.executable, "-m", "federation.cli.main", "serve", "--listen", f"127.0.0.1:{port}",
                "--db", self.url, "--tokens", str(tokens), "--leader-election",
                "--lease-seconds", f"{self.lease_seconds:g}", "--agent-grace-seconds", "60",
                "--round-debounce-seconds", "0.05", "--plan-time-limit", "0.5", "--shutdown-grace-seconds", "1"]
        return Replica(name, port, argv, self.directory / f"replica-{name}.log")

    def logs(self) -> str:
        return "\n".join(f"--- {r.log.name}\n{r.log.read_text()[-6000:]}" for r in self.replicas if r.log.exists())

    async def wait(self, check: Any, timeout: float, what: str) -> None:
        """``eventually``, with both replicas' logs in the failure."""
        try:
            await eventually(check, timeout=timeout, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    async def start(self, *, agents: bool = True) -> None:
        store = Store(self.url)
        try:
            store.queues.create(Queue("research", owners=("nlp",)))
        finally:
            store.dispose()
        await self.replicas[0].start()
        await self.router.start()
        self._supervisor = asyncio.create_task(self._supervise())
        await self.wait(lambda: self.router.leaders() == ["a"], 60, "replica a leading")
        await self.replicas[1].start()
        await self.wait(lambda: self.router.serving.get("b") is not None, 60, "replica b standing by")
        self.submitter = Submitter(f"127.0.0.1:{self.router.port}")
        if agents:
            self.fleet = Fleet(Store(self.url), server=None)  # type: ignore[arg-type]  # agents only: no server of its own
            self.fleet.runtimes = _AllJobs(JOB_SECONDS)
            for name in ("east", "west"):
                self.fleet.add_cluster(name)
                self._start_agent(name)
            self.fleet._ticker = asyncio.create_task(self.fleet.tick_forever())
            await self.wait(self.agents_synced_since({}), 60, "agents connected and synced")

    async def _supervise(self) -> None:
        """Restart a replica that exited by itself, as Kubernetes restarts a container."""
        while True:
            await asyncio.sleep(0.2)
            for replica in self.replicas:
                if replica.process is not None and not replica.alive() and not replica.killing:
                    self.exits.append((replica.name, replica.process.returncode))
                    await replica.start()

    def _start_agent(self, name: str) -> None:
        from fleetkit import Agent

        from agents.runtime import AgentRuntime, RuntimeConfig

        assert self.fleet is not None
        config = RuntimeConfig(
            cluster=name, server=f"127.0.0.1:{self.router.port}", token=AGENT_TOKENS[name], heartbeat_seconds=0.2,
            snapshot_debounce_seconds=0.05, snapshot_period_seconds=2.0, resync_seconds=0.2,
            status_period_seconds=2.0, backoff_initial_seconds=0.05, backoff_max_seconds=0.5)
        runtime = AgentRuntime(self.fleet.clusters[name], config)
        self.fleet.agents[name] = Agent(runtime, asyncio.create_task(runtime.run(), name=f"agent-{name}"))

    def syncs(self) -> dict[str, int]:
        assert self.fleet is not None
        return {name: agent.runtime.syncs for name, agent in self.fleet.agents.items()}

    def agents_synced_since(self, before: dict[str, int]) -> object:
        def check() -> bool:
            assert self.fleet is not None
            return all(a.runtime.connected.is_set() and a.runtime.syncs > before.get(n, 0)
                       for n, a in self.fleet.agents.items())
        return check

    async def kill_leader(self) -> Takeover:
        """SIGKILL the replica SERVING now; time until the other one is SERVING; restart the dead one."""
        leaders = self.router.leaders()
        assert len(leaders) == 1, f"expected one leader before the kill, saw {self.router.serving}\n{self.logs()}"
        killed = next(r for r in self.replicas if r.name == leaders[0])
        other = next(r for r in self.replicas if r is not killed)
        await self.wait(lambda: self.router.serving.get(other.name) is not None, 60, f"{other.name} up")
        syncs = self.syncs() if self.fleet is not None else {}
        started = time.monotonic()
        killed.killing = True
        await killed.kill()
        await self.wait(lambda: self.router.leaders() == [other.name], self.lease_seconds + 30,
                        f"{other.name} taking over")
        takeover = Takeover(killed.name, other.name, time.monotonic() - started, started)
        self.takeovers.append(takeover)
        if self.fleet is not None:
            await self.wait(self.agents_synced_since(syncs), 60, "agents reconnected and synced with the new leader")
        await killed.start()  # back as a standby, like a restarted pod
        killed.killing = False
        await self.wait(lambda: self.router.serving.get(killed.name) is not None, 60, f"{killed.name} back")
        return takeover

    async def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
        await self.submitter.stop()
        if self.fleet is not None:
            if self.fleet._ticker is not None:
                self.fleet._ticker.cancel()
            for name in list(self.fleet.agents):
                await self.fleet.kill_agent(name)
            self.fleet.store.dispose()
        await self.router.stop()
        for replica in self.replicas:
            await replica.terminate()


class _AllJobs(dict[str, float]):
    """Every job runs ``seconds`` (the fake clusters' runtime table)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def get(self, key: str, default: float | None = None) -> float:  # type: ignore[override]  # a dict whose get() always answers a float
        return self.seconds


@contextlib.asynccontextmanager
async def federation(url: str, directory: Path, lease_seconds: float, *, agents: bool = True
                     ) -> AsyncIterator[Federation]:
    rig = Federation(url, directory, lease_seconds)
    try:
        await rig.start(agents=agents)
        yield rig
    finally:
        await rig.stop()


def summary(seconds: list[float]) -> str:
    return (f"n={len(seconds)} median={statistics.median(seconds):.2f}s max={max(seconds):.2f}s "
            f"min={min(seconds):.2f}s")

