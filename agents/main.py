"""``federation-agent``: the agent process of one member cluster.

    federation-agent --cluster NAME --server HOST:PORT [--kubeconfig PATH] [--token T]
                     [--ca CA --cert CERT --key KEY] [--namespace NS]

Backends: ``--kubeconfig PATH`` (or, inside a pod, the service account) talks to a real
kube-apiserver through ``agents.k8s`` — imported lazily so the fake path needs no
Kubernetes client; ``--fake-nodes N`` runs an in-memory cluster of N eight-GPU nodes
(smoke tests and trying the protocol without a cluster).

Leader election (Kubernetes backends, ``agents.k8s.run``): replicas campaign for the
Lease ``--namespace``/``--lease-name`` and only the leader runs the runtime, with the
Lease's acquisition time as its epoch; a ``Fence`` ends the term (the Lease is released
and the replica campaigns again). With ``--no-leader-election`` or ``--fake-nodes`` the
process start time is the epoch and a ``Fence`` ends the process (exit 3), so a
supervisor restarts it as a newer epoch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import replace

import grpc

from agents.backend import ClusterBackend
from agents.failpoints import with_failpoints
from agents.flags import (
    LEASE_SECONDS_MAX,
    LEASE_SECONDS_MIN,
    MAX_FAKE_NODES,
    agent_identity,
    agent_token,
    checked,
    cluster_label,
    label_keys,
    pem_file,
    server_address,
    token_file,
)
from agents.metrics import NO_AGENT_METRICS, AgentMetrics, measured
from agents.runtime import AgentRuntime, Fenced, RuntimeConfig
from federation.cli.errors import fail
from federation.cli.numbers import integer_flag, number_flag
from federation.domain.errors import InvalidInput
from federation.domain.names import dns_label, dns_subdomain
from federation.logs import add_secret, configure, set_fields
from federation.metrics.exporter import parse_listen, serve_metrics, with_process_metrics

EXIT_FENCED = 3
log = logging.getLogger("agents.main")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="federation-agent", description="Run the federation agent of one cluster.")
    p.add_argument("--cluster", required=True, type=checked(dns_label), help="the member cluster's name")
    p.add_argument("--server", required=True, type=checked(server_address), help="central service HOST:PORT")
    p.add_argument("--kubeconfig", help="kubeconfig of the member cluster (default: in-cluster service account)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--fake-nodes", type=integer_flag(0, MAX_FAKE_NODES), default=0,
                   help=f"use an in-memory cluster of N 8-GPU nodes (at most {MAX_FAKE_NODES})")
    p.add_argument("--token", type=checked(agent_token), help="this cluster's agent token (prefer --token-file)")
    p.add_argument("--token-file", help="file holding the agent token")
    p.add_argument("--ca", help="CA bundle (PEM) to verify the central service; enables TLS")
    p.add_argument("--cert", help="client certificate (PEM) for mutual TLS")
    p.add_argument("--key", help="client key (PEM) for mutual TLS")
    p.add_argument("--namespace", type=checked(dns_label),
                   help="namespace of the leader-election Lease (default federation-system)")
    p.add_argument("--lease-namespace", type=checked(dns_label), help="alias of --namespace")
    p.add_argument("--lease-name", type=checked(dns_subdomain),
                   help="the Lease's name (default federation-agent-<cluster>)")
    p.add_argument("--no-leader-election", action="store_true",
                   help="act without a Lease (a single replica; the epoch is the process start time)")
    p.add_argument("--lease-duration", type=number_flag(LEASE_SECONDS_MIN, LEASE_SECONDS_MAX), default=15.0,
                   metavar="SECONDS", help="the Lease's duration; renewal at 2/3 of it (default 15)")
    p.add_argument("--identity", type=checked(agent_identity), default=os.environ.get("POD_NAME", ""),
                   help="this replica's name")
    p.add_argument("--label-discovery", type=checked(label_keys), default="",
                   help="comma-separated node label keys, highest network level first, to discover HyperNodes "
                        "from (Volcano label source)")
    p.add_argument("--cluster-label", action="append", type=checked(cluster_label), default=[], metavar="KEY=VALUE",
                   help="a label of the cluster (used by propagation policies), repeatable")
    p.add_argument("--heartbeat-seconds", type=number_flag(0.1, 3600), default=5.0, metavar="SECONDS",
                   help="a heartbeat this often (default 5; keep it under central's --agent-grace-seconds)")
    p.add_argument("--snapshot-period-seconds", type=number_flag(1, 86400), default=30.0, metavar="SECONDS",
                   help="a snapshot at least this often, besides one on every change (default 30)")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="text, or json: one JSON object per line with the cluster (and job) as fields")
    p.add_argument("--metrics-listen", metavar="HOST:PORT",
                   help="serve Prometheus metrics on http://HOST:PORT/metrics (off by default)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def credentials(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    """TLS from ``--ca``/``--cert``/``--key``, each file read bounded; ``InvalidInput`` naming the flag."""
    if not (args.ca or args.cert or args.key):
        return None
    if bool(args.cert) != bool(args.key):
        raise InvalidInput("--cert", "--cert and --key go together")
    return grpc.ssl_channel_credentials(root_certificates=pem_file(args.ca, "--ca"),
                                        private_key=pem_file(args.key, "--key"),
                                        certificate_chain=pem_file(args.cert, "--cert"))


def config(args: argparse.Namespace) -> RuntimeConfig:
    """The runtime's configuration; reads the secret files, so ``InvalidInput`` names a bad one.
    Two flags that say the same thing must agree: one of them would be ignored."""
    if args.token and args.token_file:
        raise InvalidInput("--token", "give --token or --token-file, not both")
    if args.namespace and args.lease_namespace and args.namespace != args.lease_namespace:
        raise InvalidInput("--lease-namespace", f"{args.lease_namespace!r} differs from --namespace "
                                                f"{args.namespace!r}, of which it is an alias")
    token = token_file(args.token_file) if args.token_file else args.token
    add_secret(token)
    return RuntimeConfig(
        cluster=args.cluster, server=args.server, agent_id=args.identity, token=token,
        credentials=credentials(args), heartbeat_seconds=args.heartbeat_seconds,
        snapshot_period_seconds=args.snapshot_period_seconds,
        label_keys=args.label_discovery, cluster_labels=dict(args.cluster_label),
    )


def fake_backend(cluster: str, nodes: int) -> ClusterBackend:
    import time

    from agents.core.records import NodeRecord
    from agents.fake.cluster import FakeCluster
    from federation.domain.resources import Resources

    return FakeCluster(cluster, [NodeRecord(f"{cluster}-n{i:03d}", Resources.of(gpu=8, cpu=96_000))
                                 for i in range(nodes)], clock=time.time)


async def run(args: argparse.Namespace, cfg: RuntimeConfig, metrics: AgentMetrics = NO_AGENT_METRICS) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if args.fake_nodes:
        return await run_runtime(fake_backend(args.cluster, args.fake_nodes), cfg, stop, metrics=metrics)
    if not args.kubeconfig and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        print("error: --kubeconfig is required outside a pod (or use --fake-nodes N)", file=sys.stderr)
        return 2
    if args.no_leader_election:
        from agents.k8s.backend import KubernetesBackend  # lazy: only this path needs kubernetes_asyncio

        backend = await KubernetesBackend.from_kubeconfig(args.kubeconfig, args.cluster, context=args.context)
        try:
            await backend.start()
            return await run_runtime(backend, cfg, stop, metrics=metrics)
        finally:
            await backend.close()
    from agents.k8s.run import DEFAULT_LEASE_NAMESPACE, run_agent_on_kubernetes

    fenced = 0

    async def runtime(backend: ClusterBackend, epoch: int, agent_id: str) -> None:
        nonlocal fenced
        code = await run_runtime(with_failpoints(backend), replace(cfg, agent_id=agent_id), stop, epoch=epoch,
                                 metrics=metrics)
        if code == EXIT_FENCED:  # the term ends; the Lease is released and we campaign again
            fenced += 1

    await run_agent_on_kubernetes(
        args.cluster, runtime, kubeconfig=args.kubeconfig, context=args.context,
        lease_namespace=args.namespace or args.lease_namespace or DEFAULT_LEASE_NAMESPACE,
        lease_name=args.lease_name, lease_duration=args.lease_duration, identity=args.identity or None, stop=stop)
    return 0


async def run_runtime(backend: ClusterBackend, cfg: RuntimeConfig, stop: asyncio.Event,
                      epoch: int | None = None, metrics: AgentMetrics = NO_AGENT_METRICS) -> int:
    runtime = AgentRuntime(measured(backend, metrics), cfg, epoch=epoch, metrics=metrics)
    task = asyncio.create_task(runtime.run())
    stopping = asyncio.create_task(stop.wait())
    metrics.leading(True)
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        runtime.stop()
        await task
    except Fenced as exc:
        log.error("federation-agent: %s", exc)
        return EXIT_FENCED
    finally:
        metrics.leading(False)
        stopping.cancel()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.metrics_listen:
        try:
            parse_listen(args.metrics_listen)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        cfg = config(args)  # before logging is set up: a bad file is one line, and nothing started
    except InvalidInput as exc:
        return fail(str(exc))
    configure(args.log_format, level=logging.DEBUG if args.verbose else logging.INFO)
    set_fields(cluster=args.cluster)
    metrics: AgentMetrics = NO_AGENT_METRICS
    exporter = None
    if args.metrics_listen:
        metrics = AgentMetrics()
        with_process_metrics(metrics.registry)
        try:
            exporter = serve_metrics(args.metrics_listen, metrics.registry)
        except OSError as exc:  # a taken port: one error line, not a traceback
            print(f"error: --metrics-listen {args.metrics_listen}: cannot listen ({exc.strerror or exc})",
                  file=sys.stderr)
            return 1
        log.info("metrics on http://%s/metrics", exporter.address)
    try:
        return asyncio.run(run(args, cfg, metrics))
    finally:
        if exporter is not None:
            exporter.stop()


if __name__ == "__main__":
    sys.exit(main())
