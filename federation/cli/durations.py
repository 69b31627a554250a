"""``DURATION`` flag values: ``90s``, ``15m``, ``12h``, ``30d``, ``1w``, or sums like ``1d12h``.

Why our own parser: the flags take the units operators write in Prometheus and
Kubernetes configs (Go-style ``1h30m`` plus days and weeks); a bare number is refused
rather than guessed at (seconds? days?).
"""

from __future__ import annotations

import argparse
import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_PART = re.compile(r"(\d+)([smhdw])")
_WHOLE = re.compile(r"(?:\d+[smhdw])+")
MAX_SECONDS = 10 * 365 * 86_400


def parse_duration(value: str) -> float:
    """Seconds in ``value``; ValueError saying what is accepted."""
    text = value.strip().lower()
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"{value!r} is not a duration like 90s, 15m, 12h, 30d or 1d12h")
    return float(sum(int(n) * UNITS[u] for n, u in _PART.findall(text)))


def duration_flag(minimum: float, flag: str) -> type[float]:
    """An argparse ``type=`` for a duration of at least ``minimum`` seconds (and at most ten years)."""

    def parse(value: str) -> float:
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not minimum <= seconds <= MAX_SECONDS:
            raise argparse.ArgumentTypeError(f"{value!r} must be between {minimum:g}s and 10 years")
        return seconds

    parse.__name__ = flag  # argparse names the type in "invalid <name> value" messages
    return parse  # type: ignore[return-value]  # argparse's type= accepts the narrower callable
