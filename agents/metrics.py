"""The agent's Prometheus metrics: bind latency, restart-policy actions, watch reconnects.

``federation-agent --metrics-listen HOST:PORT`` serves them (``federation.metrics.exporter``).
Binding is measured by wrapping the backend (``measured``) and watch reconnects are
counted where they happen (``agents.telemetry``, bumped by the Kubernetes informers and the
runtime), so the runtime and the Kubernetes adapter stay free of metric code; the actions
are counted where the runtime reports them to central. No ``cluster`` label: an agent serves one
cluster, and Prometheus' target labels (job/instance, or the chart's ServiceMonitor)
already tell agents apart.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from agents.backend import BindingRejected, ClusterBackend
from agents.telemetry import WATCH_RECONNECT_REASONS, WATCH_RECONNECTS

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
        r.register(_WatchReconnects())
        self._connected = Gauge("federation_agent_connected",
                                "1 while the agent's stream to the central service is open and accepted.",
                                registry=r)
        self._leader = Gauge("federation_agent_leader",
                             "1 while this replica acts for its cluster (holds the Lease, or runs without "
                             "leader election); standby replicas report 0.", registry=r)
        for outcome in ("ok", "rejected", "error"):
            self._bind.labels(outcome)

    def bound(self, outcome: str, seconds: float) -> None:
        self._bind.labels(outcome).observe(seconds)

    def actions(self, kinds: Iterable[str]) -> None:
        for kind in kinds:
            self._restarts.labels(kind).inc()

    def connected(self, up: bool) -> None:
        self._connected.set(1 if up else 0)

    def leading(self, leader: bool) -> None:
        self._leader.set(1 if leader else 0)


class NoAgentMetrics(AgentMetrics):
    enabled = False

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    def bound(self, outcome: str, seconds: float) -> None:
        pass

    def actions(self, kinds: Iterable[str]) -> None:
        pass

    def connected(self, up: bool) -> None:
        pass

    def leading(self, leader: bool) -> None:
        pass


NO_AGENT_METRICS = NoAgentMetrics()


class _WatchReconnects(Collector):
    """``federation_agent_watch_reconnects_total{reason}`` from ``agents.telemetry`` at scrape time."""

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "federation_agent_watch_reconnects",
            "Watches of the member cluster re-opened after a failure, by reason: expired (410 Gone, relisted), "
            "error (a list/watch request failed), stream (the runtime's change stream failed).", labels=["reason"])
        for reason in sorted({*WATCH_RECONNECT_REASONS, *WATCH_RECONNECTS}):
            family.add_metric([reason], WATCH_RECONNECTS[reason])
        yield family


class _Measured:
    """Delegates to ``inner``; times ``bind_pod``."""

    def __init__(self, inner: ClusterBackend, metrics: AgentMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

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


def measured(backend: ClusterBackend, metrics: AgentMetrics) -> ClusterBackend:
    """``backend`` with bind latency measured (itself when metrics are off)."""
    if not metrics.enabled:
        return backend
    return cast(ClusterBackend, _Measured(backend, metrics))
