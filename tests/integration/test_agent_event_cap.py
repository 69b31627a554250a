"""The per-job cap on the events an agent's status reports store (``--max-job-events``,
docs/design/limits.md), over real gRPC and a real store (SQLite and PostgreSQL).

The reviewer's reproduction: each report is bounded (256 events), but nothing bounded the
reports, so an agent sending report after report of restart events about one Work grew
the store and the job's event history without end (1,280 events from five reports, all
stored). Now a job keeps at most ``max_job_events`` of them, then one Warning saying the
rest are not recorded; the restart count and the job's state stay exact.
"""

from __future__ import annotations

from servicekit import ADMIN, client, running, secured
from test_agent_stream_bounds import _east, _report, _restarts, _work

from federation.store import Store
from federation.v1 import agent_pb2, jobs_pb2
from federation.wire.limits import DEFAULT_LIMITS, STATUS_MAX_EVENTS, Limits


def _events(store: Store, job: str) -> list[tuple[str, str]]:
    page = store.jobs.events_since(0, job=job, limit=100_000)
    return [(e.type, e.message) for e in page.events]


async def test_a_flood_of_restart_events_is_capped_per_job_and_the_restart_count_stays_exact(store: Store) -> None:
    cap = DEFAULT_LIMITS.max_job_events
    reports = cap // STATUS_MAX_EVENTS + 2
    async with running(store, secured(), control_loop=True) as srv, _east(srv) as east:
        work = await _work(srv, east, "flood")
        for _ in range(reports):
            await east.send(status=_report(work, events=_restarts(STATUS_MAX_EVENTS)))
            assert (await east.next("status", "status-rejected")).ack.what == "status"
        done = _report(work, events=_restarts(1))
        done.phase = agent_pb2.WORK_PHASE_SUCCEEDED
        await east.send(status=done)
        assert (await east.next("status", "status-rejected")).ack.what == "status"
        async with client(srv, ADMIN) as admin:
            job = await admin.get_job("flood")
    assert job.restarts == reports * STATUS_MAX_EVENTS + 1  # every restart counted
    assert job.state == jobs_pb2.JOB_STATE_SUCCEEDED  # the newest state is applied past the cap
    events = _events(store, "flood")
    assert sum(1 for t, _ in events if t == "Restarted") == cap
    notices = [m for t, m in events if t == "Warning"]
    assert len(notices) == 1 and f"limit of {cap} events" in notices[0], notices
    assert events[-1][0] == "Succeeded"


async def test_the_cap_is_the_services_limit_and_warnings_count_toward_it(store: Store) -> None:
    warning = agent_pb2.WorkEvent(action="Warning", reason="PriorityClass high is not defined here")
    async with running(store, secured(), control_loop=True, limits=Limits(max_job_events=3)) as srv, \
            _east(srv) as east:
        work = await _work(srv, east, "capped")
        await east.send(status=_report(work, events=[warning, *_restarts(1)]))
        await east.next("status")
        await east.send(status=_report(work, events=_restarts(4)))
        await east.next("status")
        await east.send(status=_report(work, events=[warning]))
        await east.next("status")
        async with client(srv, ADMIN) as admin:
            job = await admin.get_job("capped")
    assert job.restarts == 5
    kept = [(t, m) for t, m in _events(store, "capped") if t in ("Restarted", "Warning")]
    assert [t for t, _ in kept] == ["Warning", "Restarted", "Restarted", "Warning"], kept
    assert "limit of 3 events" in kept[-1][1] and "--max-job-events" in kept[-1][1]
