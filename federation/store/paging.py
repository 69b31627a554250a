"""Opaque keyset page tokens.

Why keyset and not OFFSET: listings run while jobs are being submitted and finished; an
offset shifts under concurrent inserts (rows repeat or vanish between pages) and costs a
scan of every skipped row. A token holds the sort key of the last row returned, so the
next page starts strictly after it: stable and index-only. The token is base64 JSON so
clients treat it as opaque; a malformed one is an ``InvalidInput`` on ``page_token``.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from federation.domain.errors import InvalidInput

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_ID = 2**63 - 1  # BIGINT ids (PostgreSQL); SQLite INTEGER is int64 too


def page_size(requested: int | None) -> int:
    """Clamp a requested page size (0/None = default)."""
    if not requested or requested <= 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def encode(kind: str, *key: Any) -> str:
    values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
    raw = json.dumps([kind, *values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(kind: str, token: str, arity: int) -> list[Any]:
    """The key stored in ``token`` (without the kind tag); refuses tokens of another listing."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput("page_token", "malformed page token") from exc
    if not isinstance(values, list) or len(values) != arity + 1 or values[0] != kind:
        raise InvalidInput("page_token", f"not a page token of this {kind} listing")
    return values[1:]


def decode_time(value: Any) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise InvalidInput("page_token", "malformed page token") from exc
    if parsed.tzinfo is None:
        raise InvalidInput("page_token", "malformed page token")
    try:  # the store binds UTC; 0001-01-01+14:00 has no UTC year and overflows the driver
        return parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidInput("page_token", "malformed page token") from None


def decode_text(value: Any) -> str:
    """A string key from a token. Why check: a forged token can hold a list, dict, null or
    huge int where a name belongs (or a NUL or lone surrogate inside one); the database
    driver fails on those (INTERNAL) where the client deserves ``InvalidInput``."""
    if not isinstance(value, str) or "\x00" in value or not _encodable(value):
        raise InvalidInput("page_token", "malformed page token")
    return value


def _encodable(value: str) -> bool:
    """False for lone surrogates (JSON ``\\ud800``), which no database driver can bind."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def decode_id(value: Any) -> int:
    """A row id key from a token, inside the int64 range every id column holds.

    Why range-check: ``1e30``, ``1e308`` or ``Infinity`` parse as JSON numbers but overflow
    the driver's integer binding (OverflowError, INTERNAL) instead of being malformed.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInput("page_token", "malformed page token")
    try:
        number = int(value)
    except ValueError:
        raise InvalidInput("page_token", "malformed page token") from None
    if not 0 <= number <= MAX_ID:
        raise InvalidInput("page_token", "malformed page token")
    return number
