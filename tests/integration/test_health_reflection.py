"""gRPC health and server reflection, checked with real third-party clients built from their
Go modules (grpc-health-probe, grpcurl; hack/build-tools.sh): health and reflection answer
without a token, nothing else does; the overall status follows the store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import grpc.aio
from fleetkit import eventually
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servicekit import ADMIN, running, secured

from federation.domain import Job, Resources, Task
from federation.domain.queues import Queue
from federation.service.health import AGENTS, AUDIT, CLUSTERS, JOBS, OBJECTS, QUEUES
from federation.store import Store
from federation.store import migrate as migrations
from tests.fixtures.gotools import arun_tool

FEDERATION_SERVICES = {JOBS, QUEUES, OBJECTS, CLUSTERS, AUDIT, AGENTS}


async def test_health_probe_and_grpcurl_list_describe_and_call_without_and_with_a_token(migrated_url: str) -> None:
    store = Store(migrated_url)
    try:
        store.queues.create(Queue("research", owners=("nlp",)))
        async with running(store, secured(), control_loop=True) as server:
            addr = f"127.0.0.1:{server.port}"
            probe = await arun_tool("grpc-health-probe", f"-addr={addr}")
            assert probe.returncode == 0, probe.stderr
            assert "status: SERVING" in probe.stdout + probe.stderr
            for service in sorted(FEDERATION_SERVICES):
                probe = await arun_tool("grpc-health-probe", f"-addr={addr}", f"-service={service}")
                assert probe.returncode == 0, (service, probe.stderr)
            unknown = await arun_tool("grpc-health-probe", f"-addr={addr}", "-service=federation.v1.Nope")
            assert unknown.returncode != 0 and "code = NotFound" in unknown.stderr

            listed = await arun_tool("grpcurl", "-plaintext", addr, "list")
            assert listed.returncode == 0, listed.stderr
            names = set(listed.stdout.split())
            assert names >= FEDERATION_SERVICES | {"grpc.health.v1.Health"}
            assert any("ServerReflection" in n for n in names)

            described = await arun_tool("grpcurl", "-plaintext", addr, "describe", QUEUES)
            assert described.returncode == 0, described.stderr
            assert "rpc ListQueues ( .federation.v1.ListQueuesRequest ) returns ( .federation.v1.ListQueuesResponse )" \
                in described.stdout
            message = await arun_tool("grpcurl", "-plaintext", addr, "describe", "federation.v1.JobSpec")
            assert message.returncode == 0 and "network_topology" in message.stdout

            refused = await arun_tool("grpcurl", "-plaintext", "-d", "{}", addr, f"{QUEUES}/ListQueues")
            assert refused.returncode != 0
            assert "Unauthenticated" in refused.stderr, refused.stderr

            called = await arun_tool("grpcurl", "-plaintext", "-H", f"authorization: Bearer {ADMIN}", "-d", "{}",
                                     addr, f"{QUEUES}/ListQueues")
            assert called.returncode == 0, called.stderr
            assert [q["name"] for q in json.loads(called.stdout)["queues"]] == ["research"]

            # Both watch calls decode through reflection (their messages are bytes joined by the
            # server, not serialized by grpc: wire_bytes.PassBytes, event_batches). A watch never
            # ends by itself: grpcurl stops at -max-time and prints what it received.
            store.jobs.submit(Job(name="probe", queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
            seen = {}
            for method in ("WatchJobs", "WatchJobBatches"):
                watched = await arun_tool("grpcurl", "-plaintext", "-max-time", "3", "-H",
                                          f"authorization: Bearer {ADMIN}", "-d", '{"queue": "research"}',
                                          addr, f"{JOBS}/{method}")
                assert "DeadlineExceeded" in watched.stderr, (method, watched.stderr)
                seen[method] = _json_stream(watched.stdout)
            assert seen["WatchJobs"][0]["job"]["id"] == "probe"
            # The same event, compared without its embedded job: history is rendered with the
            # job as it is when replayed, and a round may have marked it unschedulable in between.
            first = {k: v for k, v in seen["WatchJobs"][0].items() if k != "job"}
            batched = seen["WatchJobBatches"][0]["events"][0]
            assert {k: v for k, v in batched.items() if k != "job"} == first
            assert batched["job"]["id"] == "probe"
    finally:
        store.dispose()


def _json_stream(text: str) -> list[Any]:
    """The JSON objects grpcurl printed one after another for a server stream."""
    decoder, out, rest = json.JSONDecoder(), [], text.strip()
    while rest:
        value, end = decoder.raw_decode(rest)
        out.append(value)
        rest = rest[end:].lstrip()
    return out


async def test_api_only_replica_has_no_agent_service_status(migrated_url: str) -> None:
    store = Store(migrated_url)
    try:
        async with running(store, secured(), control_loop=False) as server:
            assert server.health.status() == health_pb2.HealthCheckResponse.SERVING
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=JOBS))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
                try:
                    await stub.Check(health_pb2.HealthCheckRequest(service=AGENTS))
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.NOT_FOUND
                else:
                    raise AssertionError("AgentService has a status on an API-only replica")
    finally:
        store.dispose()


async def test_overall_status_follows_the_database(scratch_postgres: Any) -> None:
    """PostgreSQL stops: every store-backed service goes NOT_SERVING; it returns: SERVING again."""
    url = scratch_postgres.url
    migrations.upgrade(url)
    store = Store(url)
    try:
        async with running(store, secured(), control_loop=True, health_interval_seconds=0.2) as server:
            addr = f"127.0.0.1:{server.port}"
            assert (await arun_tool("grpc-health-probe", f"-addr={addr}")).returncode == 0
            await asyncio.to_thread(scratch_postgres.stop)
            await eventually(lambda: server.health.status() == health_pb2.HealthCheckResponse.NOT_SERVING)
            down = await arun_tool("grpc-health-probe", f"-addr={addr}")
            assert down.returncode == 4 and "NOT_SERVING" in down.stderr, (down.returncode, down.stderr)
            audit = await arun_tool("grpc-health-probe", f"-addr={addr}", f"-service={AUDIT}")
            assert audit.returncode == 4
            await asyncio.to_thread(scratch_postgres.start)
            await eventually(lambda: server.health.status() == health_pb2.HealthCheckResponse.SERVING, timeout=30)
            assert (await arun_tool("grpc-health-probe", f"-addr={addr}")).returncode == 0
    finally:
        store.dispose()
