"""Strict readers for scenario YAML: every value is checked where it is read.

Why a hand-written reader rather than a schema library: the scenario contract says an
unknown key is an error *naming its path* (``clusters[1].nodeGroups[0].alocatable``), so a
typo never silently changes a benchmark. Each helper takes the path of the value it
reads and raises ``InvalidInput(path, rule)``; nothing here knows about scenarios.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from federation.domain.errors import InvalidInput

T = TypeVar("T")
_MISSING = object()


def at(path: str, key: str | int) -> str:
    """The path of ``key`` below ``path`` (``a.b``, ``a[3]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def mapping(value: object, path: str) -> Mapping[str, object]:
    """``value`` as a mapping with string keys."""
    if not isinstance(value, Mapping):
        raise InvalidInput(path, f"must be a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise InvalidInput(path, f"keys must be strings, got {key!r}")
    return value


def strict(value: object, path: str, allowed: Iterable[str], required: Iterable[str] = ()) -> Mapping[str, object]:
    """A mapping holding only ``allowed`` keys and every ``required`` one."""
    data = mapping(value, path)
    known = tuple(allowed)
    for key in data:
        if key not in known:
            raise InvalidInput(at(path, key), f"unknown key (expected one of: {', '.join(known)})")
    for key in required:
        if key not in data:
            raise InvalidInput(at(path, key), "required key is missing")
    return data


def sequence(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise InvalidInput(path, f"must be a list, got {type(value).__name__}")
    return value


def string(value: object, path: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(path, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value:
        raise InvalidInput(path, "must not be empty")
    return value


def integer(value: object, path: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(path, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidInput(path, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidInput(path, f"must be <= {maximum}, got {value}")
    return value


def number(value: object, path: str, *, minimum: float | None = None, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(path, f"must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise InvalidInput(path, f"must be finite, got {value!r}")
    if minimum is not None and out < minimum:
        raise InvalidInput(path, f"must be >= {minimum:g}, got {value}")
    if positive and out <= 0:
        raise InvalidInput(path, f"must be > 0, got {value}")
    return out


def boolean(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(path, f"must be true or false, got {value!r}")
    return value


def labels(value: object, path: str) -> dict[str, str]:
    """A ``{key: value}`` map of strings (Kubernetes labels)."""
    out: dict[str, str] = {}
    for key, raw in mapping(value, path).items():
        if not key:
            raise InvalidInput(path, "label keys must not be empty")
        out[key] = string(raw, at(path, key), allow_empty=True)
    return out


# Digits of an integer key given as a string: int64 has 19, and past 4,300 ``int()`` raises
# a ValueError of its own (a traceback, not a refusal naming the key).
_KEY_DIGITS = 19


def int_key(key: object, path: str) -> int:
    """A mapping key that must be an integer (YAML may give ``1`` or ``"1"``)."""
    if isinstance(key, bool):
        raise InvalidInput(path, f"key must be an integer, got {key!r}")
    if isinstance(key, int):
        return key
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        if len(key.strip().lstrip("-")) > _KEY_DIGITS:
            raise InvalidInput(path, f"key has more than {_KEY_DIGITS} digits")
        return int(key)
    raise InvalidInput(path, f"key must be an integer, got {key!r}")


def distribution(value: object, path: str, parse_key: Callable[[object, str], T]) -> tuple[tuple[T, float], ...]:
    """A ``{outcome: probability}`` map whose probabilities are >= 0 and sum to 1."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidInput(path, "must be a non-empty mapping of outcome to probability")
    out: list[tuple[T, float]] = []
    seen: set[object] = set()
    for key, raw in value.items():
        sub = f"{path}.{key}"
        outcome = parse_key(key, sub)
        if outcome in seen:
            raise InvalidInput(sub, "duplicate outcome")
        seen.add(outcome)
        out.append((outcome, number(raw, sub, minimum=0.0)))
    total = sum(p for _, p in out)
    if abs(total - 1.0) > 1e-6:
        raise InvalidInput(path, f"probabilities must sum to 1, got {total:g}")
    return tuple(out)


def optional(data: Mapping[str, object], key: str, default: T, read: Callable[[object, str], T], path: str) -> T:
    """``read(data[key])`` when present (and not null), else ``default``."""
    raw = data.get(key, _MISSING)
    if raw is _MISSING or raw is None:
        return default
    return read(raw, at(path, key))


def listed(data: Mapping[str, object], key: str, path: str) -> list[object]:
    """The optional list ``data[key]`` (empty when absent)."""
    out: list[object] = optional(data, key, [], sequence, path)
    return out


def labelled(data: Mapping[str, object], key: str, path: str) -> dict[str, str]:
    """The optional string map ``data[key]`` (empty when absent)."""
    out: dict[str, str] = optional(data, key, {}, labels, path)
    return out
