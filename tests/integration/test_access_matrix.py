"""Tenant isolation that holds over time (issue 10): the access matrix, and the WatchJobs races.

Roles: the queue's owner (nlp), another tenant (vision), an admin (ops), a cluster agent's
token (east) and no token. Every cell is checked over real gRPC against real SQLite and
PostgreSQL; then the two watch races of the issue: a watch opened on a queue that does not
exist yet, and a watch that outlives its owner's removal from the queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from servicekit import ADMIN, EAST, NLP, VISION, client, queue, running, secured, spec

from federation.client import FederationClient, ServiceError
from federation.store import Store
from federation.v1 import jobs_pb2

CODE = grpc.StatusCode
OK = CODE.OK


async def _first_event(c: FederationClient, queue_name: str) -> str:
    async for ev in c.watch_jobs(0, queue_name):
        return ev.job.id
    return ""


Op = Callable[[FederationClient], Awaitable[Any]]
OPS: dict[str, Op] = {
    "submit": lambda c: c.submit_job(spec("probe", "nlp-q")),
    "get": lambda c: c.get_job("nlp-1"),
    "list-queue": lambda c: c.list_jobs(queue="nlp-q"),
    "watch-queue": lambda c: _first_event(c, "nlp-q"),
    "explain": lambda c: c.explain_job("nlp-1"),
    "audit": lambda c: c.job_audit("nlp-1"),
    "cancel": lambda c: c.cancel_job("nlp-1"),
}
ROLES = {"owner": NLP, "other-tenant": VISION, "admin": ADMIN, "agent": EAST, "anonymous": None}
P, U, D = CODE.PERMISSION_DENIED, CODE.UNAUTHENTICATED, CODE.PERMISSION_DENIED
EXPECTED: dict[str, dict[str, grpc.StatusCode]] = {
    "owner": dict.fromkeys(OPS, OK),
    "other-tenant": dict.fromkeys(OPS, P),
    "admin": dict.fromkeys(OPS, OK),
    "agent": dict.fromkeys(OPS, D),
    "anonymous": dict.fromkeys(OPS, U),
}


async def _code(op: Op, c: FederationClient) -> grpc.StatusCode:
    try:
        await asyncio.wait_for(op(c), 60)
    except ServiceError as err:
        return err.code
    return OK


async def test_the_access_matrix(store: Store) -> None:
    got: dict[str, dict[str, grpc.StatusCode]] = {}
    async with running(store, secured()) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await nlp.submit_job(spec("nlp-1", "nlp-q"))
        for role, token in ROLES.items():
            got[role] = {}
            for name, op in OPS.items():
                if name == "cancel" and role in ("owner", "admin"):
                    continue  # checked last, once: a cancel changes the job for every later cell
                async with client(srv, token) as c:
                    got[role][name] = await _code(op, c)
        async with client(srv, NLP) as nlp:
            got["owner"]["cancel"] = await _code(OPS["cancel"], nlp)
        async with client(srv, ADMIN) as admin:
            got["admin"]["cancel"] = await _code(OPS["cancel"], admin)  # cancelling a cancelled job is a no-op
    wrong = {(r, o): (got[r][o].name, EXPECTED[r][o].name) for r in ROLES for o in OPS if got[r][o] != EXPECTED[r][o]}
    assert not wrong, wrong


async def test_errors_name_nothing_of_another_tenants_job(store: Store) -> None:
    async with running(store, secured()) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp, client(srv, VISION) as vision:
        await admin.create_queue(queue("nlp-q", "nlp"))
        secret = spec("nlp-secret", "nlp-q")
        secret.labels["project"] = "top-secret-model"
        await nlp.submit_job(secret)
        for call in (vision.get_job("nlp-secret"), vision.explain_job("nlp-secret"),
                     vision.job_audit("nlp-secret"), vision.cancel_job("nlp-secret"),
                     vision.submit_job(spec("nlp-secret", "nlp-q"))):
            with pytest.raises(ServiceError) as err:
                await call
            assert "top-secret" not in err.value.message and "gpu" not in err.value.message.lower()


async def test_a_watch_on_a_queue_that_does_not_exist_yet_is_refused(store: Store) -> None:
    """Issue 10: A watched 'future'; an admin then created it for B; A received B's jobs."""
    async with running(store, secured(), watch_poll_seconds=0.05) as srv, \
            client(srv, NLP) as nlp, client(srv, ADMIN) as admin, client(srv, VISION) as vision:
        with pytest.raises(ServiceError) as err:
            await asyncio.wait_for(_first_event(nlp, "future"), 60)
        assert err.value.code == CODE.PERMISSION_DENIED and "no such queue" in err.value.message
        # An unfiltered watch opened before the queue exists never shows B's jobs either.
        await admin.create_queue(queue("nlp-q", "nlp"))
        seen: list[str] = []

        async def watch() -> None:
            async for ev in nlp.watch_jobs(0):
                seen.append(ev.job.id)
                if ev.job.id == "nlp-last":
                    return

        watching = asyncio.create_task(watch())
        await asyncio.sleep(0.3)
        await admin.create_queue(queue("future", "vision"))
        await vision.submit_job(spec("vision-secret", "future"))
        await nlp.submit_job(spec("nlp-last", "nlp-q"))
        await asyncio.wait_for(watching, 60)
        assert seen == ["nlp-last"], seen
        assert await asyncio.wait_for(_first_event(admin, "future"), 60) == "vision-secret"


async def test_removing_a_tenant_from_the_owners_ends_its_open_watch(store: Store) -> None:
    """Issue 10: removing A from a queue's owners did not end A's open watch on it."""
    async with running(store, secured(), watch_poll_seconds=0.05) as srv, \
            client(srv, NLP) as nlp, client(srv, ADMIN) as admin, client(srv, VISION) as vision:
        await admin.create_queue(queue("team", "nlp", "vision"))
        seen: list[str] = []

        async def watch() -> None:
            async for ev in nlp.watch_jobs(0, "team"):
                seen.append(ev.job.id)

        watching = asyncio.create_task(watch())
        await vision.submit_job(spec("before", "team"))
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.05)
        await admin.update_queue(queue("team", "vision"))  # nlp is no longer an owner
        await vision.submit_job(spec("after", "team"))
        with pytest.raises(ServiceError) as err:
            await asyncio.wait_for(watching, 60)
        assert err.value.code == CODE.PERMISSION_DENIED, err.value
        assert seen == ["before"], seen


async def test_watch_resumes_from_an_event_id_and_replays_history_in_pages(store: Store) -> None:
    async with running(store, secured(), watch_poll_seconds=0.05) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp:
        await admin.create_queue(queue("nlp-q", "nlp"))
        for i in range(600):  # more than one page (500) and more than the live buffer needs
            await nlp.submit_job(spec(f"j{i}", "nlp-q", replicas=1))
        ids: list[int] = []
        async for ev in nlp.watch_jobs(0, "nlp-q"):
            ids.append(ev.event_id)
            if len(ids) == 600:
                break
        assert ids == sorted(ids) and len(set(ids)) == 600
        resumed = []
        async for ev in nlp.watch_jobs(ids[449]):
            resumed.append(ev.event_id)
            if len(resumed) == 150:
                break
        assert resumed == ids[450:]
        assert srv.jobs.feed.polls >= 1
        assert (await nlp.get_job("j0")).state == jobs_pb2.JOB_STATE_PENDING
