"""``--health-listen``: the plaintext, health-only port the chart's probes ask when the API port
speaks TLS (the kubelet's gRPC probe has a port and a service name, no TLS). Checked with the
real grpc-health-probe and grpcurl (hack/build-tools.sh): the health port answers in plaintext
what the TLS port answers, a standby is NOT_SERVING there too, and no other service (nor
reflection) is reachable on it, with or without a token."""

from __future__ import annotations

from pathlib import Path

import grpc
import grpc.aio
import pytest
import yaml
from fedctlkit import serve
from fleetkit import eventually
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servicekit import ADMIN, TOKENS, make_pki, secured

from federation.service.health import HEALTH, JOBS
from federation.service.leadership import LeaseTimings
from federation.service.server import ServerTls, build_server
from federation.store import Store
from federation.store import migrate as migrations
from federation.v1 import jobs_pb2, jobs_pb2_grpc, queues_pb2, queues_pb2_grpc
from tests.fixtures.gotools import arun_tool
from tests.fixtures.ports import free_port

CODE = grpc.StatusCode


async def test_serve_with_tls_answers_plaintext_probes_on_the_health_port_and_nothing_else(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    url = f"sqlite:///{tmp_path / 'federation.db'}"
    migrations.upgrade(url)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump(TOKENS))
    health_addr = f"127.0.0.1:{free_port()}"
    with serve(url, tmp_path, "--tls-cert", pki["server_cert"], "--tls-key", pki["server_key"],
               "--tokens", str(tokens), "--health-listen", health_addr, "--no-control-loop") as srv:
        # What the kubelet asks (plaintext, "" for readiness, the Health service for liveness).
        for service in ("", HEALTH):
            probe = await arun_tool("grpc-health-probe", f"-addr={health_addr}", f"-service={service}",
                                    "-connect-timeout=5s")
            assert probe.returncode == 0 and "status: SERVING" in probe.stdout + probe.stderr, (service, probe)
        # The API port is TLS only: the same plaintext probe fails there (the bug this port fixes) ...
        plain = await arun_tool("grpc-health-probe", f"-addr={srv.address}", "-connect-timeout=3s")
        assert plain.returncode != 0
        # ... and over TLS it reports what the health port reports.
        secure = await arun_tool("grpc-health-probe", f"-addr={srv.address}", "-tls",
                                 f"-tls-ca-cert={pki['ca']}", "-tls-server-name=localhost")
        assert secure.returncode == 0 and "status: SERVING" in secure.stdout + secure.stderr, secure.stderr
        await _only_health_on(health_addr)
    assert "--health-listen" in srv.log.read_text()  # the startup line names the port it opened


async def _only_health_on(addr: str) -> None:
    """The health port serves ``grpc.health.v1.Health`` and nothing else: no reflection, no API
    (UNIMPLEMENTED, not UNAUTHENTICATED: a valid token does not open it either)."""
    listed = await arun_tool("grpcurl", "-plaintext", addr, "list")
    assert listed.returncode != 0 and "ServerReflection" not in listed.stdout, (listed.stdout, listed.stderr)
    async with grpc.aio.insecure_channel(addr) as channel:
        assert (await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=JOBS), timeout=5)).status == health_pb2.HealthCheckResponse.SERVING
        bearer = (("authorization", f"Bearer {ADMIN}"),)
        for token in ((), bearer):
            with pytest.raises(grpc.aio.AioRpcError) as jobs:
                await jobs_pb2_grpc.JobServiceStub(channel).ListJobs(jobs_pb2.ListJobsRequest(), metadata=token,
                                                                    timeout=5)
            assert jobs.value.code() == CODE.UNIMPLEMENTED, jobs.value
            with pytest.raises(grpc.aio.AioRpcError) as queues:
                await queues_pb2_grpc.QueueServiceStub(channel).ListQueues(queues_pb2.ListQueuesRequest(),
                                                                          metadata=token, timeout=5)
            assert queues.value.code() == CODE.UNIMPLEMENTED, queues.value


@pytest.mark.postgres
async def test_a_standby_is_not_ready_on_its_health_port_but_alive(pg_store: Store, tmp_path: Path) -> None:
    """The health port shares the servicer: a standby is NOT_SERVING for readiness there too
    (the Service keeps routing to the leader only) and SERVING for liveness (not restarted)."""
    pki = make_pki(tmp_path)
    tls = ServerTls(pki["server_cert"], pki["server_key"])
    timings = LeaseTimings(3.0)
    leader = await build_server(Store(pg_store.url), auth=secured(), tls=tls, leader_election=timings,
                                health_interval_seconds=0.2, health_listen="127.0.0.1:0")
    standby = None
    try:
        await eventually(lambda: leader.leadership.leading())
        standby = await build_server(Store(pg_store.url), auth=secured(), tls=tls, leader_election=timings,
                                     health_interval_seconds=0.2, health_listen="127.0.0.1:0")
        assert leader.health_port and standby.health_port and standby.health_port != standby.port
        await eventually(lambda: standby is not None and standby.health.status() is not None)
        ready = await arun_tool("grpc-health-probe", f"-addr=127.0.0.1:{leader.health_port}")
        assert ready.returncode == 0, ready.stderr
        not_ready = await arun_tool("grpc-health-probe", f"-addr=127.0.0.1:{standby.health_port}")
        assert not_ready.returncode == 4 and "NOT_SERVING" in not_ready.stderr, (not_ready.returncode,
                                                                                  not_ready.stderr)
        alive = await arun_tool("grpc-health-probe", f"-addr=127.0.0.1:{standby.health_port}",
                                f"-service={HEALTH}")
        assert alive.returncode == 0, alive.stderr
    finally:
        for server in (standby, leader):
            if server is not None:
                await server.stop(grace=1.0)
                server.store.dispose()
