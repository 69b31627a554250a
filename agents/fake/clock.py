"""A manual clock: time moves only when told to, so tests and the demo never sleep."""

from __future__ import annotations


class ManualClock:
    """Callable like ``time.time``; ``advance`` moves it forward."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds
        return self._now

    def set(self, now: float) -> None:
        if now < self._now:
            raise ValueError("a clock cannot go backwards")
        self._now = float(now)
