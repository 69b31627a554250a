"""Numeric flag values with their range, checked by argparse before anything starts.

Why: ``type=float`` takes ``nan``, ``inf`` and negatives, and ``type=int`` takes 0 and
negatives, which then failed far from the flag — ``--submit-batch-size 0`` as a
``ValueError`` traceback from the batcher, ``--speed -1`` as "a clock cannot go
backwards", ``--speed nan`` or ``--round-debounce-seconds nan`` accepted and hanging.
A refusal here is argparse's usage error (exit 2) naming the flag and the range.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from federation.cli.durations import MAX_SECONDS


def number_flag(minimum: float, maximum: float = MAX_SECONDS, *, above: bool = False) -> Callable[[str], float]:
    """A finite number in ``[minimum, maximum]`` (``(minimum, maximum]`` when ``above``)."""
    low = f"above {minimum:g}" if above else f"at least {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > maximum or value < minimum or (above and value == minimum):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number {low} and at most {maximum:g}")
        return value

    parse.__name__ = "number"  # argparse names the type in "invalid <name> value" messages
    return parse


def integer_flag(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer of at least ``minimum`` (and at most ``maximum``)."""
    bounds = f"at least {minimum}" + (f" and at most {maximum}" if maximum is not None else "")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {bounds}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected an integer {bounds}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse
