"""The event feed's coalescing window (service/event_feed.py): the configured one, longer with many watchers."""

from __future__ import annotations

import contextlib

import pytest

from federation.service.event_feed import (
    COALESCE_PER_WATCHER_SECONDS,
    DEFAULT_COALESCE_SECONDS,
    MAX_COALESCE_SECONDS,
    EventFeed,
)


def _window(watchers: int, coalesce: float = DEFAULT_COALESCE_SECONDS) -> float:
    feed = EventFeed(store=None, coalesce_seconds=coalesce)
    with contextlib.ExitStack() as open_watches:
        for _ in range(watchers):
            open_watches.enter_context(feed.watching())
        return feed.window()


@pytest.mark.parametrize(("watchers", "window"), [
    (0, DEFAULT_COALESCE_SECONDS),
    (1, DEFAULT_COALESCE_SECONDS),  # a few watchers keep the short window
    (50, DEFAULT_COALESCE_SECONDS),
    (200, 200 * COALESCE_PER_WATCHER_SECONDS),  # the fan-out bench: 200 ms
    (10_000, MAX_COALESCE_SECONDS),  # capped, well inside the 1 s delivery goal
], ids=["no-watcher", "one-watcher", "fifty", "two-hundred", "ten-thousand"])
def test_the_window_grows_with_the_watchers_up_to_the_cap(watchers: int, window: float) -> None:
    assert _window(watchers) == pytest.approx(window)


def test_an_operators_longer_window_wins_and_zero_means_at_once_for_few_watchers() -> None:
    assert _window(200, coalesce=0.5) == 0.5
    assert _window(3, coalesce=0.0) == pytest.approx(3 * COALESCE_PER_WATCHER_SECONDS)


def test_a_closed_watch_no_longer_counts() -> None:
    feed = EventFeed(store=None)
    with feed.watching(), feed.watching():
        assert feed.watchers == 2
    assert feed.watchers == 0


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ValueError):
        EventFeed(store=None, coalesce_seconds=-0.1)
