"""The agent's Prometheus metrics: bind latency, restart-policy actions, watch reconnects.

``federation-agent --metrics-listen HOST:PORT`` serves them (``federation.metrics.exporter``).
Binding and watching are measured by wrapping the backend (``measured``), so the
runtime and the Kubernetes adapter stay free of metric code; the actions are counted
where the runtime reports them to central. No ``cluster`` label: an agent serves one
cluster, and Prometheus' target labels (job/instance, or the chart's ServiceMonitor)
already tell agents apart.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agents.backend import BindingRejected, ClusterBackend
from agents.core.records import ChangeEvent

BIND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class AgentMetrics:
    enabled = True

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._bind = Histogram("federation_agent_bind_duration_seconds",
                               "Latency of one pod Binding call to the kube-apiserver, by outcome "
                               "(ok, rejected by the apiserver, error).", ["outcome"], buckets=BIND_BUCKETS,
                               registry=r)
        self._restarts = Counter("federation_agent_restarts",
                                 "Restart-policy actions the agent carried out, by action (RestartPod, RestartTask, "
                                 "RestartJob, AbortJob, TerminateJob, CompleteJob).", ["action"], registry=r)
        self._watch = Counter("federation_agent_watch_reconnects",
                              "Times the agent re-opened its watch of the cluster after it ended or failed.",
                              registry=r)
        self._connected = Gauge("federation_agent_connected",
                                "1 while the agent's stream to the central service is open and accepted.",
                                registry=r)
        for outcome in ("ok", "rejected", "error"):
            self._bind.labels(outcome)

    def bound(self, outcome: str, seconds: float) -> None:
        self._bind.labels(outcome).observe(seconds)

    def actions(self, kinds: Iterable[str]) -> None:
        for kind in kinds:
            self._restarts.labels(kind).inc()

    def watch_reopened(self) -> None:
        self._watch.inc()

    def connected(self, up: bool) -> None:
        self._connected.set(1 if up else 0)


class NoAgentMetrics(AgentMetrics):
    enabled = False

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    def bound(self, outcome: str, seconds: float) -> None:
        pass

    def actions(self, kinds: Iterable[str]) -> None:
        pass

    def watch_reopened(self) -> None:
        pass

    def connected(self, up: bool) -> None:
        pass


NO_AGENT_METRICS = NoAgentMetrics()


class _Measured:
    """Delegates to ``inner``; times ``bind_pod`` and counts every ``watch()`` after the first."""

    def __init__(self, inner: ClusterBackend, metrics: AgentMetrics) -> None:
        self._inner = inner
        self._metrics = metrics
        self._watches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        started = time.perf_counter()
        outcome = "error"
        try:
            await self._inner.bind_pod(namespace, name, node)
            outcome = "ok"
        except BindingRejected:
            outcome = "rejected"
            raise
        finally:
            self._metrics.bound(outcome, time.perf_counter() - started)

    def watch(self) -> AsyncIterator[ChangeEvent]:
        self._watches += 1
        if self._watches > 1:
            self._metrics.watch_reopened()
        return self._inner.watch()


def measured(backend: ClusterBackend, metrics: AgentMetrics) -> ClusterBackend:
    """``backend`` with bind latency and watch reconnects measured (itself when metrics are off)."""
    if not metrics.enabled:
        return backend
    return cast(ClusterBackend, _Measured(backend, metrics))
