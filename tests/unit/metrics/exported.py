"""Every sample name the service and the agent export (histograms' _bucket/_sum/_count,
counters' _total, included), read from real expositions of fully populated registries."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agents.metrics import AgentMetrics
from federation.domain.plans import FederationSnapshot, Plan
from federation.domain.queues import Queue
from federation.metrics.gauges import FederationCollector, Observed
from federation.metrics.instruments import ServiceMetrics
from federation.store.stats import ClusterGauge


class _Stats:
    def job_counts(self) -> dict[tuple[str, str], int]:
        return {("q", "pending"): 1}

    def clusters(self) -> list[ClusterGauge]:
        return [ClusterGauge("c", True, True, 1, 2)]


def _names(registry: CollectorRegistry) -> set[str]:
    return {s.name for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}


def exported_names() -> set[str]:
    service = ServiceMetrics()
    service.round_recorded("OPTIMAL")
    service.round_failed()
    service.work_dispatched(1.0)
    observed = Observed(FederationSnapshot(clusters=(), queues=(Queue("q"),)), Plan())
    service.registry.register(FederationCollector(_Stats(), observed=lambda: observed, streams=lambda: 1))
    agent = AgentMetrics()
    agent.actions(["RestartPod"])
    agent.leading(True)
    return _names(service.registry) | _names(agent.registry)
