"""Assemble and run the central service: store, control loop, servicers, one grpc.aio server.

``build_server`` is the one way to get a running service, used by ``federation serve``,
the demo and the tests, so all three run the same wiring (error mapping, auth, message
limits, TLS). ``serve_main`` adds what only a process needs: opening the database,
checking its schema, signals and the startup line.

Shutdown order (``RunningServer.stop``) and why: the server stops accepting RPCs first
and gives in-flight ones ``grace`` seconds; at the same moment the long-lived streams
(WatchJobs, agent streams) are told to end, since they would otherwise hold the grace
period open, and the submissions waiting for a group commit go to the store at once;
then the submission batches still running finish, the round scheduler stops (a round
in flight finishes), and the process disposes the engine last. Every store call is one
transaction, so an RPC cut off after the grace period has either committed or left
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2_grpc

from federation.control.job_ttl import DEFAULT_INTERVAL_SECONDS as TTL_INTERVAL_SECONDS
from federation.control.job_ttl import JobTtl
from federation.control.loop import DEFAULT_MAX_PENDING, RoundScheduler
from federation.control.retention import AuditRetention
from federation.domain.errors import InvalidInput
from federation.domain.plans import PlanLimits
from federation.domain.works import DEFAULT_DISPATCH_TIMEOUT_SECONDS
from federation.files import MAX_PEM_BYTES, read_bytes
from federation.logs import FORMATS, add_secret, configure, redact
from federation.metrics.exporter import MetricsServer, parse_listen, serve_metrics, with_process_metrics
from federation.metrics.gauges import FederationCollector
from federation.metrics.instruments import NO_METRICS, ServiceMetrics
from federation.propagation.taints import DEFAULT_FAILOVER_GRACE_SECONDS
from federation.service.agent_hub import AgentHub
from federation.service.audit import AuditServicer
from federation.service.auth import Authenticator
from federation.service.clusters import ClusterServicer
from federation.service.errors import ErrorMapping
from federation.service.event_feed import DEFAULT_COALESCE_SECONDS
from federation.service.health import (
    AGENTS,
    AUDIT,
    CLUSTERS,
    DEFAULT_INTERVAL_SECONDS,
    JOBS,
    OBJECTS,
    QUEUES,
    HealthReporter,
)
from federation.service.heap import freeze_startup_heap, space_full_collections
from federation.service.jobs import DEFAULT_SPEC_LIMIT, JobServicer, SubmitBatching
from federation.service.leadership import Elector, Leadership, LeaseTimings
from federation.service.objects import ObjectServicer
from federation.service.queues import QueueServicer
from federation.service.wire_bytes import PassBytes
from federation.store import Store
from federation.store.engine import url_password
from federation.store.job_expiry import ExpiredJob
from federation.store.leases import LeaseFence, LeaseRepository
from federation.v1 import (
    agent_pb2_grpc,
    audit_pb2_grpc,
    clusters_pb2_grpc,
    jobs_pb2_grpc,
    objects_pb2_grpc,
    queues_pb2_grpc,
)
from federation.wire.limits import DEFAULT_LIMITS, Limits

log = logging.getLogger(__name__)

# Transport backstop: grpc refuses bigger messages with RESOURCE_EXHAUSTED before any of
# our code runs; it is the agent stream's limit (a 15,000-node snapshot), the largest
# message we accept. ``ErrorMapping`` holds every other method to ``Limits.max_request_bytes``
# and the JobService a JobSpec to DEFAULT_SPEC_LIMIT (1 MiB), both INVALID_ARGUMENT.
AGENT_CONNECT_METHOD = "/federation.v1.AgentService/Connect"
MAX_MESSAGE_BYTES = DEFAULT_LIMITS.max_agent_message_bytes


@dataclass(frozen=True)
class ServerTls:
    """PEM file paths; ``client_ca`` makes client certificates mandatory (mutual TLS)."""

    cert: str
    key: str
    client_ca: str | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """Bounded reads (``federation.files``): ``--tls-key /dev/zero`` was a MemoryError, a
        directory or a missing file a traceback; each is now ``InvalidInput`` naming the flag."""
        return grpc.ssl_server_credentials(
            [(read_bytes(self.key, "--tls-key", MAX_PEM_BYTES), read_bytes(self.cert, "--tls-cert", MAX_PEM_BYTES))],
            root_certificates=read_bytes(self.client_ca, "--tls-client-ca", MAX_PEM_BYTES) if self.client_ca else None,
            require_client_auth=self.client_ca is not None,
        )


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``federation serve`` was told, typed; built by the CLI (``cli/main.py``),
    which is the only place that parses arguments. Defaults match the CLI's."""

    listen: str = "127.0.0.1:50051"
    db: str = "sqlite:///federation.db"
    tokens: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    migrate: bool = True
    agent_grace_seconds: float = 30.0
    failover_grace_seconds: float = DEFAULT_FAILOVER_GRACE_SECONDS  # default tolerationSeconds (propagation/taints.py)
    dispatch_timeout_seconds: float = DEFAULT_DISPATCH_TIMEOUT_SECONDS  # a Work left unacknowledged (domain/works.py)
    round_debounce_seconds: float = 0.2
    plan_limits: PlanLimits = field(default_factory=PlanLimits)
    max_pending_per_round: int = DEFAULT_MAX_PENDING
    shutdown_grace_seconds: float = 10.0
    control_loop: bool = True
    submit_batching: SubmitBatching = field(default_factory=SubmitBatching)
    watch_coalesce_seconds: float = DEFAULT_COALESCE_SECONDS  # the event feed's coalescing window
    limits: Limits = DEFAULT_LIMITS
    metrics_listen: str | None = None  # HOST:PORT of Prometheus /metrics; None: no metrics kept
    health_listen: str | None = None  # HOST:PORT of a plaintext, health-only port for probes; None: none
    log_format: str = "text"  # text | json (federation.logs)
    audit_retention_seconds: float | None = None  # None: keep the whole audit
    leader_election: bool = False  # PostgreSQL only: replicas compete for a lease (docs/design/standby.md)
    lease_seconds: float = 15.0


@dataclass
class RunningServer:
    """A started service; ``stop()`` shuts it down gracefully (see the module docstring)."""

    server: grpc.aio.Server
    port: int
    address: str
    store: Store
    auth: Authenticator
    rounds: RoundScheduler | None
    hub: AgentHub | None
    jobs: JobServicer
    health: HealthReporter
    leadership: Leadership
    metrics: MetricsServer | None = None
    retention: AuditRetention | None = None
    job_ttl: JobTtl | None = None
    """Deletes finished jobs past their ttlSecondsAfterFinished (leader only; control/job_ttl.py)."""
    elector: Elector | None = None
    health_server: grpc.aio.Server | None = None
    """The plaintext health-only server (``health_listen``), or None."""
    health_port: int | None = None
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when this replica lost the leadership it held (``serve`` then exits 1)."""
    _campaign: asyncio.Task[None] | None = field(default=None, repr=False)
    _lag_probe: asyncio.Task[None] | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    async def stop(self, grace: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.health.stop()  # NOT_SERVING first: probes and clients move away during the grace
        for task in (self._campaign, self._lag_probe):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        stopping = asyncio.create_task(self.server.stop(grace))
        try:
            self.jobs.shutdown()
            if self.hub is not None:
                await self.hub.stop()
        finally:
            await stopping
            if self.health_server is not None:  # after the main port: probes see NOT_SERVING during the grace
                await self.health_server.stop(0)
            await self.jobs.close()  # submission batches still running commit before the store closes
            if self.rounds is not None:
                await self.rounds.stop()
            if self.retention is not None:
                await self.retention.stop()
            if self.job_ttl is not None:
                await self.job_ttl.stop()
            if self.metrics is not None:
                await asyncio.to_thread(self.metrics.stop)
            if self.elector is not None:
                await self.elector.release()  # after the last round: the next leader starts at once

    async def _elected(self, epoch: int) -> None:
        """Take the leader's part: rounds (the first one repairs what the last leader left),
        agents, audit retention and the jobs' TTLs."""
        if self.rounds is not None:
            await self.rounds.start()
        if self.hub is not None:
            await self.hub.start()
        if self.retention is not None:
            await self.retention.start()
        if self.job_ttl is not None:
            await self.job_ttl.start()
        await self.health.publish()

    async def _lost(self, reason: str) -> None:
        await self.health.publish()
        if self.hub is not None:
            await self.hub.stop()
        if self.rounds is not None:
            await self.rounds.stop()
        if self.retention is not None:
            await self.retention.stop()
        if self.job_ttl is not None:
            await self.job_ttl.stop()
        self.lost.set()

    async def wait_for_termination(self) -> None:
        await self.server.wait_for_termination()


def _host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen: {listen!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def _health_only_server(health: HealthReporter, listen: str) -> tuple[grpc.aio.Server, int]:
    """A plaintext server, bound to ``listen`` but not started, with the gRPC health service alone.

    Why: the kubelet's ``grpc:`` probe speaks plaintext only (a probe has a port and a
    service name, no TLS), so against a TLS ``--listen`` it never succeeds: no replica
    becomes Ready and liveness restarts every pod. This port gives probes the *same*
    servicer object, so it answers exactly what the main port answers (SERVING on the
    leader whose store answers, NOT_SERVING on a standby or while stopping). Nothing else
    is registered here, not even reflection: the port takes no token and no TLS, so it
    must carry no API and no tenant data.
    """
    host, port = _host_port(listen)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return server, _bind("--health-listen", listen, lambda: server.add_insecure_port(target))


def _forget_jobs(gone: Sequence[ExpiredJob], hub: AgentHub | None, jobs: JobServicer) -> None:
    """Jobs deleted under their TTL: each cluster that had their Works is sent the Cancel
    (the hub finds the Works gone), and watchers see the deleted events go at once."""
    if hub is not None:
        for cluster in sorted({c for job in gone for c in job.clusters}):
            hub.notify_works_changed(cluster)
    jobs.feed.wake()


def _bind(flag: str, listen: str, add_port: Callable[[], int]) -> int:
    """Bind a gRPC port; a taken or foreign address is a ``StartupError`` naming the flag
    (one ``error:`` line and exit 1, not a traceback)."""
    try:
        bound = add_port()
    except RuntimeError as exc:  # grpc: "Failed to bind to address ..."
        raise StartupError(f"{flag} {listen}: cannot listen ({exc})") from None
    if bound == 0:
        raise StartupError(f"{flag} {listen}: cannot listen")
    return bound


async def build_server(
    store: Store,
    *,
    listen: str = "127.0.0.1:0",
    auth: Authenticator | None = None,
    tls: ServerTls | None = None,
    agent_grace_seconds: float = 30.0,
    failover_grace_seconds: float = DEFAULT_FAILOVER_GRACE_SECONDS,
    dispatch_timeout_seconds: float = DEFAULT_DISPATCH_TIMEOUT_SECONDS,
    round_debounce_seconds: float = 0.2,
    plan_limits: PlanLimits | None = None,
    max_pending_per_round: int = DEFAULT_MAX_PENDING,
    clock: Callable[[], float] = time.time,
    control_loop: bool = True,
    spec_limit_bytes: int = DEFAULT_SPEC_LIMIT,
    watch_poll_seconds: float = 0.2,
    watch_coalesce_seconds: float = DEFAULT_COALESCE_SECONDS,
    submit_batching: SubmitBatching | None = None,
    limits: Limits = DEFAULT_LIMITS,
    metrics_listen: str | None = None,
    audit_retention_seconds: float | None = None,
    leader_election: LeaseTimings | None = None,
    health_interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
    health_listen: str | None = None,
    job_ttl_interval_seconds: float = TTL_INTERVAL_SECONDS,
) -> RunningServer:
    """Start the service on ``listen`` (port 0 = any free port) and return its handles.

    ``control_loop=False`` leaves out the round scheduler and the agent hub (API-only
    tests that must not see jobs placed under them). ``metrics_listen`` serves Prometheus
    metrics on ``HOST:PORT/metrics``; without it no metric is kept at all.
    ``audit_retention_seconds`` prunes the audit in the background (``retention``).
    ``leader_election`` (PostgreSQL only) starts the replica as a standby: it serves
    reads, refuses writes and agent streams, and takes the leader's part (rounds, agents,
    retention) once it holds the lease (docs/design/standby.md).
    ``health_listen`` adds a plaintext port serving only the health service, for probes
    that cannot speak TLS (``_health_only_server``; ``health_server``, ``health_port``).
    ``job_ttl_interval_seconds`` is how often at most the leader looks for finished jobs
    whose ttlSecondsAfterFinished ran out (``job_ttl``).
    """
    auth = auth if auth is not None else Authenticator.open_mode()
    leadership = Leadership() if leader_election is not None else Leadership.always()
    if leader_election is not None:
        if not control_loop:
            raise ValueError("--leader-election elects the replica that runs the control loop; "
                             "it cannot go with --no-control-loop")
        store.db.fence = LeaseFence(leadership.current_epoch)
    metrics: ServiceMetrics = ServiceMetrics() if metrics_listen is not None else NO_METRICS
    rounds: RoundScheduler | None = None
    hub: AgentHub | None = None
    if control_loop:
        rounds = RoundScheduler(store, debounce_seconds=round_debounce_seconds,
                                limits=plan_limits or PlanLimits(), clock=clock,
                                max_pending=max_pending_per_round, metrics=metrics,
                                failover_grace_seconds=failover_grace_seconds,
                                dispatch_timeout_seconds=dispatch_timeout_seconds)
        hub = AgentHub(store, rounds, auth, grace_seconds=agent_grace_seconds, clock=clock, metrics=metrics,
                       leading=leadership.leading, limits=limits)
    health = HealthReporter(store.ping, leadership.leading, agents=hub is not None,
                            interval=health_interval_seconds)
    health_only = _health_only_server(health, health_listen) if health_listen is not None else None
    transport_limit = max(limits.max_agent_message_bytes, limits.max_request_bytes)
    server = grpc.aio.server(
        interceptors=[ErrorMapping(limits.max_request_bytes, {AGENT_CONNECT_METHOD: limits.max_agent_message_bytes}),
                      PassBytes()],
        options=[("grpc.max_receive_message_length", transport_limit),
                 ("grpc.max_send_message_length", transport_limit),
                 ("grpc.so_reuseport", 0)],
    )
    jobs = JobServicer(store, auth, rounds=rounds, hub=hub, spec_limit_bytes=spec_limit_bytes,
                       watch_poll_seconds=watch_poll_seconds, watch_coalesce_seconds=watch_coalesce_seconds,
                       batching=submit_batching, metrics=metrics,
                       topology_wait_seconds=(plan_limits or PlanLimits()).topology_wait_seconds, limits=limits)
    jobs_pb2_grpc.add_JobServiceServicer_to_server(jobs, server)
    # The QueueService invalidates the submit path's queue cache, so an owner removed here loses
    # SubmitJob and WatchJobs access at once in this process (other replicas: within its ttl).
    queues_pb2_grpc.add_QueueServiceServicer_to_server(QueueServicer(store, auth, jobs.queues, jobs.feed), server)
    clusters_pb2_grpc.add_ClusterServiceServicer_to_server(ClusterServicer(store, auth, rounds, clock, limits), server)
    audit_pb2_grpc.add_AuditServiceServicer_to_server(AuditServicer(store, auth), server)
    objects_pb2_grpc.add_ObjectServiceServicer_to_server(
        ObjectServicer(store, auth, rounds=rounds, on_classes_changed=jobs.classes.invalidate), server)
    if hub is not None:
        agent_pb2_grpc.add_AgentServiceServicer_to_server(hub, server)
    health.add_to(server, [JOBS, QUEUES, OBJECTS, CLUSTERS, AUDIT, *([AGENTS] if hub is not None else [])])
    host, port = _host_port(listen)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = _bind("--listen", listen, lambda: server.add_secure_port(target, tls.credentials()) if tls
                  else server.add_insecure_port(target))
    exporter: MetricsServer | None = None
    if metrics_listen is not None:
        with_process_metrics(metrics.registry).register(FederationCollector(
            store.stats, observed=(lambda: rounds.observed) if rounds is not None else (lambda: None),
            streams=hub.stream_count if hub is not None else None, leading=leadership.leading))
        try:
            exporter = serve_metrics(metrics_listen, metrics.registry)
        except OSError as exc:
            raise StartupError(f"--metrics-listen {metrics_listen}: cannot listen ({exc.strerror or exc})") from None
    await server.start()
    retention = None
    if audit_retention_seconds is not None:
        retention = AuditRetention(store, audit_retention_seconds, metrics=metrics)
    job_ttl = JobTtl(store, on_deleted=lambda gone: _forget_jobs(gone, hub, jobs),
                     interval_seconds=job_ttl_interval_seconds)
    address = f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"
    running = RunningServer(server=server, port=bound, address=address, store=store, auth=auth,
                            rounds=rounds, hub=hub, jobs=jobs, health=health, leadership=leadership,
                            metrics=exporter, retention=retention, job_ttl=job_ttl)
    if health_only is not None:
        running.health_server, running.health_port = health_only
        await running.health_server.start()
    await health.start()
    if metrics.enabled:
        running._lag_probe = asyncio.create_task(metrics.watch_loop_lag(), name="loop-lag-probe")
    if leader_election is None:
        await running._elected(0)
    else:
        running.elector = Elector(LeaseRepository(store.db), leader_election, leadership,
                                  on_elected=running._elected, on_lost=running._lost)
        running._campaign = asyncio.create_task(running.elector.run(), name="leader-election")
    freeze_startup_heap()  # full collections stop walking the modules' objects (service/heap.py)
    space_full_collections()  # and run about a tenth as often under load (service/heap.py)
    return running


# ---------------------------------------------------------------------- the process


class StartupError(Exception):
    """The service cannot start (schema not at head, database unreachable); one line for the user."""


def open_store(url: str, *, migrate: bool) -> Store:
    """Open the store; create an empty SQLite schema unless ``migrate`` is False; refuse a stale schema.

    PostgreSQL is never migrated here: production schema changes are a deliberate step
    (``federation db upgrade``, e.g. a migration Job before the rollout), not a side
    effect of a replica starting.
    """
    from federation.store import Store
    from federation.store import migrate as migrations
    from federation.store.errors import StoreError

    try:
        if url.startswith("sqlite") and migrate:
            migrations.upgrade(url, "head")
        elif not migrations.is_at_head(url):
            raise StartupError(
                f"the database schema at {_redact(url)} is not at the latest revision; "
                f"run `federation db upgrade --db URL` first")
    except StoreError as exc:
        raise StartupError(f"{_redact(url)}: {exc}") from None
    return Store(url)


def _redact(url: str) -> str:
    """A database URL without its password, fit for a log line or an error message. The
    password SQLAlchemy parses is also masked wherever else it would be logged (a raw
    space in it ends what a pattern can see)."""
    add_secret(url_password(url))
    return redact(url)


def serve_main(config: ServeConfig) -> int:
    """``federation serve``: run until SIGTERM/SIGINT, then shut down gracefully (exit 0).

    Flags are checked before logging is configured: a refused flag is one ``error:`` line
    on stderr and exit 2, and leaves the process's logging as it was."""
    if config.log_format not in FORMATS:
        print(f"error: --log-format: must be one of {', '.join(FORMATS)}", file=sys.stderr)
        return 2
    try:
        _host_port(config.listen)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config.health_listen is not None:
        try:
            _host_port(config.health_listen)
        except ValueError:
            print(f"error: --health-listen: {config.health_listen!r} is not HOST:PORT", file=sys.stderr)
            return 2
    if config.metrics_listen is not None:
        try:
            parse_listen(config.metrics_listen)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        auth = Authenticator.from_file(config.tokens) if config.tokens else Authenticator.open_mode()
    except (OSError, ValueError) as exc:
        print(f"error: --tokens: {exc}", file=sys.stderr)
        return 2
    tls = None
    if config.tls_cert or config.tls_key:
        if not (config.tls_cert and config.tls_key):
            print("error: --tls-cert and --tls-key go together", file=sys.stderr)
            return 2
        tls = ServerTls(config.tls_cert, config.tls_key, config.tls_client_ca)
        try:
            tls.credentials()
        except InvalidInput as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    elif config.tls_client_ca:
        print("error: --tls-client-ca needs --tls-cert and --tls-key", file=sys.stderr)
        return 2
    leader_election = None
    if config.leader_election:
        if not config.db.startswith("postgresql"):
            print("error: --leader-election needs PostgreSQL (--db postgresql+psycopg://...): SQLite is "
                  "single-replica, run one replica without --leader-election", file=sys.stderr)
            return 2
        if not config.control_loop:
            print("error: --leader-election cannot go with --no-control-loop (the leader is the replica that "
                  "runs the control loop)", file=sys.stderr)
            return 2
        try:
            leader_election = LeaseTimings(config.lease_seconds)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    configure(config.log_format)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        store = open_store(config.db, migrate=config.migrate)
    except StartupError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(_serve(store, auth, tls, config, leader_election))
    except StartupError as exc:  # a port that cannot be bound
        log.error("%s", exc)
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    finally:
        store.dispose()


async def _serve(store: Store, auth: Authenticator, tls: ServerTls | None, config: ServeConfig,
                 leader_election: LeaseTimings | None) -> int:
    log.info("%s", auth.describe())
    running = await build_server(
        store, listen=config.listen, auth=auth, tls=tls,
        agent_grace_seconds=config.agent_grace_seconds,
        failover_grace_seconds=config.failover_grace_seconds,
        dispatch_timeout_seconds=config.dispatch_timeout_seconds,
        round_debounce_seconds=config.round_debounce_seconds,
        plan_limits=config.plan_limits,
        max_pending_per_round=config.max_pending_per_round,
        control_loop=config.control_loop,
        submit_batching=config.submit_batching,
        watch_coalesce_seconds=config.watch_coalesce_seconds,
        limits=config.limits,
        metrics_listen=config.metrics_listen,
        audit_retention_seconds=config.audit_retention_seconds,
        leader_election=leader_election,
        health_listen=config.health_listen,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("listening with %s, db %s", "TLS" if tls else "plaintext", _redact(config.db))
    if running.metrics is not None:
        log.info("metrics on http://%s/metrics", running.metrics.address)
    if running.health_server is not None:
        log.info("gRPC health only, plaintext, on port %d (--health-listen)", running.health_port)
    print(f"federation serving on {running.address}", flush=True)
    lost = asyncio.create_task(running.lost.wait())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({lost, stopped}, return_when=asyncio.FIRST_COMPLETED)
    lost.cancel()
    stopped.cancel()
    if running.lost.is_set():  # docs/design/standby.md: restart as a fresh standby
        log.error("federation: leadership lost; exiting so this replica restarts as a standby")
        await running.stop(grace=1.0)
        return 1
    log.info("federation: shutting down (in-flight requests finish)")
    await running.stop(grace=config.shutdown_grace_seconds)
    log.info("federation: stopped")
    return 0
