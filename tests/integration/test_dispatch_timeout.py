"""A reachable cluster that never reports on a Work does not hold its job for ever
(over real gRPC, SQLite and PostgreSQL; control/snapshot.py, docs/design/work-protocol.md).

Before, a job whose agent heartbeated but stayed silent on its Work stayed ``placed``,
holding its room, until someone cancelled it: only a lost cluster or a NoExecute taint
re-planned a job. Now a Work left unacknowledged past ``--dispatch-timeout`` is withdrawn
and its job re-planned, with the reason on the job.
"""

from __future__ import annotations

import asyncio

from servicekit import running, secured
from test_agent_stream_bounds import _east, _report, _work

from federation.store import Store


async def test_a_work_left_unacknowledged_is_withdrawn_and_its_job_replanned(store: Store) -> None:
    async with running(store, secured(), control_loop=True, dispatch_timeout_seconds=1.0) as srv, \
            _east(srv) as east:
        first = await _work(srv, east, "silent")  # and the agent says nothing about it
        again = (await east.next("work")).work  # the only cluster: re-placed there, as a new Work
        assert (again.job, again.version) == ("silent", first.version + 1)
        requeued = [e for e in store.jobs.events_since(0, job="silent").events if e.type == "Requeued"]
        assert [e.message for e in requeued] == ["cluster east did not acknowledge the job's Work within 1 s"]
        old = store.works.get(int(first.work_id))
        assert old.state == "withdrawn" and "did not acknowledge" in old.message
        await east.send(status=_report(again))  # a report: the agent has it now
        assert (await east.next("status", "status-rejected")).ack.what == "status"
        await asyncio.sleep(2.5)  # past the timeout: a Work the agent reported on stays
        assert store.works.get(int(again.work_id)).active
