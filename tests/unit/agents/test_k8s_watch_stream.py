"""The watch stream's line splitting (agents/k8s/api.py ``stream``): events come out whole
and in order whatever the chunking, and a line that never ends is refused once it passes
the bound instead of being buffered for ever."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
from agentkit import HttpAnswer

from agents.k8s import api
from agents.k8s.api import ApiError, Gone, stream


async def _events(chunks: list[bytes]) -> list[dict[str, Any]]:
    async def request() -> HttpAnswer:
        return HttpAnswer(chunks)

    return [event async for event in stream(request())]


def _lines(n: int) -> tuple[list[dict[str, Any]], bytes]:
    events = [{"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}, "data": "x" * (i % 97)}} for i in range(n)]
    return events, b"".join(json.dumps(e).encode() + b"\n" for e in events)


@pytest.mark.parametrize("split", ["one chunk", "bytes", "random"])
async def test_events_come_out_whole_and_in_order_whatever_the_chunks(split: str) -> None:
    events, body = _lines(300)
    if split == "one chunk":
        chunks = [body]
    elif split == "bytes":
        chunks = [body[i:i + 1] for i in range(len(body))]
    else:
        rng, cuts = random.Random(7), [0]
        while cuts[-1] < len(body):
            cuts.append(cuts[-1] + rng.randint(1, 3000))
        chunks = [body[a:b] for a, b in itertools.pairwise(cuts)]
    assert await _events(chunks) == events


async def test_blank_lines_are_skipped_and_an_error_event_ends_the_stream() -> None:
    gone = {"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "too old"}}
    body = b"\n\n" + json.dumps({"type": "ADDED", "object": {}}).encode() + b"\n" + json.dumps(gone).encode() + b"\n"
    seen: list[dict[str, Any]] = []
    with pytest.raises(Gone):
        async def request() -> HttpAnswer:
            return HttpAnswer([body])

        async for event in stream(request()):
            seen.append(event)
    assert seen == [{"type": "ADDED", "object": {}}]


async def test_a_line_without_end_is_refused_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "MAX_WATCH_LINE_BYTES", 1000)
    events, body = _lines(3)
    chunks = [body, b"{" + b"x" * 600, b"y" * 600]  # whole events first, then a line that never ends
    seen: list[dict[str, Any]] = []

    async def request() -> HttpAnswer:
        return HttpAnswer(chunks)

    with pytest.raises(ApiError, match="over 1000 bytes"):
        async for event in stream(request()):
            seen.append(event)
    assert seen == events
