"""``--log-format json`` (and ``--metrics-listen``) on the real ``federation serve`` and
``federation-agent`` processes:
every line of both logs is one JSON event; placements carry job, queue, cluster and round
fields; the agent's events carry its cluster; and neither the database password nor any
token (the tenant's, the agent's, a wrong one a client tried) appears anywhere in the output.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PostgresServer
from fedctlkit import REPO, env, serve
from fleetkit import eventually, job_spec
from promkit import get
from sqlalchemy import make_url, text
from sqlalchemy.engine import Engine

from federation.client import FederationClient, ServiceError
from federation.store import migrate as migrations
from federation.v1 import jobs_pb2, queues_pb2
from tests.fixtures.ports import free_port

PASSWORD = "pw-" + uuid.uuid4().hex
TENANT = "tenant-" + uuid.uuid4().hex
AGENT = "agent-" + uuid.uuid4().hex
WRONG = "wrong-" + uuid.uuid4().hex


def _database_with_password(server: PostgresServer, admin: Engine) -> str:
    """A role with a password owning a fresh database (the test server trusts loopback, so the
    password is accepted as written; what matters is that it is in the URL we pass)."""
    name = f"logs_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'"))
        conn.execute(text(f"CREATE DATABASE {name} OWNER {name}"))
    url = make_url(server.url).set(username=name, password=PASSWORD, database=name)
    rendered = url.render_as_string(hide_password=False)
    migrations.upgrade(rendered)
    return rendered


def _events(path: Path) -> list[dict[str, Any]]:
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"{path.name}:{number} is not one JSON event: {line!r}") from None
        assert {"time", "level", "logger", "message"} <= set(event), event
        out.append(event)
    return out


@pytest.mark.postgres
async def test_json_logs_of_serve_and_agent_have_ids_as_fields_and_no_secrets(
        postgres_server: PostgresServer, pg_admin: Engine, tmp_path: Path) -> None:
    db = _database_with_password(postgres_server, pg_admin)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({"tenants": {TENANT: "ml"}, "admins": ["ml"], "clusters": {"east": AGENT}}))
    agent_log = tmp_path / "agent.log"
    central_metrics, agent_metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with serve(db, tmp_path, "--log-format", "json", "--tokens", str(tokens),
               "--metrics-listen", central_metrics) as srv:
        with open(agent_log, "w") as err:
            agent = subprocess.Popen(
                [sys.executable, "-m", "agents.main", "--cluster", "east", "--server", srv.address,
                 "--fake-nodes", "2", "--token", AGENT, "--log-format", "json", "--heartbeat-seconds", "0.2",
                 "--metrics-listen", agent_metrics],
                stdout=subprocess.DEVNULL, stderr=err, env=env(), cwd=REPO)
        try:
            async with FederationClient(srv.address, token=TENANT, timeout=20.0) as c:
                await c.create_queue(queues_pb2.Queue(name="research", weight=1, owners=["ml"]))
                spec = job_spec("logged", pods=1, tier=None)
                del spec.tasks[0].resources["memory"]  # --fake-nodes nodes offer GPUs and CPU only
                await c.submit_job(spec)
                await eventually(lambda: _running(c, "logged"), what="job running")
            async with FederationClient(srv.address, token=WRONG, timeout=20.0) as intruder:
                with pytest.raises(ServiceError):
                    await intruder.list_jobs()
            # The flags of both real processes serve /metrics (the series are checked in depth,
            # through a real Prometheus, by test_metrics_prometheus.py).
            central = (await asyncio.to_thread(get, f"http://{central_metrics}/metrics")).decode()
            assert 'federation_submissions_total{outcome="created"} 1.0' in central
            assert 'federation_jobs{queue="research",state="running"} 1.0' in central
            agent_text = (await asyncio.to_thread(get, f"http://{agent_metrics}/metrics")).decode()
            assert "federation_agent_connected 1.0" in agent_text
            assert 'federation_agent_bind_duration_seconds_count{outcome="ok"} 1.0' in agent_text
        finally:
            agent.send_signal(signal.SIGTERM)
            await asyncio.to_thread(agent.wait, 30)
        assert srv.stop() == 0

    server_events, agent_events = _events(srv.log), _events(agent_log)
    placed = [e for e in server_events if e.get("job") == "logged" and "round" in e]
    assert placed, server_events
    assert placed[0]["queue"] == "research" and placed[0]["cluster"] == "east"
    assert any("round" in e and "trigger" in e for e in server_events)  # the round summaries
    assert any(e.get("cluster") == "east" and e.get("agent") for e in server_events)  # the agent's stream
    assert agent_events and all(e.get("cluster") == "east" for e in agent_events)
    everything = srv.log.read_text() + agent_log.read_text()
    for secret in (PASSWORD, TENANT, AGENT, WRONG):
        assert secret not in everything
    assert ":***@" in everything  # the URL was logged, masked


async def _running(c: FederationClient, name: str) -> bool:
    return bool((await c.get_job(name)).state == jobs_pb2.JOB_STATE_RUNNING)
