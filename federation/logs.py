"""Process logging for ``federation serve`` and ``federation-agent``: ``--log-format json|text``.

One event per line in both formats. JSON lines carry ``time``, ``level``, ``logger``,
``message`` and the ids an operator filters on as fields of their own — ``job``,
``queue``, ``cluster``, ``round``, ``work``, ``agent``, ``epoch``, ``trigger`` — plus
``exception`` (the traceback, escaped into the same line). Text lines append the same
fields as ``key=value`` and indent a traceback under its event.

Where the fields come from: a call site passes them with ``extra=fields(job=…)``; a
context (``bind``) adds them to every event logged inside it, including from worker
threads started there (``asyncio.to_thread`` copies the context) — the round id for
everything a round logs after its audit, the cluster for everything an agent logs.

Secrets never reach the output: every formatted line (message, fields, traceback) goes
through ``redact``, which masks the password of any URL (``scheme://user:***@host``),
bearer tokens (``Bearer ***``) and the literal secrets the process registered
(``add_secret``: the agent's token, the service's plain-text tokens). Redaction is in the
formatter, not at call sites, because the risky text is usually not ours: a driver's
exception message, a traceback's repr of an argument.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TextIO

FORMATS = ("text", "json")
FIELDS = ("job", "queue", "cluster", "round", "work", "agent", "epoch", "trigger")

_bound: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "federation_log_fields", default=MappingProxyType({}))
# The password runs to the LAST "@" of the URL (greedy, backtracking): a raw "@" or "/" inside
# a password (any base64 one) must not leave it, or its tail, in the log. A later "@" in the
# path or query masks the host too: more than needed, never less.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)(?P<secret>\S+)(?P<at>@)")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",;]+")
_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the named ids (None values are left out)."""
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown log field(s): {', '.join(sorted(unknown))}")
    return {k: v for k, v in values.items() if v is not None}


@contextlib.contextmanager
def bind(**values: Any) -> Iterator[None]:
    """Add ``values`` to every event logged inside the block (and threads started in it)."""
    token = _bound.set({**_bound.get(), **fields(**values)})
    try:
        yield
    finally:
        _bound.reset(token)


def set_fields(**values: Any) -> None:
    """Fields for the rest of this context (a process's constant ones: the agent's cluster)."""
    _bound.set({**_bound.get(), **fields(**values)})


def add_secret(value: str | None) -> None:
    """Mask ``value`` wherever it would appear in a log line (tokens; at least 8 characters,
    so a short common word is never masked by mistake)."""
    if value and len(value) >= 8:
        with _secrets_lock:
            _secrets.add(value)


def redact(text: str) -> str:
    text = _URL_PASSWORD.sub(r"\g<head>***\g<at>", text)
    text = _BEARER.sub(r"\1***", text)
    with _secrets_lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text


def _event_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The bound fields, overridden by the call's own ``extra``. Handlers are synchronous,
    so this runs in the logging call's thread and context."""
    out = dict(_bound.get())
    for name in FIELDS:
        value = record.__dict__.get(name)
        if value is not None:
            out[name] = value
    return {k: out[k] for k in FIELDS if k in out}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        event.update(_event_fields(record))
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            event["exception"] = record.exc_text
        return redact(json.dumps(event, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        head, _, tail = line.partition("\n")  # a traceback follows the event's own line
        extra = " ".join(f"{k}={v}" for k, v in _event_fields(record).items())
        if extra:
            head = f"{head} [{extra}]"
        if tail:  # continuation lines start with whitespace, so line-based collectors join them
            head += "".join(f"\n    {t}" for t in tail.splitlines())
        return redact(head)


def configure(log_format: str = "text", *, level: int = logging.INFO, stream: TextIO | None = None,
              secrets: Iterable[str] = ()) -> logging.Handler:
    """Send every logger's events to ``stream`` (stderr) in ``log_format``; returns the handler."""
    if log_format not in FORMATS:
        raise ValueError(f"--log-format: must be one of {', '.join(FORMATS)}, got {log_format!r}")
    for secret in secrets:
        add_secret(secret)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    return handler
