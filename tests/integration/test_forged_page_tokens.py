"""Forged page tokens are ``InvalidInput`` on ``page_token``, on SQLite and PostgreSQL alike.

A token is opaque base64 JSON, but a client can forge one: a list, dict, null or huge int
where a job name belongs, a round id of 1e30 or Infinity, a time whose UTC year does not
exist. Each once reached the database driver and failed there (INTERNAL); each must be the
same malformed-token refusal a garbled token gets, and a genuine token must still page.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from federation.domain import Job, Queue, Resources, Task
from federation.domain.errors import InvalidInput
from federation.store import Store

TIME = "2020-01-01T00:00:00+00:00"


def forge(*values: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


def raw(text: str) -> str:
    """A token from JSON text json.dumps would not write (Infinity, lone surrogates)."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.fixture
def filled(store: Store) -> Store:
    store.queues.create(Queue("research"))
    store.queues.create(Queue("prod"))
    for name in ("a", "b", "c"):
        store.jobs.submit(Job(name=name, queue="research", tasks=(Task("w", 1, Resources.of(cpu=1000)),)))
    return store


def _refused(call: Callable[[], object]) -> None:
    with pytest.raises(InvalidInput) as info:
        call()
    assert (info.value.path, info.value.rule) == ("page_token", "malformed page token")


@pytest.mark.parametrize("token", [
    pytest.param(forge("jobs", TIME, [1]), id="name a list"),
    pytest.param(forge("jobs", TIME, {"a": 1}), id="name a dict"),
    pytest.param(forge("jobs", TIME, None), id="name null"),
    pytest.param(forge("jobs", TIME, 5), id="name an int"),
    pytest.param(forge("jobs", TIME, 10**30), id="name a huge int"),
    pytest.param(forge("jobs", TIME, "a\x00b"), id="name with NUL"),
    pytest.param(raw('["jobs","2020-01-01T00:00:00+00:00","\\ud800"]'), id="name a lone surrogate"),
    pytest.param(forge("jobs", "0001-01-01T00:00:00+14:00", "a"), id="time before year 1 in UTC"),
    pytest.param(forge("jobs", "9999-12-31T23:59:59-14:00", "a"), id="time after year 9999 in UTC"),
    pytest.param(forge("jobs", 1.5, "a"), id="time a float"),
])
def test_a_forged_jobs_token_is_malformed(filled: Store, token: str) -> None:
    _refused(lambda: filled.jobs.list(page_token=token))


@pytest.mark.parametrize("token", [
    pytest.param(forge("rounds", 10**30), id="huge int"),
    pytest.param(forge("rounds", 2**63), id="just past int64"),
    pytest.param(forge("rounds", -1), id="negative"),
    pytest.param(forge("rounds", 1e30), id="1e30"),
    pytest.param(forge("rounds", 1e308), id="1e308"),
    pytest.param(raw('["rounds",Infinity]'), id="Infinity"),
    pytest.param(raw('["rounds",NaN]'), id="NaN"),
    pytest.param(forge("rounds", True), id="bool"),
    pytest.param(forge("rounds", [1]), id="list"),
])
@pytest.mark.parametrize("queues", [None, ["research"]], ids=["admin", "tenant"])
def test_a_forged_rounds_token_is_malformed(filled: Store, token: str, queues: list[str] | None) -> None:
    _refused(lambda: filled.audit.list_rounds(page_token=token, queues=queues))


@pytest.mark.parametrize("token", [
    pytest.param(forge("queues", [1]), id="a list"),
    pytest.param(forge("queues", {}), id="a dict"),
    pytest.param(forge("queues", 10**30), id="a huge int"),
    pytest.param(forge("queues", "a\x00"), id="with NUL"),
])
def test_a_forged_queues_token_is_malformed(filled: Store, token: str) -> None:
    _refused(lambda: filled.queues.list(page_token=token))


def test_genuine_tokens_still_page(filled: Store) -> None:
    first = filled.jobs.list(page_size=2)
    rest = filled.jobs.list(page_size=2, page_token=first.next_token)
    assert [r.name for p in (first, rest) for r in p.items] == ["a", "b", "c"]
    queues = filled.queues.list(page_size=1)
    assert [q.name for q in filled.queues.list(page_token=queues.next_token).items] == ["research"]
    assert filled.audit.list_rounds(page_token=forge("rounds", 2**63 - 1)).items == ()
    assert filled.audit.list_rounds(page_token=forge("rounds", "5"), queues=["research"]).items == ()
