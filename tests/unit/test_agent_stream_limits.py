"""Bounds on the agent stream's hello, snapshots and status reports (docs/design/limits.md),
and the inbox merging a Work's reports only up to the events bound. The agent's side is
tests/unit/agents/test_agent_status_bounds.py."""

from __future__ import annotations

from typing import Any

import pytest

from federation.domain.errors import InvalidInput
from federation.service.agent_inbox import Inbox
from federation.v1 import agent_pb2, types_pb2
from federation.wire.limits import (
    AGENT_ID_MAX_CHARS,
    DEFAULT_LIMITS,
    STATUS_MAX_EVENTS,
    Limits,
    check_hello,
    check_snapshot,
    check_status,
)


def _path(check: Any, *args: Any) -> str:
    with pytest.raises(InvalidInput) as err:
        check(*args)
    return err.value.path


# ---------------------------------------------------------------------- hello


def test_hello_cluster_is_a_dns_label_and_agent_id_bounded_printable() -> None:
    check_hello(agent_pb2.Hello(cluster="gpu-east-1", agent_id="federation-agent-7d9f-1234-1700000000", epoch=1))
    check_hello(agent_pb2.Hello(cluster="east", agent_id="a" * AGENT_ID_MAX_CHARS))
    for hello, path in [
        (agent_pb2.Hello(cluster="east", agent_id="a" * (AGENT_ID_MAX_CHARS + 1)), "hello.agentId"),
        (agent_pb2.Hello(cluster="east", agent_id="a\r\nlevel=ERROR forged"), "hello.agentId"),
        (agent_pb2.Hello(cluster="East"), "hello.cluster"),
        (agent_pb2.Hello(cluster="a.b"), "hello.cluster"),
        (agent_pb2.Hello(cluster="c" * 64), "hello.cluster"),
        (agent_pb2.Hello(), "hello.cluster"),
    ]:
        assert _path(check_hello, hello) == path, hello


# ---------------------------------------------------------------------- snapshot


def _snapshot(*taints: types_pb2.Taint, node_taints: tuple[types_pb2.Taint, ...] = ()) -> types_pb2.ClusterSnapshot:
    snap = types_pb2.ClusterSnapshot(cluster="east", taints=list(taints))
    snap.nodes.add(name="n0", taints=list(node_taints))
    snap.taken_at.seconds = 1_700_000_000
    return snap


def test_snapshot_taints_follow_kubernetes_rules() -> None:
    ok = types_pb2.Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
    check_snapshot(_snapshot(ok, types_pb2.Taint(key="k"), node_taints=(ok,)))
    check_snapshot(_snapshot(types_pb2.Taint(key="k", effect="NoExecute", time_added=1_700_000_000.5)))
    for snap, path in [
        (_snapshot(types_pb2.Taint(key="k" * 5_000_000)), "snapshot.taints[0].key"),
        (_snapshot(types_pb2.Taint()), "snapshot.taints[0].key"),
        (_snapshot(types_pb2.Taint(key="k", value="bad value")), "snapshot.taints[0].value"),
        (_snapshot(types_pb2.Taint(key="k", effect="NoRun")), "snapshot.taints[0].effect"),
        (_snapshot(types_pb2.Taint(key="k", time_added=float("inf"))), "snapshot.taints[0].timeAdded"),
        (_snapshot(ok, node_taints=(ok, types_pb2.Taint(key="x/y/z"))), "snapshot.nodes[0].taints[1].key"),
        (_snapshot(*[ok] * 129), "snapshot.taints"),
    ]:
        assert _path(check_snapshot, snap) == path


@pytest.mark.parametrize(("seconds", "nanos"), [(10**15, 0), (-1, 0), (253_402_300_800, 0), (0, -1),
                                                (0, 1_000_000_000)])
def test_snapshot_taken_at_outside_a_timestamps_range_is_refused(seconds: int, nanos: int) -> None:
    snap = _snapshot()
    snap.taken_at.seconds, snap.taken_at.nanos = seconds, nanos
    assert _path(check_snapshot, snap) == "snapshot.takenAt"


def test_snapshot_taken_at_at_the_ends_of_the_range_is_accepted() -> None:
    for seconds in (0, 253_402_300_799):
        snap = _snapshot()
        snap.taken_at.seconds, snap.taken_at.nanos = seconds, 999_999_999
        check_snapshot(snap)


# ---------------------------------------------------------------------- status


def _status(**fields: Any) -> agent_pb2.WorkStatus:
    base: dict[str, Any] = {"work_id": "12", "job": "train", "version": 3, "phase": agent_pb2.WORK_PHASE_RUNNING}
    return agent_pb2.WorkStatus(**{**base, **fields})


def test_a_legitimate_status_passes() -> None:
    pods = [agent_pb2.PodStatus(task="worker", index=i, node=f"node-{i}", phase="Running", message="m" * 4096)
            for i in range(2 * 10_000)]
    events = [agent_pb2.WorkEvent(action="RestartPod", reason="exitCode=137", task="worker", index=i)
              for i in range(STATUS_MAX_EVENTS)]
    check_status(_status(pods=pods, events=events, message="r" * DEFAULT_LIMITS.max_string_chars))


def test_status_texts_and_counts_are_bounded() -> None:
    limits = Limits(max_string_chars=100, max_replicas_per_job=5)
    for status, path in [
        (_status(message="x" * 101), "status.message"),
        (_status(work_id="1" * 65), "status.workId"),
        (_status(job="j" * 254), "status.job"),
        (_status(pods=[agent_pb2.PodStatus(task="w", index=i) for i in range(11)]), "status.pods"),
        (_status(pods=[agent_pb2.PodStatus(task="w", message="x" * 101)]), "status.pods[0].message"),
        (_status(pods=[agent_pb2.PodStatus(task="w" * 64)]), "status.pods[0].task"),
        (_status(pods=[agent_pb2.PodStatus(task="w", node="n" * 254)]), "status.pods[0].node"),
        (_status(events=[agent_pb2.WorkEvent(action="RestartPod")] * (STATUS_MAX_EVENTS + 1)), "status.events"),
        (_status(events=[agent_pb2.WorkEvent(action="RestartPod", reason="y" * 101)]), "status.events[0].reason"),
        (_status(events=[agent_pb2.WorkEvent(action="A" * 65)]), "status.events[0].action"),
    ]:
        assert _path(check_status, status, limits) == path


# ---------------------------------------------------------------------- inbox


def _report(work: str, events: int, phase: int = agent_pb2.WORK_PHASE_RUNNING) -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(status=agent_pb2.WorkStatus(
        work_id=work, version=1, phase=phase,  # type: ignore[arg-type]  # the enum's numbers
        events=[agent_pb2.WorkEvent(action="RestartPod")] * events))


async def test_the_inbox_merges_a_works_reports_only_up_to_the_events_bound() -> None:
    inbox = Inbox()
    half = STATUS_MAX_EVENTS // 2
    snapshot = agent_pb2.AgentMessage(snapshot=types_pb2.ClusterSnapshot(cluster="east"))
    for msg in (_report("1", half), _report("1", half), snapshot, _report("1", 1), _report("1", 2),
                _report("2", 1), _report("1", STATUS_MAX_EVENTS, agent_pb2.WORK_PHASE_SUCCEEDED)):
        assert inbox.offer(msg)
    inbox.finish()
    seen = []
    while (entry := await inbox.get()) is not None:
        kind = entry.message.WhichOneof("body")
        status = entry.message.status
        seen.append((kind, status.work_id, len(status.events), entry.count) if kind == "status" else (kind,))
        assert len(status.events) <= STATUS_MAX_EVENTS
    # The full entry keeps its place before the snapshot received after it; the later
    # reports of work 1 merge among themselves, and the one that would overflow starts anew.
    assert seen == [("status", "1", STATUS_MAX_EVENTS, 2), ("snapshot",), ("status", "1", 3, 2),
                    ("status", "2", 1, 1), ("status", "1", STATUS_MAX_EVENTS, 1)]


async def test_a_report_over_the_bound_on_its_own_is_queued_alone_and_refused_later() -> None:
    inbox = Inbox()
    assert inbox.offer(_report("1", 1)) and inbox.offer(_report("1", STATUS_MAX_EVENTS + 5))
    inbox.finish()
    first, second = await inbox.get(), await inbox.get()
    assert first is not None and second is not None and await inbox.get() is None
    assert (len(first.message.status.events), len(second.message.status.events)) == (1, STATUS_MAX_EVENTS + 5)
