"""``federation-agent`` flag values with their rules, checked by argparse before anything starts.

Why: the agent took ``--heartbeat-seconds nan`` or ``-5``, ``--lease-duration 0`` and a
cluster name central refuses, then ran for ever: heartbeating in a busy loop, campaigning
for a Lease no replica can hold, or reconnecting to a hello that is refused every time. A
missing ``--token-file`` was a traceback and ``--token-file /dev/zero`` read until memory
ran out. Here each flag is refused on its own line (argparse's usage error, exit 2) naming
the flag and the rule, with the same rules central applies to what the agent sends
(``wire.limits.check_hello``, the label syntax of ``wire.limits``) so nothing the flags
allow is refused later on the stream.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from federation.domain.errors import InvalidInput
from federation.domain.names import label_value, qualified_name
from federation.files import MAX_PEM_BYTES, read_bytes
from federation.wire.limits import AGENT_ID_MAX_CHARS, DEFAULT_LIMITS

T = TypeVar("T")

# A Kubernetes service-account token is about 1 KiB, a static bearer token far less.
MAX_TOKEN_BYTES = 64 * 1024
# The fake backend holds its nodes in memory and central refuses a snapshot of more.
MAX_FAKE_NODES = DEFAULT_LIMITS.max_snapshot_nodes
# Leader election derives its renew deadline (2/3) and retry period from the duration
# (agents.k8s.run.timings); under 3 s the retry period falls below the API round trip.
LEASE_SECONDS_MIN, LEASE_SECONDS_MAX = 3.0, 3600.0


def checked(rule: Callable[[str, str], T]) -> Callable[[str], T]:
    """An argparse ``type`` applying a domain rule, whose value the flag then holds (a label
    pair, a tuple of keys); the rule's ``InvalidInput`` becomes the usage error."""

    def parse(text: str) -> T:
        try:
            return rule(text, "")
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(f"{text[:80]!r}: {exc.rule}") from None

    parse.__name__ = "value"
    return parse


def server_address(text: str, path: str) -> str:
    """``HOST:PORT`` (``[::1]:50051`` for IPv6), a port in 1..65535 and a host."""
    host, sep, port = text.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidInput(path, "is not HOST:PORT (a host, and a port from 1 to 65535)")
    return text


def agent_identity(text: str, path: str) -> str:
    """The agent id central accepts in a hello: printable, at most ``AGENT_ID_MAX_CHARS``."""
    if len(text) > AGENT_ID_MAX_CHARS or not text.isprintable():
        raise InvalidInput(path, f"must be at most {AGENT_ID_MAX_CHARS} printable characters")
    return text


def cluster_label(text: str, path: str) -> tuple[str, str]:
    """``KEY=VALUE`` with a Kubernetes label key and value (propagation policies select on them)."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidInput(path, "is not KEY=VALUE")
    qualified_name(key, path, "label key")
    label_value(value, path)
    return key, value


def label_keys(text: str, path: str) -> tuple[str, ...]:
    """Comma-separated node label keys, highest network level first."""
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    for key in keys:
        qualified_name(key, path, "label key")
    return keys


def secret_file(path: str, flag: str, limit: int) -> bytes:
    """A token or PEM file read bounded; ``InvalidInput(flag, ...)`` when missing, too big or empty."""
    data = read_bytes(path, flag, limit)
    if not data.strip():
        raise InvalidInput(flag, f"{path}: is empty")
    return data


def agent_token(text: str, path: str) -> str:
    """One line of printable ASCII: it travels as gRPC metadata, which allows nothing else."""
    if not text or len(text) > MAX_TOKEN_BYTES or not (text.isascii() and text.isprintable()):
        raise InvalidInput(path, f"must be one line of printable ASCII, at most {MAX_TOKEN_BYTES} characters")
    return text


def token_file(path: str) -> str:
    data = secret_file(path, "--token-file", MAX_TOKEN_BYTES)
    try:
        return agent_token(data.decode("ascii").strip(), "--token-file")
    except (UnicodeDecodeError, InvalidInput):
        raise InvalidInput("--token-file", f"{path}: a token is one line of printable ASCII") from None


def pem_file(path: str | None, flag: str) -> bytes | None:
    return secret_file(path, flag, MAX_PEM_BYTES) if path else None
