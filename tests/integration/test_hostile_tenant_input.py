"""What a hostile tenant tried over the submitter API, each refused or contained: another
tenant's job states and cancel reasons read through ``after``, an unbounded ``after``, a
policy timeout of infinity that stopped every round, a dry run that skipped the name
check, a cancel reason of megabytes, an unknown state filter and a name so long the
refusal itself overflowed gRPC's header limit."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import grpc
import pytest
from servicekit import ADMIN, NLP, VISION, client, counts, queue, refused, running, secured, spec

from federation.control.snapshot import load
from federation.store import Store
from federation.v1 import types_pb2

CODE = grpc.StatusCode


async def _queues(srv: Any) -> None:
    async with client(srv, ADMIN) as admin:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await admin.create_queue(queue("vision-q", "vision"))


async def test_after_waits_only_for_the_tenants_own_jobs_and_never_shows_anothers(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp, client(srv, VISION) as vision:
            await vision.submit_job(spec("vis-1", "vision-q"))
            await vision.cancel_job("vis-1", "vision-private: customer acme contract ended")
            await nlp.submit_job(spec("nlp-1", "nlp-q"))
            await nlp.cancel_job("nlp-1", "nlp's own reason")
            await nlp.submit_job(spec("nlp-spy", "nlp-q", after=["vis-1"]))
            await nlp.submit_job(spec("nlp-next", "nlp-q", after=["nlp-1"]))
    held = load(store, 0.0).held
    verdict, reason, _ = held["nlp-spy"]
    assert (verdict, reason) == ("wait", "waiting for vis-1 (not submitted)")
    assert "acme" not in reason
    verdict, reason, _ = held["nlp-next"]
    assert (verdict, reason) == ("stop", "dependency nlp-1 cancelled: nlp's own reason")


async def test_after_is_bounded_and_names_are_checked(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp:
            before = counts(store)
            err = await refused(nlp.submit_job(spec("many", "nlp-q", after=[f"j{i}" for i in range(65)])),
                                 CODE.INVALID_ARGUMENT)
            assert err.message.startswith("spec.after: 65 is over the limit of 64")
            err = await refused(nlp.submit_job(spec("bad", "nlp-q", after=["Not_A_Name"])), CODE.INVALID_ARGUMENT)
            assert err.message.startswith("spec.after[0]:")
            assert counts(store) == before


@pytest.mark.parametrize("timeout", [math.inf, math.nan, 1e300])
async def test_a_policy_timeout_that_is_not_a_finite_bounded_duration_isrefused(store: Store,
                                                                                 timeout: float) -> None:
    policy = types_pb2.LifecyclePolicy(action="RestartJob", events=["PodFailed"], timeout_seconds=timeout)
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp:
            err = await refused(nlp.submit_job(spec("t", "nlp-q", policies=[policy])), CODE.INVALID_ARGUMENT)
            assert err.message.startswith("spec.policies[0].timeout: must be between 0 and")


async def test_a_dry_run_meets_the_name_check_a_submission_meets(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp:
            await nlp.submit_job(spec("taken", "nlp-q"))
            assert not (await nlp.submit_job(spec("taken", "nlp-q"), dry_run=True)).created  # identical: fine
            err = await refused(nlp.submit_job(spec("taken", "nlp-q", replicas=3), dry_run=True),
                                 CODE.ALREADY_EXISTS)
            assert "different spec" in err.message


async def test_cancel_reason_state_filter_and_name_are_bounded(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp:
            await nlp.submit_job(spec("j", "nlp-q"))
            err = await refused(nlp.cancel_job("j", "x" * 4097), CODE.INVALID_ARGUMENT)
            assert err.message == "reason: is 4097 characters, over the limit of 4096"
            assert (await nlp.get_job("j")).state != 0  # still there, not cancelled
            err = await refused(nlp.list_jobs_page(state=99), CODE.INVALID_ARGUMENT)
            assert err.message == "state: unknown job state 99"
            err = await refused(nlp.get_job("n" * 100_000), CODE.INVALID_ARGUMENT)
            assert err.message.startswith("name:") and len(err.message) < 4096
            err = await refused(nlp.get_queue("q" * 100_000), CODE.INVALID_ARGUMENT)
            assert err.message.startswith("name:") and len(err.message) < 4096


async def test_a_queue_name_that_cannot_exist_is_invalid_argument_not_a_silent_empty_answer(store: Store) -> None:
    """A watch on such a queue was accepted and never ended (an admin's) or said "no such
    queue" (a tenant's); a listing answered an empty page: the field was never checked."""
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp, client(srv, ADMIN) as admin:
            for c in (nlp, admin):
                for bad in ("q" * 100_000, "Nlp-Q", "nlp_q"):
                    for batched in (True, False):
                        err = await refused(asyncio.wait_for(anext(c.watch_jobs(0, bad, batched=batched)), 30),
                                            CODE.INVALID_ARGUMENT)
                        assert err.message.startswith("queue: must be a DNS-1123 label"), err.message
                    err = await refused(c.list_jobs(queue=bad), CODE.INVALID_ARGUMENT)
                    assert err.message.startswith("queue: must be a DNS-1123 label"), err.message
                    err = await refused(c.get_queue(bad), CODE.INVALID_ARGUMENT)
                    assert err.message.startswith("name: must be a DNS-1123 label"), err.message
            err = await refused(admin.delete_queue("Nlp-Q"), CODE.INVALID_ARGUMENT)
            assert err.message.startswith("name: must be a DNS-1123 label"), err.message
            await refused(nlp.get_queue("nowhere"), CODE.NOT_FOUND)  # a valid name nobody created
