"""``federation demo``: the whole system on one machine, over real gRPC, in about a minute.

What runs, and how it is wired (README "What is real and what is simulated"):

- the central service exactly as ``federation serve`` builds it (``build_server``: gRPC
  servicers, token auth, the planning-round scheduler with the CP-SAT planner, the agent
  hub with its lost-agent watchdog) on 127.0.0.1, port 0, over a fresh SQLite audit
  database in ``--out``;
- one real agent runtime per scenario cluster, each over an in-memory cluster driven by
  a simulated clock (``demo.fleet``), connected with ``AgentService.Connect``;
- the scenario's queues (one tenant owns each) and jobs submitted at their ``submitAt``
  times with ``FederationClient``, the library ``fedctl`` uses, each tenant with its own
  token; faults injected at their times;
- a live view (``demo.view``) fed by the same API (ListClusters, ListJobs, ExplainJob,
  WatchJobs), a final report and a picture (``demo.report``, ``demo.picture``).

The demo exits 0 once every job is terminal (or pending with an "unschedulable"
verdict) and every fault has been played, 1 when ``--max-wall-seconds`` passes first.
``--hold`` keeps the service and agents up afterwards so ``fedctl`` can be tried.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from federation.client import FederationClient, ServiceError
from federation.demo.fleet import SimFleet
from federation.demo.observe import Observer
from federation.demo.report import Report, write_outputs
from federation.demo.state import TERMINAL, DemoState, EventLine
from federation.demo.view import PlainPrinter, live_view
from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, LifecyclePolicy
from federation.domain.plans import PlanLimits
from federation.service.auth import Authenticator, digest
from federation.service.server import RunningServer, StartupError, build_server, open_store
from federation.sim.scenario import FaultEvent, Scenario, builtin_scenario_path, load_scenario
from federation.sim.workload import ScenarioJob
from federation.wire.convert import queue_to_proto
from federation.wire.jobs import job_to_proto

log = logging.getLogger(__name__)

ADMIN_TENANT, ADMIN_TOKEN = "ops", "demo-admin"
TICK_SECONDS = 0.05
POLL_SECONDS = 0.5
TARGET_WALL_SECONDS = 50.0
RESTART_ON_FAILURE = LifecyclePolicy(action="RestartPod", events=("PodFailed",))


class DemoError(Exception):
    """The demo cannot start as asked (printed as one line, exit 2)."""


@dataclass(frozen=True)
class DemoOptions:
    """What ``federation demo`` was asked for, built by the CLI (``cli/main.py``).

    ``limits``: the planner's knobs (the policy flags applied to a 0.5 s round budget)."""

    scenario: str | None = None
    speed: float | None = None
    db: str | None = None
    out: str = "demo-output"
    plain: bool = False
    hold: bool = False
    listen: str = "127.0.0.1:0"
    max_wall_seconds: float = 300.0
    agent_grace_seconds: float = 3.0
    limits: PlanLimits = PlanLimits(time_limit_seconds=0.5)


def tenant_token(tenant: str) -> str:
    return f"demo-{tenant}"


def agent_token(cluster: str) -> str:
    return f"demo-agent-{cluster}"


def tokens_document(scenario: Scenario) -> dict[str, Any]:
    """The tokens file of the demo (digests only): one tenant per queue, an admin, one token per cluster."""
    tenants = {digest(ADMIN_TOKEN): ADMIN_TENANT}
    tenants.update({digest(tenant_token(q.name)): q.name for q in scenario.queues})
    return {"tenants": tenants, "admins": [ADMIN_TENANT],
            "clusters": {c.name: digest(agent_token(c.name)) for c in scenario.clusters}}


def default_speed(scenario: Scenario) -> float:
    """Simulated seconds per wall second so the scenario plays in about a minute.

    Estimated horizon: the latest of the last arrival's end, the last fault, and the
    GPU-seconds of the workload spread over the fleet (stretched by the worst slowdown).
    """
    worst = max((m for _, m in scenario.slowdown_by_tier), default=1.0)
    capacity = sum(n.allocatable.gpus for c in scenario.clusters for n in c.nodes) or 1
    work = sum(j.job.requests.gpus * j.duration_seconds for j in scenario.jobs) * worst / capacity
    ends = max((j.submit_at + j.duration_seconds * worst for j in scenario.jobs), default=0.0)
    last_event = max((e.at for e in scenario.events), default=0.0)
    horizon = max(ends, work, last_event, 1.0)
    return max(1.0, round(horizon / TARGET_WALL_SECONDS / 5) * 5 or 1.0)


def with_restart_policy(job: Job) -> Job:
    """Scenario jobs carry no lifecycle policies; the demo gives each the common Volcano
    ``PodFailed -> RestartPod`` so a failed pod is replaced alone."""
    return job if job.policies else replace(job, policies=(RESTART_ON_FAILURE,))


class Demo:
    def __init__(self, scenario: Scenario, options: DemoOptions, console: Console) -> None:
        self.scenario = scenario
        self.options = options
        self.console = console
        self.speed = options.speed or default_speed(scenario)
        self.out = Path(options.out)
        self.db_url = options.db or f"sqlite:///{self.out / 'audit.db'}"
        self.state = DemoState(scenario, speed=self.speed)
        self.faults: list[EventLine] = []
        self.started = time.monotonic()
        self.timeline_left = 0
        self.finished = asyncio.Event()

    # ------------------------------------------------------------------ run
    async def run(self) -> int:
        store = open_store(self.db_url, migrate=True)
        try:
            server = await build_server(
                store, listen=self.options.listen, auth=Authenticator.from_mapping(tokens_document(self.scenario)),
                agent_grace_seconds=self.options.agent_grace_seconds, round_debounce_seconds=0.1,
                plan_limits=self.options.limits)
            try:
                return await self._run(store, server)
            finally:
                await server.stop(grace=1.0)
        finally:
            store.dispose()
            log.info("demo: stopped")

    async def _run(self, store: Any, server: RunningServer) -> int:
        self.state.address = server.address
        self.fleet = SimFleet(self.scenario, server.address, {c.name: agent_token(c.name)
                                                              for c in self.scenario.clusters})
        admin = FederationClient(server.address, token=ADMIN_TOKEN, timeout=30.0)
        tenants = {q.name: FederationClient(server.address, token=tenant_token(q.name), timeout=30.0)
                   for q in self.scenario.queues}
        observer = Observer(admin, self.state, self.fleet.now, lambda: self.fleet.down)
        tasks: list[asyncio.Task[Any]] = []
        try:
            self._announce(server)
            await self._setup(admin)
            self.started = time.monotonic()
            tasks = [asyncio.create_task(c, name=n) for n, c in (
                ("demo-ticker", self._ticker()), ("demo-driver", self._driver(tenants)),
                ("demo-watch", observer.watch()), ("demo-poll", self._poll(observer)))]
            view = asyncio.create_task(self._view())
            code = await self._wait(tasks)
            await observer.poll()
            self.state.done = True
            await view
            log.info("demo: workload %s; writing the report", "finished" if code == 0 else "stopped at the cap")
            report = await asyncio.to_thread(self._report, store, code)
            write_outputs(report, self.out, self.console, plain=self._plain())
            if code != 0:
                self.console.print(f"federation demo: stopped after {self.options.max_wall_seconds:.0f} s of wall "
                                   f"time with {self.state.finished} of {self.state.total} jobs finished")
            if self.options.hold:
                await self._hold(server)
            return code
        finally:
            log.info("demo: shutting down")
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in (admin, *tenants.values()):
                await c.close()
            await self.fleet.stop()

    def _plain(self) -> bool:
        return self.options.plain or not self.console.is_terminal

    def _announce(self, server: RunningServer) -> None:
        self.console.print(
            f"federation demo: scenario [bold]{self.scenario.name}[/] — {len(self.scenario.clusters)} clusters, "
            f"{len(self.scenario.queues)} tenants, {len(self.scenario.jobs)} jobs, {len(self.scenario.events)} "
            f"faults; {self.speed:g} simulated s per wall s", highlight=False)
        self.console.print(f"central service on [bold]{server.address}[/] (audit db {self.db_url}); try:\n"
                           f"  fedctl --server {server.address} --token {ADMIN_TOKEN} list jobs", highlight=False)

    async def _setup(self, admin: FederationClient) -> None:
        (self.out / "tokens.yaml").write_text(yaml.safe_dump(tokens_document(self.scenario), sort_keys=False))
        await admin.wait_ready()
        if (await admin.list_jobs_page(page_size=1)).jobs:
            raise DemoError(f"the database {self.db_url} already holds jobs; the demo needs an empty one "
                            "(leave out --db for a fresh SQLite file in --out)")
        for queue in self.scenario.queues:
            await admin.create_queue(queue_to_proto(replace(queue, owners=(queue.name,))))
        for cluster in self.scenario.clusters:
            self.fleet.start_agent(cluster.name)
        deadline = time.monotonic() + 30.0
        while True:
            clusters = await admin.list_clusters()
            if len([c for c in clusters if c.last_snapshot.nodes > 0]) == len(self.scenario.clusters):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the agents did not connect within 30 s (see demo.log)")
            await asyncio.sleep(0.1)

    async def _wait(self, tasks: list[asyncio.Task[Any]]) -> int:
        """0 when the workload finished, 1 at the wall-time cap; a crashed task re-raises."""
        finished = asyncio.create_task(self.finished.wait())
        deadline = time.monotonic() + self.options.max_wall_seconds
        waiting: set[asyncio.Task[Any]] = {finished, *tasks}
        try:
            while finished not in waiting or not finished.done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return 1
                done, waiting = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is finished:
                        return 0
                    task.result()  # re-raise what stopped it; the driver ends normally when all is played
                    if task.get_name() != "demo-driver":
                        raise RuntimeError(f"{task.get_name()} ended early")
                waiting.add(finished)
            return 0
        finally:
            finished.cancel()

    # ------------------------------------------------------------------ simulated time and the workload
    async def _ticker(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(TICK_SECONDS)
            now = time.monotonic()
            if now - last > 1.0:
                log.warning("demo: the event loop was blocked for %.1f s", now - last - TICK_SECONDS)
            self.fleet.advance((now - last) * self.speed)
            last = now
            self.state.sim_now, self.state.wall = self.fleet.now(), now - self.started

    async def _driver(self, tenants: dict[str, FederationClient]) -> None:
        timeline: list[tuple[float, int, int, ScenarioJob | FaultEvent]] = []
        for i, job in enumerate(self.scenario.jobs):
            timeline.append((job.submit_at, 1, i, job))
        for i, event in enumerate(self.scenario.events):
            timeline.append((event.at, 0, i, event))
        heapq.heapify(timeline)
        self.timeline_left = len(timeline)
        submissions: set[asyncio.Task[None]] = set()
        while timeline:
            at, order, i, item = heapq.heappop(timeline)
            while self.fleet.now() < at:
                await asyncio.sleep(min(TICK_SECONDS, max(0.001, (at - self.fleet.now()) / self.speed)))
            if isinstance(item, FaultEvent):
                retry = await self._fault(item, at)
                if retry:
                    heapq.heappush(timeline, (self.fleet.now() + 15.0, order, i, item))
                    continue
            else:  # submissions run beside the timeline, so a slow answer never delays a fault
                submissions.add(asyncio.create_task(self._submit(tenants[item.job.queue], item)))
            self.timeline_left = len(timeline)
        await asyncio.gather(*submissions)
        self.timeline_left = 0
        await self._settle_agents()

    async def _submit(self, client: FederationClient, job: ScenarioJob) -> None:
        try:
            await client.submit_job(job_to_proto(with_restart_policy(job.job)))
        except ServiceError as exc:
            self.state.add(EventLine(self.fleet.now(), "REFUSED", job.job.name, exc.message))
        self.state.submitted += 1

    async def _fault(self, event: FaultEvent, at: float) -> bool:
        """Inject one fault; True when it must be retried (podFail of a job not running yet)."""
        at = max(at, self.fleet.now())
        if event.kind == "nodeFail":
            text = self.fleet.node_fail(event.target)
        elif event.kind == "nodeRecover":
            text = self.fleet.node_recover(event.target)
        elif event.kind == "clusterDown":
            text = await self.fleet.cluster_down(event.target)
        elif event.kind == "clusterUp":
            text = self.fleet.cluster_up(event.target)
        else:
            found = self.fleet.pod_fail(event.target)
            if found is None:
                job = self.state.jobs.get(event.target)
                if job is None or job.state not in TERMINAL:  # not yet terminal: wait for it to run
                    return True
                text = f"podFail of {event.target} skipped: the job had already finished"
            else:
                text = found
        line = EventLine(at, "FAULT", event.target, f"{event.kind}: {text}")
        self.faults.append(line)
        self.state.add(line)
        return False

    async def _settle_agents(self) -> None:
        """After the last fault, give a returning agent the time to connect and be synced."""
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if all(a.runtime.connected.is_set() for a in self.fleet.agents.values()):
                return
            await asyncio.sleep(0.1)

    async def _poll(self, observer: Observer) -> None:
        while True:
            await observer.poll()
            if self.timeline_left == 0 and self.state.submitted == self.state.total \
                    and self.state.finished == self.state.total:
                self.finished.set()
            await asyncio.sleep(POLL_SECONDS)

    async def _view(self) -> None:
        if self._plain():
            printer = PlainPrinter(self.state, self.console)
            while not self.state.done:
                printer.step()
                await asyncio.sleep(0.25)
            printer.step(final=True)
        else:
            await live_view(self.state, self.console)

    # ------------------------------------------------------------------ the end
    def _report(self, store: Any, code: int) -> Report:
        rounds = []
        token = ""
        while True:
            page = store.audit.list_rounds(page_size=500, page_token=token)
            rounds.extend(page.items)
            token = page.next_token
            if not token:
                break
        return Report(scenario=self.scenario, state=self.state, runs=dict(self.fleet.runs), faults=list(self.faults),
                      rounds=rounds, db_url=self.db_url, out=self.out, wall_seconds=time.monotonic() - self.started,
                      speed=self.speed, address=self.state.address, admin_token=ADMIN_TOKEN,
                      failed_nodes=set(self.fleet.nodes_failed), complete=code == 0)

    async def _hold(self, server: RunningServer) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        self.console.print(f"\n--hold: still serving on {server.address} (agents connected); try\n"
                           f"  fedctl --server {server.address} --token {ADMIN_TOKEN} list jobs\n"
                           f"  fedctl --server {server.address} --token {ADMIN_TOKEN} explain JOB\n"
                           f"  fedctl --server {server.address} --token {ADMIN_TOKEN} audit JOB\n"
                           "Ctrl-C stops.", highlight=False)
        await stop.wait()


def _prepare_out(options: DemoOptions) -> None:
    """Create ``--out`` (refused in one line when it cannot be a directory: ``--out /dev/null``
    was a ``FileExistsError`` traceback)."""
    out = Path(options.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput("--out", f"{options.out}: {(exc.strerror or 'cannot be created').lower()}") from None
    if options.db is None:  # a fresh database each run
        for suffix in ("", "-wal", "-shm", "-journal"):
            (out / f"audit.db{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def _log_to(path: Path) -> Any:
    """Service and agent logs go to a file: the terminal belongs to the view."""
    root = logging.getLogger()
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


def demo_main(options: DemoOptions) -> int:
    """Entry point of ``federation demo`` (``options`` built from its arguments by federation/cli/main.py)."""
    scenario = load_scenario(options.scenario or builtin_scenario_path("demo"))
    console = Console(soft_wrap=False) if not options.plain else Console(force_terminal=False, soft_wrap=True)
    _prepare_out(options)
    with _log_to(Path(options.out) / "demo.log"):
        try:
            return asyncio.run(Demo(scenario, options, console).run())
        except DemoError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except StartupError as exc:  # the audit database (--db) cannot be opened or is not at the latest schema
            print(f"error: --db: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("federation demo: interrupted", file=sys.stderr)
            return 130
