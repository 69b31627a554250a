"""The agent on a real cluster: one ``KubernetesBackend``, Lease leader election, and
the runtime run only while this replica leads (docs/design/leader-election.md).

``agents/main.py`` (``federation-agent --cluster NAME --server HOST:PORT
[--kubeconfig PATH] [--lease-name N --lease-namespace NS --lease-duration S]``) calls
``run_agent_on_kubernetes`` with the runtime's entry point as ``runtime``:

    async def runtime(backend: ClusterBackend, epoch: int, agent_id: str) -> None

It is started with a ``GuardedBackend`` (writes refused once the term is over) and the
term's epoch (Lease acquisition time in ns, for ``Hello``); it is cancelled the moment
the Lease is lost, and when it returns (fenced by central) the Lease is released and
this replica campaigns again, for a new, larger epoch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

from agents.backend import ClusterBackend
from agents.k8s.backend import KubernetesBackend
from agents.k8s.lease import KubernetesLeaseStore
from agents.leader import GuardedBackend, LeaderElector, Leadership

log = logging.getLogger(__name__)

Runtime = Callable[[ClusterBackend, int, str], Coroutine[Any, Any, None]]

DEFAULT_LEASE_NAMESPACE = "federation-system"
DEFAULT_LEASE_DURATION = 15.0


def default_identity() -> str:
    """Unique per process: pod name (hostname in a pod), pid and start time."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}-{os.getpid()}-{time.time_ns() // 1_000_000}"


def timings(lease_duration: float) -> tuple[float, float]:
    """(renew deadline, retry period) for a lease duration: 2/3 of it to renew, and a
    retry period within the remaining third (15 s -> 10 s and 2 s, as client-go)."""
    renew = lease_duration * 2 / 3
    return renew, min(2.0, (lease_duration - renew) / 2)


def elector_for(backend: KubernetesBackend, *, identity: str, lease_namespace: str, lease_name: str,
                lease_duration: float) -> LeaderElector:
    renew, retry = timings(lease_duration)
    store = KubernetesLeaseStore(backend.api_client, lease_namespace, lease_name)
    return LeaderElector(store, identity, lease_duration=lease_duration, renew_deadline=renew, retry_period=retry)


async def run_agent_on_kubernetes(
    cluster: str,
    runtime: Runtime,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    lease_namespace: str = DEFAULT_LEASE_NAMESPACE,
    lease_name: str | None = None,
    lease_duration: float = DEFAULT_LEASE_DURATION,
    identity: str | None = None,
    stop: asyncio.Event | None = None,
    backend: KubernetesBackend | None = None,
) -> None:
    """Campaign for ``lease_namespace/lease_name`` (default ``federation-agent-<cluster>``)
    and run ``runtime`` during each term, until ``stop`` is set; then release the Lease
    (so another replica takes over at once) and close the backend."""
    owned = backend is None
    if backend is None:
        backend = await KubernetesBackend.from_kubeconfig(kubeconfig, cluster, context=context)
    who = identity or default_identity()
    elector = elector_for(backend, identity=who, lease_namespace=lease_namespace,
                          lease_name=lease_name or f"federation-agent-{cluster}", lease_duration=lease_duration)

    async def lead(term: Leadership) -> None:
        await backend.start()  # informers only while leading: followers stay idle
        log.info("cluster %s: %s leads with epoch %d", cluster, who, term.epoch)
        await runtime(GuardedBackend(backend, term), term.epoch, who)

    try:
        await elector.run(lead, stop=stop)
    finally:
        if owned:
            await backend.close()
