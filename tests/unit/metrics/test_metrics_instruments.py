"""Instrumented metrics: what each update exports, the no-op twin, the submission
outcome names, the agent's measured backend, and ``--metrics-listen`` checked at the edge."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agents.backend import BindingRejected
from agents.core.records import NodeRecord, PodManifest
from agents.fake.cluster import FakeCluster
from agents.main import main as agent_main
from agents.metrics import NO_AGENT_METRICS, AgentMetrics, measured
from agents.telemetry import WATCH_RECONNECTS, watch_reconnected
from federation.cli.main import main as federation_main
from federation.domain.errors import InvalidInput
from federation.domain.resources import Resources
from federation.metrics.exporter import parse_listen
from federation.metrics.instruments import LOOP_LAG_INTERVAL, NO_METRICS, ServiceMetrics
from federation.service.auth import PermissionDenied
from federation.service.jobs import refusal_outcome
from federation.store.errors import Unavailable


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_round_phases_solver_statuses_submissions_and_dispatch_are_counted() -> None:
    m = ServiceMetrics()
    with m.phase("plan"):
        pass
    m.round_recorded("OPTIMAL")
    m.round_failed()
    m.submission("created", 0.004)
    m.submission("invalid_argument", 0.0004)
    m.work_dispatched(0.3)
    r = m.registry
    assert _value(r, "federation_round_duration_seconds_count", phase="plan") == 1
    assert _value(r, "federation_round_duration_seconds_count", phase="load") == 0  # exported before use
    assert _value(r, "federation_rounds_total", solver_status="OPTIMAL") == 1
    assert _value(r, "federation_round_failures_total") == 1
    assert _value(r, "federation_submissions_total", outcome="created") == 1
    assert _value(r, "federation_submissions_total", outcome="invalid_argument") == 1
    assert _value(r, "federation_work_dispatch_seconds_bucket", le="0.5") == 1
    assert _value(r, "federation_submit_duration_seconds_bucket", le="0.0005") == 1
    assert _value(r, "federation_submit_duration_seconds_bucket", le="0.005") == 2


async def test_the_loop_lag_probe_observes_each_turn_until_cancelled() -> None:
    m = ServiceMetrics()
    probe = asyncio.create_task(m.watch_loop_lag())
    await asyncio.sleep(LOOP_LAG_INTERVAL * 2.5)
    time.sleep(0.15)  # hold the loop: the probe due meanwhile runs at least 50 ms late
    await asyncio.sleep(LOOP_LAG_INTERVAL * 1.5)
    probe.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await probe
    count = _value(m.registry, "federation_event_loop_lag_seconds_count") or 0
    assert count >= 2
    assert (_value(m.registry, "federation_event_loop_lag_seconds_bucket", le="0.03") or 0) < count


def test_metrics_off_registers_and_records_nothing() -> None:
    with NO_METRICS.phase("plan"):
        NO_METRICS.submission("created", 0.001)
    assert generate_latest(NO_METRICS.registry) == b""


@pytest.mark.parametrize("exc, outcome", [
    (InvalidInput("spec.queue", "unknown"), "invalid_argument"),
    (PermissionDenied("not yours"), "permission_denied"),
    (Unavailable("database gone"), "unavailable"),
    (RuntimeError("a bug"), "internal"),
], ids=["bad-spec", "foreign-queue", "database-down", "bug"])
def test_a_refused_submission_is_counted_under_the_grpc_code_it_gets(exc: Exception, outcome: str) -> None:
    assert refusal_outcome(exc) == outcome


def _cluster() -> FakeCluster:
    return FakeCluster("east", [NodeRecord("n0", Resources.of(gpu=8))])


def test_the_agent_times_binds_by_outcome_and_counts_restart_actions_and_watch_reconnects() -> None:
    async def scenario() -> AgentMetrics:
        metrics = AgentMetrics()
        backend = measured(_cluster(), metrics)
        await backend.create_pod(PodManifest("p-0", "default", requests=Resources.of(gpu=1)))
        await backend.bind_pod("default", "p-0", "n0")
        with pytest.raises(BindingRejected):
            await backend.bind_pod("default", "p-0", "n0")  # already bound
        assert backend.cluster == "east"  # everything else is delegated
        metrics.actions(["RestartPod", "RestartPod", "AbortJob"])
        return metrics

    before = dict(WATCH_RECONNECTS)
    watch_reconnected("expired")  # what an informer does on 410 Gone (tests/e2e: a real one)

    r = asyncio.run(scenario()).registry
    assert _value(r, "federation_agent_bind_duration_seconds_count", outcome="ok") == 1
    assert _value(r, "federation_agent_bind_duration_seconds_count", outcome="rejected") == 1
    expired = _value(r, "federation_agent_watch_reconnects_total", reason="expired")
    assert expired == before.get("expired", 0) + 1
    assert _value(r, "federation_agent_watch_reconnects_total", reason="error") is not None  # exported at 0
    assert _value(r, "federation_agent_restarts_total", action="RestartPod") == 2


def test_metrics_off_leaves_the_agent_backend_unwrapped() -> None:
    cluster = _cluster()
    assert measured(cluster, NO_AGENT_METRICS) is cluster


@pytest.mark.parametrize("value", ["9090", "host:", "host:port", "host:70000"])
def test_a_bad_metrics_address_is_refused_naming_the_flag(value: str) -> None:
    with pytest.raises(ValueError, match="--metrics-listen"):
        parse_listen(value)


def test_serve_and_the_agent_refuse_a_bad_metrics_address_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert federation_main(["serve", "--metrics-listen", "nope"]) == 2
    assert agent_main(["--cluster", "east", "--server", "127.0.0.1:1", "--metrics-listen", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("--metrics-listen: 'nope' is not HOST:PORT") == 2
