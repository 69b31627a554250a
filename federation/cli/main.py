"""The ``federation`` command: serve, db upgrade/downgrade, demo, bench.

Subcommands import their implementation lazily so ``federation --help`` stays fast and a
broken optional part never stops the others from running.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from federation.cli.durations import duration_flag
from federation.cli.errors import EXIT_FAILURE, EXIT_USAGE, fail
from federation.cli.limit_flags import add_limit_flags, limits_from_args
from federation.cli.numbers import integer_flag, number_flag
from federation.cli.policy_flags import add_policy_flags, policy_limits
from federation.domain.errors import InvalidInput
from federation.domain.works import DEFAULT_DISPATCH_TIMEOUT_SECONDS
from federation.propagation.taints import DEFAULT_FAILOVER_GRACE_SECONDS

if TYPE_CHECKING:
    from federation.demo.main import DemoOptions
    from federation.service.server import ServeConfig

DEFAULT_DB = "sqlite:///federation.db"


def _coalesce_ms(value: str) -> float:
    """``--watch-coalesce-ms``: 0 to 1000 (a longer window would delay events past the 1 s delivery goal)."""
    try:
        ms = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of milliseconds") from None
    if not 0 <= ms <= 1000:
        raise argparse.ArgumentTypeError(f"{value!r} must be between 0 and 1000 milliseconds")
    return ms


def _db_url(value: str) -> str:
    """``--db``: a SQLite or PostgreSQL URL, the two stores the product runs on (``bogus://x``
    was a SQLAlchemy ``NoSuchModuleError`` traceback)."""
    scheme, sep, _ = value.partition("://")
    if not sep or scheme.partition("+")[0] not in ("sqlite", "postgresql"):  # the URL may hold a password: not echoed
        raise argparse.ArgumentTypeError(f"must be a sqlite:///FILE or postgresql+psycopg://... URL, got "
                                         f"{f'scheme {scheme!r}' if sep else 'no scheme'}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="federation", description="Multi-cluster federation scheduler")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the central gRPC service")
    serve.add_argument("--listen", default="127.0.0.1:50051", help="HOST:PORT to listen on (port 0 = any)")
    serve.add_argument("--db", type=_db_url, default=DEFAULT_DB, help="SQLAlchemy URL (sqlite:///FILE or postgresql+psycopg://...)")
    serve.add_argument("--tokens", help="YAML file mapping bearer tokens to tenants, admins and clusters")
    serve.add_argument("--tls-cert", help="server certificate (PEM); enables TLS")
    serve.add_argument("--tls-key", help="server private key (PEM)")
    serve.add_argument("--tls-client-ca", help="require client certificates signed by this CA (PEM)")
    serve.add_argument("--no-migrate", action="store_true",
                       help="do not create the schema of an empty SQLite database (PostgreSQL is never migrated "
                            "implicitly: run `federation db upgrade`)")
    serve.add_argument("--agent-grace-seconds", type=number_flag(0, above=True), default=30.0,
                       help="an agent silent this long makes its cluster unreachable (tainted "
                            "cluster.karmada.io/unreachable:NoExecute); its jobs leave as their tolerations run out")
    serve.add_argument("--failover-grace", type=duration_flag(0, "DURATION"), metavar="DURATION",
                       default=DEFAULT_FAILOVER_GRACE_SECONDS,
                       help="how long a job without a clusterToleration of its own stays on an unreachable or "
                            "not-ready cluster before it is re-placed (Karmada's default toleration; default "
                            "%(default)gs: at once)")
    serve.add_argument("--dispatch-timeout", type=duration_flag(1, "DURATION"), metavar="DURATION",
                       default=DEFAULT_DISPATCH_TIMEOUT_SECONDS,
                       help="a job whose Work a reachable cluster has not acknowledged for this long is re-planned "
                            "(default %(default)gs)")
    serve.add_argument("--round-debounce-seconds", type=number_flag(0, 60), default=0.2,
                       help="coalesce submissions and snapshots for this long before a planning round")
    serve.add_argument("--plan-time-limit", type=number_flag(0, 3600, above=True), default=1.0,
                       help="CP-SAT time limit per round")
    add_policy_flags(serve)
    add_limit_flags(serve)
    serve.add_argument("--max-pending-per-round", type=integer_flag(1), default=5000,
                       help="pending jobs one planning round considers (split fairly between queues)")
    serve.add_argument("--shutdown-grace-seconds", type=number_flag(0, 3600), default=10.0,
                       help="on SIGTERM/SIGINT, let in-flight requests finish for up to this long")
    serve.add_argument("--no-control-loop", action="store_true",
                       help="API only: no planning rounds and no agent service (benchmarks, read replicas)")
    serve.add_argument("--leader-election", action="store_true",
                       help="PostgreSQL only: replicas compete for a lease in the database; only the leader plans "
                            "and takes agent streams, the others stand by (gRPC health NOT_SERVING)")
    serve.add_argument("--lease-seconds", type=number_flag(0, 3600, above=True), default=15.0,
                       help="with --leader-election: a dead leader is replaced within about this long")
    serve.add_argument("--submit-batch-size", type=integer_flag(1, 100_000), default=64,
                       help="group commit: at most this many SubmitJob calls per store transaction")
    serve.add_argument("--submit-batch-delay-ms", type=number_flag(0, 1000), default=2.0,
                       help="group commit: a submission waits at most this long for others to join its batch")
    serve.add_argument("--watch-coalesce-ms", type=_coalesce_ms, default=50.0,
                       help="the watch feed reads new events at most once per this window (or 1 ms per open "
                            "watch stream if longer, up to 250 ms), so a burst reaches each watcher as one message "
                            "(docs/design/watch.md)")
    serve.add_argument("--audit-retention", metavar="DURATION", type=duration_flag(60, "DURATION"),
                       help="prune planning rounds that ended longer ago than this (e.g. 30d), in the background; "
                            "the latest decision of every live job is kept (default: keep everything)")
    serve.add_argument("--log-format", choices=("text", "json"), default="text",
                       help="text, or json: one JSON object per line with job, queue, cluster and round fields")
    serve.add_argument("--metrics-listen", metavar="HOST:PORT",
                       help="serve Prometheus metrics on http://HOST:PORT/metrics (off by default)")
    serve.add_argument("--health-listen", metavar="HOST:PORT",
                       help="also serve the gRPC health service, and nothing else, in plaintext here: for probes "
                            "that cannot speak TLS (the kubelet's grpc probe) when --listen uses TLS (off by default)")

    db = sub.add_parser("db", help="database schema migrations")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="upgrade the schema to the latest revision")
    up.add_argument("--db", type=_db_url, default=DEFAULT_DB)
    up.add_argument("--revision", default="head")
    down = db_sub.add_parser("downgrade", help="downgrade the schema to a revision")
    down.add_argument("--db", type=_db_url, default=DEFAULT_DB)
    down.add_argument("--revision", required=True)

    demo = sub.add_parser("demo", help="run the embedded demo: central service, simulated clusters, agents")
    demo.add_argument("--scenario", help="scenario YAML (default: the packaged demo scenario)")
    demo.add_argument("--speed", type=number_flag(0, 1e9, above=True), default=None,
                      help="simulated seconds per wall second")
    demo.add_argument("--db", type=_db_url, default=None, help="audit database URL (default: a SQLite file in --out)")
    demo.add_argument("--out", default="demo-output", help="directory for the report, picture and database")
    demo.add_argument("--plain", action="store_true", help="plain line output even on a terminal")
    demo.add_argument("--hold", action="store_true",
                      help="keep the service and agents up after the workload, for fedctl, until Ctrl-C")
    demo.add_argument("--max-wall-seconds", type=number_flag(0, above=True), default=300.0,
                      help="give up (exit 1) when the workload has not finished after this long")
    demo.add_argument("--agent-grace-seconds", type=number_flag(0, above=True), default=3.0,
                      help="an agent silent this long (wall seconds) is declared lost")
    add_policy_flags(demo)

    bench = sub.add_parser("bench", help="simulate each policy on a scenario and compare")
    bench.add_argument("--scenario", required=True, help="scenario YAML file")
    bench.add_argument("--policy", action="append", dest="policies",
                       help="policy to run (repeatable; default: all four)")
    bench.add_argument("--json", dest="json_out", help="write the bench JSON here")
    bench.add_argument("--placements", dest="placements_out", metavar="FILE",
                       help="write every job start (restarts included) as JSON lines: policy, job, cluster, "
                            "hypernode, tier, at (simulated seconds), pods; a running elastic job's growth "
                            "adds a line with growth: true and the added pods")
    add_policy_flags(bench)
    return parser


def _demo_options(args: argparse.Namespace) -> DemoOptions:
    """``federation demo``'s typed options: every flag it accepts, the policy flags included."""
    from federation.demo.main import DemoOptions

    return DemoOptions(scenario=args.scenario, speed=args.speed, db=args.db, out=args.out, plain=args.plain,
                       hold=args.hold, max_wall_seconds=args.max_wall_seconds,
                       agent_grace_seconds=args.agent_grace_seconds,
                       limits=policy_limits(args, DemoOptions().limits))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            from federation.service.server import serve_main

            return serve_main(_serve_config(args))
        if args.command == "db":
            return _db(args)
        if args.command == "demo":
            from federation.demo.main import demo_main

            return demo_main(_demo_options(args))
        if args.command == "bench":
            return _bench(args)
    except InvalidInput as exc:
        return fail(str(exc), EXIT_USAGE)
    except FileNotFoundError as exc:
        return fail(f"{exc.filename}: no such file", EXIT_USAGE)
    return EXIT_USAGE


def _db(args: argparse.Namespace) -> int:
    """``federation db upgrade|downgrade``: a database that cannot be reached is one line, exit 1."""
    from federation.store.errors import StoreError, UnknownRevision
    from federation.store.migrate import current, downgrade, upgrade

    where = args.db.split("@")[-1]
    try:
        if args.db_command == "upgrade":
            upgrade(args.db, args.revision)
        else:
            downgrade(args.db, args.revision)
    except UnknownRevision as exc:
        return fail(f"revision {exc}", EXIT_USAGE)
    except StoreError as exc:
        return fail(f"--db: {where}: {' '.join(str(exc).split())}", EXIT_FAILURE)
    print(f"database at {where} is at revision {current(args.db) or 'base'}")
    return 0


def _serve_config(args: argparse.Namespace) -> ServeConfig:
    """The typed configuration of ``federation serve``, built from its parsed flags."""
    from federation.domain.plans import PlanLimits
    from federation.service.jobs import SubmitBatching
    from federation.service.server import ServeConfig

    return ServeConfig(
        listen=args.listen, db=args.db, tokens=args.tokens,
        tls_cert=args.tls_cert, tls_key=args.tls_key, tls_client_ca=args.tls_client_ca,
        migrate=not args.no_migrate,
        agent_grace_seconds=args.agent_grace_seconds,
        failover_grace_seconds=args.failover_grace,
        dispatch_timeout_seconds=args.dispatch_timeout,
        round_debounce_seconds=args.round_debounce_seconds,
        plan_limits=policy_limits(args, PlanLimits(time_limit_seconds=args.plan_time_limit)),
        max_pending_per_round=args.max_pending_per_round,
        shutdown_grace_seconds=args.shutdown_grace_seconds,
        control_loop=not args.no_control_loop,
        submit_batching=SubmitBatching(max_items=args.submit_batch_size,
                                       max_delay_seconds=args.submit_batch_delay_ms / 1000),
        watch_coalesce_seconds=args.watch_coalesce_ms / 1000,
        limits=limits_from_args(args),
        metrics_listen=args.metrics_listen, health_listen=args.health_listen, log_format=args.log_format,
        audit_retention_seconds=args.audit_retention,
        leader_election=args.leader_election, lease_seconds=args.lease_seconds,
    )


def writable(path: str, flag: str) -> None:
    """Refuse an output file that cannot be written, before a run that may take minutes
    (``--json DIR`` was a traceback, ``--json /no/such/dir/x`` an error naming no flag, both
    only after every policy had run)."""
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        raise InvalidInput(flag, f"{path}: is a directory, not a file")
    if not parent.is_dir():
        raise InvalidInput(flag, f"{path}: no such directory {str(parent)!r}")
    if not os.access(target if target.exists() else parent, os.W_OK):
        raise InvalidInput(flag, f"{path}: permission denied")


def _bench(args: argparse.Namespace) -> int:
    from rich.console import Console

    from federation.sim.bench import run_bench

    for path, flag in ((args.json_out, "--json"), (args.placements_out, "--placements")):
        if path is not None:
            writable(path, flag)
    policies = args.policies or ["cpsat", "volcano-greedy", "karmada-spread", "armada-drf"]
    run_bench(args.scenario, policies, args.json_out, Console(), limits=policy_limits(args),
              placements_out=args.placements_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
