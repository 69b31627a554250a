"""JobService over real gRPC on 127.0.0.1 port 0, against SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import grpc
import pytest
from servicekit import client, counts, queue, running, spec

from federation.client import FederationClient, ServiceError
from federation.domain.plans import Placement, PlanLimits, PodAssignment
from federation.domain.states import JobState
from federation.domain.works import work_payload
from federation.store import Store
from federation.store.records import Decision, JobUpdate, RoundRecord
from federation.v1 import jobs_pb2


async def _setup(c: FederationClient) -> None:
    await c.create_queue(queue("research"))


async def test_submit_is_idempotent_and_a_changed_spec_is_already_exists(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await _setup(c)
        first = await c.submit_job(spec("train-a"))
        assert first.created and first.job.state == jobs_pb2.JOB_STATE_PENDING
        assert first.job.id == "train-a" and first.job.spec.queue == "research" and first.job.tenant == "dev"
        before = counts(store)
        again = await c.submit_job(spec("train-a"))
        assert not again.created and again.job.id == "train-a"
        with pytest.raises(ServiceError) as err:
            await c.submit_job(spec("train-a", replicas=3))
        assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
        assert counts(store) == before


async def test_submit_triggers_a_round_and_cancel_tells_the_hub(store: Store) -> None:
    async with running(store, control_loop=True) as srv, client(srv) as c:
        assert srv.rounds is not None and srv.hub is not None
        triggers: list[str] = []
        cancelled: list[str] = []

        async def cancel_job(job: str) -> None:
            cancelled.append(job)

        srv.rounds.trigger = triggers.append  # type: ignore[method-assign, assignment]  # a test double replaces the method
        srv.hub.cancel_job = cancel_job  # type: ignore[method-assign]  # a test double replaces the method
        await _setup(c)
        await c.submit_job(spec("train-b"))
        await c.submit_job(spec("train-b"))  # identical resubmission: nothing new to plan
        assert triggers == ["submit"]
        job = await c.cancel_job("train-b", reason="no longer needed")
        assert job.state == jobs_pb2.JOB_STATE_CANCELLED and job.reason == "no longer needed"
        assert cancelled == ["train-b"] and triggers == ["submit", "cancel"]


async def test_get_list_filters_and_pages(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await _setup(c)
        await c.create_queue(queue("other"))
        for i in range(5):
            await c.submit_job(spec(f"job-{i}"))
        await c.submit_job(spec("elsewhere", "other"))
        await c.cancel_job("job-3")
        got = await c.get_job("job-1")
        assert got.spec.tasks[0].replicas == 2 and got.submitted.seconds > 0
        page = await c.list_jobs_page(queue="research", page_size=2)
        assert [j.id for j in page.jobs] == ["job-0", "job-1"] and page.next_page_token
        everything = await c.list_jobs(queue="research", page_size=2)
        assert [j.id for j in everything] == [f"job-{i}" for i in range(5)]
        assert len(await c.list_jobs()) == 6
        cancelled = await c.list_jobs(state=jobs_pb2.JOB_STATE_CANCELLED)
        assert [j.id for j in cancelled] == ["job-3"]
        with pytest.raises(ServiceError) as err:
            await c.get_job("missing")
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        with pytest.raises(ServiceError) as err:
            await c.list_jobs_page(page_token="garbage!")
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and err.value.message.startswith("page_token")


async def test_cancel_twice_is_harmless_and_a_finished_job_cannot_be_cancelled(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await _setup(c)
        await c.submit_job(spec("short"))
        await c.cancel_job("short")
        again = await c.cancel_job("short")
        assert again.state == jobs_pb2.JOB_STATE_CANCELLED
        await c.submit_job(spec("done"))
        for state in ("placed", "dispatched", "running", "succeeded"):
            store.jobs.transition("done", state, cluster="east")
        with pytest.raises(ServiceError) as err:
            await c.cancel_job("done")
        assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION


async def test_watch_replays_then_follows_and_resumes_from_an_event_id(store: Store) -> None:
    async with running(store, watch_poll_seconds=0.05) as srv, client(srv) as c:
        await _setup(c)
        await c.submit_job(spec("w-1"))
        await c.submit_job(spec("w-2"))
        seen: list[jobs_pb2.JobEvent] = []

        async def follow(after: int, n: int) -> list[jobs_pb2.JobEvent]:
            out: list[jobs_pb2.JobEvent] = []
            async for ev in c.watch_jobs(from_event_id=after):
                out.append(ev)
                if len(out) == n:
                    return out
            return out

        watcher = asyncio.create_task(follow(0, 4))
        await asyncio.sleep(0.2)
        await c.cancel_job("w-1")  # live events arrive after the replay
        # A writer outside the service (the rounds do this): seen by polling.
        store.jobs.transition("w-2", "placed", cluster="east", hypernode="leaf-1", tier=1)
        seen = await asyncio.wait_for(watcher, 10)
        assert [(e.job.id, e.type) for e in seen] == [
            ("w-1", jobs_pb2.JOB_EVENT_TYPE_SUBMITTED), ("w-2", jobs_pb2.JOB_EVENT_TYPE_SUBMITTED),
            ("w-1", jobs_pb2.JOB_EVENT_TYPE_CANCELLED), ("w-2", jobs_pb2.JOB_EVENT_TYPE_PLACED)]
        assert seen[0].job.state == jobs_pb2.JOB_STATE_PENDING  # the state right after that event
        assert [e.event_id for e in seen] == sorted(e.event_id for e in seen)
        resumed = await asyncio.wait_for(follow(seen[1].event_id, 2), 10)
        assert [e.event_id for e in resumed] == [seen[2].event_id, seen[3].event_id]


async def test_explain_pending_then_placed_from_the_recorded_rounds(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await _setup(c)
        await c.submit_job(spec("big", replicas=4))
        store.clusters.register("east", 1)
        fresh = await c.explain_job("big")
        assert fresh.HasField("pending") and "next planning round" in fresh.pending.reason
        now = store.db.now()
        unplaced = store.audit.record_round(
            RoundRecord(started_at=now, ended_at=now + timedelta(seconds=1), trigger="submit", policy="cpsat",
                  solver_status="OPTIMAL", pending_count=1, unplaced_count=1),
            [Decision(job="big", outcome="unplaced", reason="no tier-1 HyperNode has 4 free GPUs",
                      constraint="topology", closest_cluster="east")],
            [JobUpdate(job="big", reason="no tier-1 HyperNode has 4 free GPUs")])
        pending = await c.explain_job("big")
        assert pending.state == jobs_pb2.JOB_STATE_PENDING
        assert (pending.pending.constraint, pending.pending.closest_cluster) == ("topology", "east")
        assert pending.pending.round_id == unplaced.round_id and "tier-1" in pending.pending.reason
        pods = tuple(PodAssignment("worker", i, f"node-{i}") for i in range(4))
        placed = store.audit.record_round(
            RoundRecord(started_at=now, ended_at=now, trigger="snapshot", policy="cpsat", solver_status="OPTIMAL",
                  pending_count=1, placed_count=1),
            [Decision(job="big", outcome="placed", cluster="east", hypernode="leaf-2", tier=1, pods=pods,
                      score_terms={"tier": -1.0})],
            [JobUpdate(job="big", state=JobState.PLACED, cluster="east", hypernode="leaf-2", tier=1,
                       work=work_payload(Placement("big", "east", "leaf-2", 1, pods)))])
        where = await c.explain_job("big")
        assert where.state == jobs_pb2.JOB_STATE_PLACED and where.round_id == placed.round_id
        assert (where.placement.cluster, where.placement.hypernode, where.placement.tier) == ("east", "leaf-2", 1)
        assert [p.node for p in where.placement.pods] == [f"node-{i}" for i in range(4)]
        audit = await c.job_audit("big")
        assert [d.outcome for d in audit.decisions] == ["unplaced", "placed"]
        assert audit.decisions[1].score_terms["tier"] == -1.0 and audit.decisions[0].constraint == "topology"
        rounds = await c.list_rounds()
        assert [r.round_id for r in rounds.rounds] == [placed.round_id, unplaced.round_id]


async def test_the_queue_cache_reads_an_expired_queue_once_for_a_burst(store: Store) -> None:
    from federation.domain.queues import Queue
    from federation.service.jobs import QueueCache

    store.queues.create(Queue("burst", owners=("nlp",)))
    reads: list[str] = []
    real_get = store.queues.get

    def counting_get(name: str) -> Queue:
        reads.append(name)
        return real_get(name)

    store.queues.get = counting_get  # type: ignore[method-assign]  # a test double replaces the method
    now = [0.0]
    cache = QueueCache(store, ttl=2.0, clock=lambda: now[0])
    got = await asyncio.gather(*(cache.get("burst") for _ in range(50)))
    assert {q.owners for q in got} == {("nlp",)} and reads == ["burst"]
    now[0] = 1.0
    await cache.get("burst")
    assert reads == ["burst"]  # fresh
    now[0] = 3.0
    await asyncio.gather(*(cache.get("burst") for _ in range(50)))
    assert reads == ["burst", "burst"]  # expired: one read for the whole burst
    with pytest.raises(Exception, match="not found"):
        await cache.get("absent")


async def test_shutdown_ends_open_watch_streams_instead_of_waiting_out_the_grace_period(store: Store) -> None:
    import time

    async with running(store, watch_poll_seconds=0.05) as srv, client(srv) as c:
        await _setup(c)
        await c.submit_job(spec("watched"))
        seen: list[str] = []

        async def follow() -> None:
            async for ev in c.watch_jobs():
                seen.append(ev.job.id)

        watcher = asyncio.create_task(follow())
        while not seen:
            await asyncio.sleep(0.05)
        started = time.monotonic()
        await srv.stop(grace=30)
        assert time.monotonic() - started < 10  # not the 30 s grace: the stream was ended
        await asyncio.wait_for(watcher, 10)  # the client sees a clean end of stream
        assert seen == ["watched"]


async def test_explain_says_which_topology_wait_applies(store: Store) -> None:
    """Issue 11: the wait is opt-in (job annotation, queue default, service default)."""
    from federation.v1 import types_pb2
    soft = types_pb2.NetworkTopology(mode="soft", highest_tier_allowed=1)
    async with running(store, plan_limits=PlanLimits(topology_wait_seconds=600.0)) as srv, client(srv) as c:
        await _setup(c)
        waiting = queue("patient")
        waiting.topology_wait_seconds = 7200.0
        stored = await c.create_queue(waiting)
        assert stored.topology_wait_seconds == 7200.0
        await c.submit_job(spec("plain"))
        await c.submit_job(spec("service", network_topology=soft))
        await c.submit_job(spec("queued", "patient", network_topology=soft))
        await c.submit_job(spec("own", network_topology=soft, topology_wait_seconds=1800.0))
        said = {n: (await c.explain_job(n)).topology_wait for n in ("plain", "service", "queued", "own")}
    assert said["plain"].startswith("no topology wait: the job has no networkTopology")
    assert said["service"] == "topology wait 10m (the service default --topology-wait)"
    assert said["queued"] == "topology wait 2h (the default of queue patient)"
    assert said["own"] == "topology wait 30m (from the job's annotation federation.io/topology-wait)"


async def test_a_negative_topology_wait_is_invalid_argument_naming_the_field(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await _setup(c)
        with pytest.raises(ServiceError) as err:
            await c.submit_job(spec("bad", topology_wait_seconds=-1.0))
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "spec.topologyWaitSeconds" in str(err.value)


async def test_min_success_is_stored_and_returned(store: Store) -> None:
    """A field we accept travels whole: submitted over gRPC, stored, read back."""
    async with running(store) as srv, client(srv) as c:
        await _setup(c)
        await c.submit_job(spec("partial", replicas=3, min_success=2))
        await c.submit_job(spec("whole"))
        assert (await c.get_job("partial")).spec.min_success == 2
        assert not (await c.get_job("whole")).spec.HasField("min_success")
