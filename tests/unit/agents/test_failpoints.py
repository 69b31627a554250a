"""The crash failpoint is inert unless set, and refuses a value that is not a count."""

from __future__ import annotations

import pytest

from agents.failpoints import CRASH_AFTER_BINDS, with_failpoints
from agents.fake.cluster import FakeCluster


def test_without_the_variable_the_backend_is_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CRASH_AFTER_BINDS, raising=False)
    backend = FakeCluster("c")
    assert with_failpoints(backend) is backend


def test_a_value_that_is_not_a_count_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CRASH_AFTER_BINDS, "soon")
    with pytest.raises(SystemExit, match=CRASH_AFTER_BINDS):
        with_failpoints(FakeCluster("c"))


def test_when_armed_everything_but_bind_is_delegated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CRASH_AFTER_BINDS, "3")
    backend = FakeCluster("c")
    armed = with_failpoints(backend)
    assert armed is not backend
    assert armed.cluster == backend.cluster
