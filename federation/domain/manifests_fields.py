"""Typed reads of untrusted YAML values, each failing with the value's field path.

YAML gives us ``object``; these helpers narrow it or raise ``InvalidInput(path, rule)``
so the manifest loaders read like the schema they implement.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping

from federation.domain.errors import InvalidInput

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def mapping(value: object, path: str) -> Mapping[str, object]:
    """A mapping with string keys; ``None`` (an empty YAML value) is an empty mapping."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(path, f"must be a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise InvalidInput(path, f"keys must be strings, got {key!r}")
    return value


# A job manifest without ``metadata.namespace``: its queue's default namespace, which only
# the service knows (``Queue.default_namespace``), so the job travels with no namespace
# (proto3 ``""``) and ``service/admission.py`` resolves it before anything is stored.
QUEUE_DEFAULT_NAMESPACE = ""


def job_namespace(meta: Mapping[str, object], path: str) -> str:
    """``metadata.namespace`` of a job-like manifest, or ``QUEUE_DEFAULT_NAMESPACE`` if absent.

    Never ``"default"``: Kubernetes' default namespace may not be one the queue allows, and
    a tenant who names none means "wherever my queue puts jobs" (issue 10).
    """
    value = meta.get("namespace")
    return QUEUE_DEFAULT_NAMESPACE if value is None else string(value, f"{path}.metadata.namespace")


def sequence(value: object, path: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(path, f"must be a list, got {type(value).__name__}")
    return value


def string(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(path, f"must be a string, got {value!r}")
    return value


# The proto integer a manifest field travels as (proto/federation/v1): most are int32;
# staticWeightList weights are int64.
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def integer(value: object, path: str, *, wire: tuple[int, int] | None = INT32) -> int:
    """An integer inside the range of the proto field it travels as (``INT32`` or ``INT64``).

    Why the range: protobuf refuses an out-of-range value only when the message is built,
    as ``Value out of range`` naming no field; refusing here names the field path. ``None``:
    the domain object bounds the field more tightly, with its own reason (tolerationSeconds).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(path, f"must be an integer, got {value!r}")
    if wire is None:
        return value
    low, high = wire
    if not low <= value <= high:
        raise InvalidInput(path, f"must be between {low} and {high}, got {value}")
    return value


def boolean(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(path, f"must be true or false, got {value!r}")
    return value


def strings(value: object, path: str) -> tuple[str, ...]:
    return tuple(string(item, f"{path}[{i}]") for i, item in enumerate(sequence(value, path)))


def string_map(value: object, path: str) -> dict[str, str]:
    """Labels and selectors: string to string, sorted for stable equality."""
    raw = mapping(value, path)
    return {key: string(raw[key], f"{path}.{key}") for key in sorted(raw)}


def check_keys(raw: Mapping[str, object], path: str, allowed: Collection[str],
               unsupported: Collection[str] = ()) -> None:
    """Refuse keys outside ``allowed``: a typo must not silently drop a constraint."""
    for key in raw:
        if key in allowed:
            continue
        where = f"{path}.{key}" if path else key
        if key in unsupported:
            raise InvalidInput(where, "not supported by the federation scheduler")
        close = difflib.get_close_matches(key, list(allowed), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InvalidInput(where, f"not supported ({hint}supported: {', '.join(sorted(allowed))})")


def duration_seconds(value: object, path: str) -> float:
    """A Go/Kubernetes duration such as ``"10m"``, ``"1h30m"`` or ``"500ms"`` in seconds."""
    text = string(value, path).strip()
    if not text or _DURATION_PART.sub("", text):
        raise InvalidInput(path, f"malformed duration {text!r} (expected e.g. '30s', '10m', '1h30m')")
    return sum(float(num) * _DURATION_UNITS[unit] for num, unit in _DURATION_PART.findall(text))
