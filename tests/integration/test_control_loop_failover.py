"""Failure handling of the control loop over real gRPC: a lost agent's job is re-planned
elsewhere and the returning agent is fenced by the sync; stale epochs are fenced; a
central restart mid-round loses nothing; a failed round writes nothing and the next one
succeeds (planner error, store unavailable, PostgreSQL stopped and started)."""

from __future__ import annotations

import asyncio
from typing import NoReturn

import grpc
import grpc.aio
import pytest
from conftest import PostgresServer
from fleetkit import GRACE, Fleet, eventually, fleet, has_snapshot, job_spec, start_server
from servicekit import EAST
from sqlalchemy.engine import Engine

from agents.runtime import AgentRuntime, Fenced
from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement import plan as real_plan
from federation.store import NotFound, Unavailable
from federation.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2


async def _job(f: Fleet, name: str) -> jobs_pb2.Job:
    async with f.client() as c:
        return await c.get_job(name)


async def _running_in(f: Fleet, name: str, cluster: str) -> bool:
    job = await _job(f, name)
    return bool(job.state == jobs_pb2.JOB_STATE_RUNNING and job.cluster == cluster)


def _connected(f: Fleet, *names: str) -> bool:
    return set(names) <= set(f.hub.connected())


async def test_lost_agent_job_is_replanned_elsewhere_and_the_returning_agent_is_fenced(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: _connected(f, "east", "west"), what="agents connected")
        async with f.client() as c:
            await c.submit_job(job_spec("survivor"))
        await eventually(lambda: _job_running(f, "survivor"), what="survivor running")
        first = (await _job(f, "survivor")).cluster
        other = "west" if first == "east" else "east"
        epoch = f.agents[first].runtime.epoch
        await f.kill_agent(first)  # stream dropped, heartbeats stop; its pods keep running
        assert len(f.job_pods(first, "survivor")) == 2
        await eventually(lambda: _running_in(f, "survivor", other), timeout=GRACE + 20, what="re-planned elsewhere")
        assert f.store.clusters.get(first).lost
        events = [e.type for e in f.store.jobs.events_since(0, job="survivor").events]
        assert "Requeued" in events
        # The partition heals: the same agent (same epoch) comes back. The sync withdraws
        # its stale work before anything else, so the job never runs twice.
        f.start_agent(first, epoch=epoch)
        await eventually(lambda: not f.job_pods(first, "survivor") and f.leftovers(first, "survivor") == 0,
                         what="stale work withdrawn on the returning cluster")
        assert len(f.job_pods(other, "survivor")) == 2
        assert (await _job(f, "survivor")).cluster == other
        assert not f.store.clusters.get(first).lost
        active = [w for w in f.store.works.list(job="survivor") if w.active]
        assert [w.cluster for w in active] == [other]


async def test_job_whose_only_allowed_cluster_is_lost_waits_for_it_and_is_placed_when_it_returns(
        migrated_url: str) -> None:
    """Unavailable is not impossible: no ``Unschedulable`` for a job its lost cluster could hold."""
    async with fleet(migrated_url) as f:
        await eventually(lambda: _connected(f, "east", "west") and has_snapshot(f, "east"), what="east reporting")
        epoch = f.agents["east"].runtime.epoch
        async with f.client() as c:
            await c.submit_job(job_spec("loyal", clusters=("east",)))
            await eventually(lambda: _running_in(f, "loyal", "east"), what="loyal running in east")
            await f.kill_agent("east")
            await eventually(lambda: _waiting(f, "loyal"), timeout=GRACE + 20, what="loyal waiting for east")
            job = await c.get_job("loyal")
            assert job.state == jobs_pb2.JOB_STATE_PENDING and not job.unschedulable
            assert job.reason.startswith("allowed clusters unavailable: east (lost)")
            explain = await c.explain_job("loyal")
            assert not explain.pending.unschedulable and explain.pending.reason == job.reason
            f.start_agent("east", epoch=epoch)  # the cluster returns
            await eventually(lambda: _running_in(f, "loyal", "east"), timeout=30, what="loyal placed again in east")
        events = [e.type for e in f.store.jobs.events_since(0, job="loyal").events]
        assert "Unschedulable" not in events
        waited = events.index("Waiting")
        assert "Requeued" in events[:waited] and "Placed" in events[waited:]


def _waiting(f: Fleet, name: str) -> bool:
    job = f.store.jobs.get(name)
    return bool(job.state == "pending" and job.reason.startswith("allowed clusters unavailable"))


async def test_stale_epoch_hello_is_fenced_and_a_newer_leader_supersedes(migrated_url: str) -> None:
    async with fleet(migrated_url, agents=False) as f:
        current = f.start_agent("east", epoch=2_000)
        await eventually(lambda: _connected(f, "east"), what="east connected")
        stale = AgentRuntime(f.clusters["east"], f.config("east"), epoch=1_000)
        with pytest.raises(Fenced) as fenced:
            await asyncio.wait_for(stale.run(), 10)
        assert fenced.value.current_epoch == 2_000
        assert f.hub.connected() == {"east": 2_000}
        newer = AgentRuntime(f.clusters["east"], f.config("east"), epoch=3_000)
        task = asyncio.create_task(newer.run())
        with pytest.raises(Fenced):  # the old leader is fenced mid-stream
            await asyncio.wait_for(f.agents.pop("east").task, 10)
        await eventually(lambda: f.hub.connected() == {"east": 3_000}, what="newer leader connected")
        assert current.epoch == 2_000 and f.store.clusters.get("east").epoch == 3_000
        newer.stop()
        await task


async def test_agent_token_for_another_cluster_is_refused(migrated_url: str) -> None:
    async with fleet(migrated_url, agents=False) as f:
        async with grpc.aio.insecure_channel(f.address) as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(metadata=(("authorization", f"Bearer {EAST}"),))  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
            await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="west", agent_id="rogue", epoch=1)))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call.read()
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(NotFound):
            f.store.clusters.get("west")  # nothing was registered for it


async def test_central_restart_mid_round_loses_nothing(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: _connected(f, "east", "west"), what="agents connected")
        solving = asyncio.Event()

        def slow_plan(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None) -> Plan:
            solving.set()
            import time

            time.sleep(1.0)  # the solver is busy in its thread when the service stops
            return real_plan(snapshot, limits, previous)

        assert f.server.rounds is not None
        f.server.rounds.set_planner(slow_plan)
        async with f.client() as c:
            for i in range(3):
                await c.submit_job(job_spec(f"batch-{i}", pods=1, tier=None))
        await asyncio.wait_for(solving.wait(), 10)
        port = f.server.port
        await f.server.stop(grace=0.5)  # mid-round: the round in flight either commits whole or not at all
        f.server = await start_server(f.store, listen=f"127.0.0.1:{port}")
        await eventually(lambda: _connected(f, "east", "west"), what="agents reconnected")
        for i in range(3):
            await eventually(lambda i=i: _job_running(f, f"batch-{i}"), what=f"batch-{i} running")
        for i in range(3):
            active = [w for w in f.store.works.list(job=f"batch-{i}") if w.active]
            assert len(active) == 1
            cluster = active[0].cluster
            assert len(f.job_pods(cluster, f"batch-{i}")) == 1
            other = "west" if cluster == "east" else "east"
            assert not f.job_pods(other, f"batch-{i}")


async def test_failed_round_writes_nothing_and_the_next_round_succeeds(migrated_url: str) -> None:
    async with fleet(migrated_url, agents=False) as f:
        f.start_agent("east")
        await eventually(lambda: _connected(f, "east"), what="east connected")
        rounds = f.server.rounds
        assert rounds is not None
        await eventually(lambda: has_snapshot(f, "east"), what="snapshot stored")

        def broken(*_args: object) -> NoReturn:
            raise RuntimeError("solver crashed")

        rounds.set_planner(broken)
        async with f.client() as c:
            await c.submit_job(job_spec("patient", pods=1))
        await eventually(lambda: "solver crashed" in rounds.last_error, what="round failed")
        assert f.store.audit.list_rounds().items == ()
        assert f.store.jobs.get("patient").state == "pending"

        record_round = f.store.audit.record_round
        rounds.set_planner(real_plan)
        f.store.audit.record_round = _unavailable  # type: ignore[method-assign]  # a test double replaces the method
        with pytest.raises(Unavailable):
            await rounds.run_once("test")
        assert f.store.audit.list_rounds().items == () and f.store.jobs.get("patient").state == "pending"
        assert f.store.works.list(job="patient") == []

        # The retried round writes the placement and its Work in one transaction: there
        # is no moment where the job is placed without the Work that runs it.
        f.store.audit.record_round = record_round  # type: ignore[method-assign]  # a test double replaces the method
        await eventually(lambda: _job_running(f, "patient"), what="placed by a retried round and running")
        [work] = f.store.works.list(job="patient")
        assert work.cluster == f.store.jobs.get("patient").cluster == "east"
        assert len(f.store.audit.list_rounds().items) == 1


async def test_a_placed_job_without_a_work_is_planned_again_without_reading_the_audit(migrated_url: str) -> None:
    """Repair reads the works table, never the audit (which retention prunes): a placed
    job with no Work (a row from before rounds wrote both together, or a manual
    transition) was never dispatched, so it is requeued and placed afresh."""
    async with fleet(migrated_url, agents=False) as f:
        f.start_agent("east")
        await eventually(lambda: _connected(f, "east") and has_snapshot(f, "east"), what="east reporting")
        rounds = f.server.rounds
        assert rounds is not None

        def held_back(*_args: object) -> NoReturn:
            raise RuntimeError("planner held back")

        rounds.set_planner(held_back)
        async with f.client() as c:
            await c.submit_job(job_spec("orphan", pods=1))
        await eventually(lambda: "planner held back" in rounds.last_error, what="round held back")
        f.store.jobs.transition("orphan", "placed", cluster="east", hypernode="nowhere", tier=1)
        assert f.store.works.list(job="orphan") == [] and f.store.audit.list_rounds().items == ()

        def audit_read(*_args: object, **_kwargs: object) -> NoReturn:
            raise AssertionError("the control loop read the audit")

        f.store.audit.latest_decision = audit_read  # type: ignore[method-assign]  # a test double replaces the method
        f.store.audit.job_audit = audit_read  # type: ignore[method-assign]  # a test double replaces the method
        rounds.set_planner(real_plan)
        rounds.trigger("test")
        await eventually(lambda: _job_running(f, "orphan"), what="orphan requeued, placed again and running")
        [work] = f.store.works.list(job="orphan")
        job = f.store.jobs.get("orphan")
        assert work.active and work.cluster == job.cluster == "east" and job.hypernode != "nowhere"
        events = [e.type for e in f.store.jobs.events_since(0, job="orphan").events]
        assert events[:3] == ["Submitted", "Placed", "Requeued"] and events.count("Placed") == 2


@pytest.mark.postgres
async def test_postgres_stopped_mid_flight_round_fails_cleanly_then_recovers(
        postgres_server: PostgresServer, pg_admin: Engine, pg_template: str) -> None:
    from conftest import _fresh_pg

    for url in _fresh_pg(postgres_server, pg_admin, pg_template):
        async with fleet(url, agents=False) as f:
            f.start_agent("east")
            await eventually(lambda: _connected(f, "east"), what="east connected")
            await eventually(lambda: has_snapshot(f, "east"), what="snapshot stored")
            rounds = f.server.rounds
            assert rounds is not None
            async with f.client() as c:
                await c.submit_job(job_spec("durable", pods=1))
                await eventually(lambda: _job_running(f, "durable"), what="durable running")
                await c.submit_job(job_spec("late", pods=1))
                await eventually(lambda: f.store.jobs.get("late").state != "pending", what="late placed")
            # Every connection of the service killed under it: the pool notices and reconnects.
            from sqlalchemy import make_url, text

            database = make_url(url).database
            with pg_admin.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": database})
            async with f.client() as c:
                await c.submit_job(job_spec("reconnected", pods=1))
            await eventually(lambda: f.store.jobs.get("reconnected").state != "pending", what="placed after kill")
            before = len(f.store.audit.list_rounds().items)
            postgres_server.stop()
            try:
                with pytest.raises(Unavailable):
                    await rounds.run_once("db-down")
            finally:
                postgres_server.start()
            async with f.client() as c:
                await c.submit_job(job_spec("after", pods=1))
            await eventually(lambda: f.store.jobs.get("after").state != "pending", timeout=30,
                             what="round after the outage placed the new job")
            assert len(f.store.audit.list_rounds().items) > before
            await eventually(lambda: _job_running(f, "durable"), what="durable still running")


def _unavailable(*_args: object, **_kwargs: object) -> NoReturn:
    raise Unavailable("database is gone (test)")


async def _job_running(f: Fleet, name: str) -> bool:
    return bool((await _job(f, name)).state == jobs_pb2.JOB_STATE_RUNNING)
