"""The metrics endpoints scraped by a REAL Prometheus server, and checked by promtool.

A small federation (real service, real store, two in-memory clusters driven by real
agent runtimes over real gRPC) runs a job through a pod failure and RestartPod, leaves
one job unplaceable and has one submission refused; a Prometheus server from Debian's
package scrapes the central ``--metrics-listen`` endpoint and one agent's, and the test
asks Prometheus' HTTP API for every series the issue lists, with the values this
workload must produce. ``promtool check metrics`` must be silent on both expositions.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from fleetkit import eventually, fleet, has_snapshot, job_spec
from prometheus_client import CollectorRegistry
from promkit import Prometheus, get, prometheus, promtool_check

from agents.metrics import AgentMetrics
from federation.client import ServiceError
from federation.metrics.exporter import serve_metrics, with_process_metrics
from federation.v1 import jobs_pb2


def _value(result: list[dict[str, Any]]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


async def _wait(prom: Prometheus, expr: str) -> list[dict[str, Any]]:
    return await asyncio.to_thread(prom.wait, expr)


async def _running(c: Any, name: str) -> bool:
    return bool((await c.get_job(name)).state == jobs_pb2.JOB_STATE_RUNNING)


async def test_prometheus_scrapes_every_listed_series_from_central_and_agent(migrated_url: str) -> None:
    agent_metrics = AgentMetrics(with_process_metrics(CollectorRegistry()))
    agent_exporter = serve_metrics("127.0.0.1:0", agent_metrics.registry)
    try:
        async with fleet(migrated_url, agents=False, metrics_listen="127.0.0.1:0") as f:
            assert f.server.metrics is not None
            central = f"127.0.0.1:{f.server.metrics.port}"
            f.start_agent("east", metrics=agent_metrics)
            f.start_agent("west")
            await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="snapshots")
            async with f.client() as c:
                await c.submit_job(job_spec("resilient", clusters=("east",), policies=(("RestartPod", "PodFailed"),)))
                await c.submit_job(job_spec("resilient", clusters=("east",), policies=(("RestartPod", "PodFailed"),)))
                await c.submit_job(job_spec("huge", pods=9, tier=1))  # 72 GPUs in one tier-1 leaf: never fits
                refused = job_spec("stray")
                refused.queue = "no-such-queue"
                with pytest.raises(ServiceError) as err:
                    await c.submit_job(refused)
                assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
                await eventually(lambda: _running(c, "resilient"), what="resilient running")
                f.clusters["east"].fail_pod("resilient-worker-1", exit_code=137)
                await eventually(lambda: (await_restarts(c)), what="restart recorded")

            with prometheus({"federation": central, "agent": agent_exporter.address}) as prom:
                assert _value(await _wait(prom, 'federation_jobs{queue="research",state="running"} == 1')) == 1
                assert _value(await _wait(prom, 'federation_jobs{queue="research",state="pending"} == 1')) == 1
                blocked = await _wait(prom, 'federation_pending_jobs{queue="research",reason!="not_planned"} == 1')
                assert blocked[0]["metric"]["reason"] in ("topology", "capacity", "unschedulable"), blocked
                assert _value(await _wait(prom, 'federation_queue_dominant_share{queue="research"} > 0')) == 16 / 64
                assert 0 < _value(await _wait(prom, 'federation_queue_fair_share{queue="research"}')) <= 1
                assert _value(await _wait(prom, 'sum(federation_cluster_up)')) == 2
                assert _value(await _wait(prom, 'federation_cluster_allocatable_gpus{cluster="east"}')) == 32
                assert _value(await _wait(prom, 'federation_cluster_free_gpus{cluster="east"} == 16')) == 16
                assert _value(await _wait(prom, "federation_agent_streams == 2")) == 2
                assert _value(await _wait(prom, 'federation_submissions_total{outcome="created"}')) == 2
                assert _value(await _wait(prom, 'federation_submissions_total{outcome="existing"}')) == 1
                assert _value(await _wait(prom, 'federation_submissions_total{outcome="invalid_argument"}')) == 1
                assert _value(await _wait(prom, "federation_work_dispatch_seconds_count >= 1")) >= 1
                for phase in ("load", "plan", "audit", "dispatch"):
                    await _wait(prom, f'federation_round_duration_seconds_count{{phase="{phase}"}} >= 1')
                await _wait(prom, 'federation_round_duration_seconds_bucket{phase="plan",le="+Inf"} >= 1')
                assert _value(await _wait(prom, "sum(federation_rounds_total)")) >= 1
                await _wait(prom, "federation_store_up == 1")
                await _wait(prom, 'process_resident_memory_bytes{job="federation"}')
                # The agent: two pods bound, one replaced and bound again after RestartPod.
                assert _value(await _wait(prom, 'federation_agent_bind_duration_seconds_count{outcome="ok"} >= 3')) >= 3
                assert _value(await _wait(prom, 'federation_agent_restarts_total{action="RestartPod"}')) == 1
                await _wait(prom, 'federation_agent_watch_reconnects_total{reason="expired"}')
                assert _value(await _wait(prom, "federation_agent_connected")) == 1
                assert prom.targets_up() == {"federation": "up", "agent": "up"}

            for target in (central, agent_exporter.address):
                text = await asyncio.to_thread(get, f"http://{target}/metrics")
                checked = promtool_check(text)
                assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), (
                    target, checked.stdout, checked.stderr)
    finally:
        agent_exporter.stop()


async def await_restarts(c: Any) -> bool:
    return bool((await c.get_job("resilient")).restarts >= 1)
