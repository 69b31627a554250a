"""``federation-agent``: the agent process of one member cluster.

    federation-agent --cluster NAME --server HOST:PORT [--kubeconfig PATH] [--token T]
                     [--ca CA --cert CERT --key KEY] [--namespace NS]

Backends: ``--kubeconfig PATH`` (or, inside a pod, the service account) talks to a real
kube-apiserver through ``agents.k8s`` — imported lazily so the fake path needs no
Kubernetes client; ``--fake-nodes N`` runs an in-memory cluster of N eight-GPU nodes
(smoke tests and trying the protocol without a cluster).

Leader election: with ``--namespace`` (or ``--lease-namespace``) on a Kubernetes backend,
replicas campaign for a Lease and only the leader runs the runtime, with the Lease's
acquisition time as its epoch; without it the process start time is the epoch, and a
``Fence`` ends the process (exit 3) so a supervisor can restart it as a new epoch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import grpc

from agents.backend import ClusterBackend
from agents.runtime import AgentRuntime, Fenced, RuntimeConfig

EXIT_FENCED = 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="federation-agent", description="Run the federation agent of one cluster.")
    p.add_argument("--cluster", required=True, help="the member cluster's name")
    p.add_argument("--server", required=True, help="central service HOST:PORT")
    p.add_argument("--kubeconfig", help="kubeconfig of the member cluster (default: in-cluster service account)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--fake-nodes", type=int, default=0, help="use an in-memory cluster of N 8-GPU nodes")
    p.add_argument("--token", help="this cluster's agent token (prefer --token-file)")
    p.add_argument("--token-file", help="file holding the agent token")
    p.add_argument("--ca", help="CA bundle (PEM) to verify the central service; enables TLS")
    p.add_argument("--cert", help="client certificate (PEM) for mutual TLS")
    p.add_argument("--key", help="client key (PEM) for mutual TLS")
    p.add_argument("--namespace", help="namespace of the leader-election Lease (enables leader election)")
    p.add_argument("--lease-namespace", help="alias of --namespace")
    p.add_argument("--lease-name", default="federation-agent")
    p.add_argument("--lease-duration", type=float, default=15.0)
    p.add_argument("--identity", default=os.environ.get("POD_NAME", ""), help="this replica's name")
    p.add_argument("--label-discovery", default="", help="comma-separated node label keys, highest network level "
                                                          "first, to discover HyperNodes from (Volcano label source)")
    p.add_argument("--cluster-label", action="append", default=[], metavar="KEY=VALUE",
                   help="a label of the cluster (used by propagation policies), repeatable")
    p.add_argument("--heartbeat-seconds", type=float, default=5.0)
    p.add_argument("--snapshot-period-seconds", type=float, default=30.0)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def credentials(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    if not (args.ca or args.cert or args.key):
        return None
    if bool(args.cert) != bool(args.key):
        raise SystemExit("error: --cert and --key go together")
    return grpc.ssl_channel_credentials(root_certificates=_read(args.ca), private_key=_read(args.key),
                                        certificate_chain=_read(args.cert))


def config(args: argparse.Namespace) -> RuntimeConfig:
    token = args.token
    if args.token_file:
        token = Path(args.token_file).read_text().strip()
    labels = {}
    for item in args.cluster_label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --cluster-label {item!r} is not KEY=VALUE")
        labels[key] = value
    return RuntimeConfig(
        cluster=args.cluster, server=args.server, agent_id=args.identity, token=token,
        credentials=credentials(args), heartbeat_seconds=args.heartbeat_seconds,
        snapshot_period_seconds=args.snapshot_period_seconds,
        label_keys=tuple(k.strip() for k in args.label_discovery.split(",") if k.strip()),
        cluster_labels=labels,
    )


def fake_backend(cluster: str, nodes: int) -> ClusterBackend:
    import time

    from agents.core.records import NodeRecord
    from agents.fake.cluster import FakeCluster
    from federation.domain.resources import Resources

    return FakeCluster(cluster, [NodeRecord(f"{cluster}-n{i:03d}", Resources.of(gpu=8, cpu=96_000))
                                 for i in range(nodes)], clock=time.time)


async def run(args: argparse.Namespace) -> int:
    cfg = config(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if args.fake_nodes:
        return await run_runtime(fake_backend(args.cluster, args.fake_nodes), cfg, stop)
    if not args.kubeconfig and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        print("error: --kubeconfig is required outside a pod (or use --fake-nodes N)", file=sys.stderr)
        return 2
    from agents.k8s.backend import KubernetesBackend  # lazy: only this path needs kubernetes_asyncio

    backend = await KubernetesBackend.from_kubeconfig(args.kubeconfig, args.cluster, context=args.context)
    try:
        await backend.start()
        namespace = args.namespace or args.lease_namespace
        if namespace:
            return await lead_elected(backend, cfg, namespace, args, stop)
        return await run_runtime(backend, cfg, stop)
    finally:
        await backend.close()


async def run_runtime(backend: ClusterBackend, cfg: RuntimeConfig, stop: asyncio.Event,
                      epoch: int | None = None) -> int:
    runtime = AgentRuntime(backend, cfg, epoch=epoch)
    task = asyncio.create_task(runtime.run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        runtime.stop()
        await task
    except Fenced as exc:
        print(f"federation-agent: {exc}", file=sys.stderr)
        return EXIT_FENCED
    finally:
        stopping.cancel()
    return 0


async def lead_elected(backend: Any, cfg: RuntimeConfig, namespace: str, args: argparse.Namespace,
                       stop: asyncio.Event) -> int:
    """Campaign for the Lease; each term runs the runtime with the term's epoch behind a
    backend that refuses writes once the term is over. A Fence ends the term (the Lease is
    released and the replica campaigns again, with a newer epoch if it wins)."""
    from agents.k8s.lease import KubernetesLeaseStore
    from agents.leader import GuardedBackend, LeaderElector, Leadership

    identity = cfg.agent_id or f"{os.uname().nodename}-{os.getpid()}"
    store = KubernetesLeaseStore(backend.api_client, namespace, args.lease_name)
    duration = args.lease_duration
    elector = LeaderElector(store, identity, lease_duration=duration, renew_deadline=duration * 2 / 3,
                            retry_period=duration / 7.5)

    async def lead(term: Leadership) -> None:
        code = await run_runtime(GuardedBackend(backend, term), cfg, stop, epoch=term.epoch)
        if code == EXIT_FENCED:
            logging.getLogger(__name__).warning("term ended by a Fence; campaigning again")

    await elector.run(lead, stop=stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
