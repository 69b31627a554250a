"""The agent's side of central's bounds on status reports (docs/design/limits.md): texts
clipped to ``max_string_chars``, more than ``STATUS_MAX_EVENTS`` events split over several
reports, and every rejection central sends logged, kinds newer than the agent included."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from agentkit import fake

from agents.core.recovery import Action, JobEvent
from agents.runtime import EOF, AgentRuntime, RuntimeConfig, _chunks, _clip
from federation.v1 import agent_pb2
from federation.wire.limits import DEFAULT_LIMITS, STATUS_MAX_EVENTS


def test_the_agent_clips_texts_and_splits_events_to_central_bounds() -> None:
    limit = DEFAULT_LIMITS.max_string_chars
    assert _clip("short") == "short"
    assert len(_clip("x" * (limit * 3))) == limit and _clip("x" * (limit * 3)).endswith("…")
    actions = [Action(kind="RestartPod", job="j", record=JobEvent("Warning", "RestartPod", "", 0.0))] * (
        2 * STATUS_MAX_EVENTS + 1)
    assert [len(c) for c in _chunks(actions)] == [STATUS_MAX_EVENTS, STATUS_MAX_EVENTS, 1]
    assert _chunks([]) == [[]]


class _Call:
    def __init__(self, *messages: agent_pb2.CentralMessage) -> None:
        self.messages = list(messages)

    async def read(self) -> Any:
        return self.messages.pop(0) if self.messages else EOF


def _rejected(what: str, id_: str) -> agent_pb2.CentralMessage:
    return agent_pb2.CentralMessage(ack=agent_pb2.Ack(what=what, id=id_, rejection=agent_pb2.Rejection(
        code=3, field_path="status.events", rule="257 is over the limit of 256 events per report")))


async def test_the_agent_logs_every_rejection_and_tolerates_kinds_it_does_not_know(
        caplog: pytest.LogCaptureFixture) -> None:
    runtime = AgentRuntime(fake(), RuntimeConfig(cluster="c1", server="127.0.0.1:1"))
    call = _Call(_rejected("status-rejected", "12@3"), _rejected("heartbeat-rejected", "x"),
                 agent_pb2.CentralMessage(ack=agent_pb2.Ack(what="something-new")), agent_pb2.CentralMessage())
    with caplog.at_level(logging.INFO, logger="agents.runtime"):
        await runtime._reader(call)
    text = caplog.text
    assert "central rejected a status report for 12@3: status.events: 257 is over the limit" in text
    assert "central rejected a message (heartbeat-rejected)" in text
    assert "does not know: ack something-new" in text
