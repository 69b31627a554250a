"""``--log-format json|text``: one event per line, ids as fields, secrets never printed."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from federation.logs import add_secret, bind, configure, fields, redact, set_fields

PASSWORD = "s3cret-Passw0rd"
URL = f"postgresql+psycopg://federation:{PASSWORD}@db.internal:5432/federation"


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, logging.Logger]]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    yield stream, logging.getLogger("federation.test")
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])


def _events(stream: io.StringIO) -> list[dict[str, object]]:
    lines = stream.getvalue().splitlines()
    return [json.loads(line) for line in lines]  # every line is one complete JSON event


def test_json_events_carry_the_ids_as_fields(captured: tuple[io.StringIO, logging.Logger]) -> None:
    stream, log = captured
    configure("json", stream=stream)
    log.info("job %s placed", "train-1", extra=fields(job="train-1", queue="nlp", cluster="east", round=42))
    (event,) = _events(stream)
    assert event["message"] == "job train-1 placed"
    assert (event["job"], event["queue"], event["cluster"], event["round"]) == ("train-1", "nlp", "east", 42)
    assert event["level"] == "info" and event["logger"] == "federation.test" and "time" in event


def test_bound_fields_reach_every_event_of_the_context_and_worker_threads(
        captured: tuple[io.StringIO, logging.Logger]) -> None:
    stream, log = captured
    configure("json", stream=stream)

    async def stream_task() -> None:
        set_fields(cluster="west", agent="agent-1")
        log.info("connected")
        await asyncio.to_thread(log.info, "stored a snapshot")  # a store call in a worker thread

    async def main() -> None:
        await asyncio.create_task(stream_task())
        log.info("outside")  # another task: not bound

    with bind(round=7):
        asyncio.run(main())
    connected, stored, outside = _events(stream)
    assert connected["cluster"] == stored["cluster"] == "west" and stored["agent"] == "agent-1"
    assert "cluster" not in outside


def test_a_traceback_stays_inside_its_json_event(captured: tuple[io.StringIO, logging.Logger]) -> None:
    stream, log = captured
    configure("json", stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("round failed", extra=fields(round=3))
    (event,) = _events(stream)
    assert "RuntimeError: boom" in str(event["exception"]) and event["round"] == 3


def test_text_lines_append_fields_and_indent_tracebacks(captured: tuple[io.StringIO, logging.Logger]) -> None:
    stream, log = captured
    configure("text", stream=stream)
    log.info("federation: stopped")
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("pass failed", extra=fields(job="j1", cluster="east"))
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("INFO federation.test: federation: stopped")
    assert lines[1].endswith("pass failed [job=j1 cluster=east]")
    assert all(line.startswith("    ") for line in lines[2:]) and "ValueError: bad" in lines[-1]


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_no_database_password_or_token_is_ever_printed(
        captured: tuple[io.StringIO, logging.Logger], log_format: str) -> None:
    stream, log = captured
    configure(log_format, stream=stream, secrets=["agent-token-0123456789"])
    log.info("opening %s", URL)
    log.warning("metadata: %s", [("authorization", "Bearer tenant-token-abcdef")])
    log.info("agent sent agent-token-0123456789 in the wrong place")
    try:
        raise ConnectionError(f"cannot connect to {URL}")
    except ConnectionError:
        log.exception("store unavailable")
    out = stream.getvalue()
    for secret in (PASSWORD, "tenant-token-abcdef", "agent-token-0123456789"):
        assert secret not in out
    assert "postgresql+psycopg://federation:***@db.internal:5432/federation" in out


@pytest.mark.parametrize("text, expected", [
    ("sqlite:///federation.db", "sqlite:///federation.db"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("postgresql://u:p%40ss@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require"),
    ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
    ("postgresql://u:p@ss@h:5432/db x://v:w@k", "postgresql://u:***@h:5432/db x://v:***@k"),
    ("authorization: bearer abc.def-ghi", "authorization: bearer ***"),
    ("db postgresql+psycopg://postgres:Zm9v/YmFy+cQ==@127.0.0.1:47160/fed",
     "db postgresql+psycopg://postgres:***@127.0.0.1:47160/fed"),
], ids=["sqlite-file", "no-password", "escaped-password", "empty-user", "at-in-password", "lower-case-bearer",
        "base64-password-with-a-slash"])
def test_redaction_masks_only_secrets(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_short_strings_are_not_registered_as_secrets() -> None:
    add_secret("east")
    assert redact("cluster east") == "cluster east"


def test_unknown_fields_and_formats_are_refused() -> None:
    with pytest.raises(ValueError, match="tenant"):
        fields(tenant="x")
    with pytest.raises(ValueError, match="--log-format"):
        configure("yaml")
