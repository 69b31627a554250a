"""Identity and access (docs/design/auth.md): one test per rule, over real gRPC and TLS."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from servicekit import (
    ADMIN,
    EAST,
    NLP,
    TOKENS,
    VISION,
    WEST,
    client,
    counts,
    make_pki,
    queue,
    refused,
    running,
    secured,
    spec,
)

from federation.client import FederationClient, Tls
from federation.service.auth import Authenticator, Identity, PermissionDenied, Unauthenticated, digest
from federation.service.server import ServerTls
from federation.store import Store
from federation.v1 import jobs_pb2

CODE = grpc.StatusCode



async def _queues(srv: Any) -> None:
    async with client(srv, ADMIN) as admin:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await admin.create_queue(queue("vision-q", "vision"))
        await admin.create_queue(queue("shared"))  # no owners: every tenant


async def test_missing_or_unknown_token_is_unauthenticated_and_never_echoed(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv) as anonymous:
            err = await refused(anonymous.list_jobs(), CODE.UNAUTHENTICATED)
            assert "missing bearer token" in err.message
        async with client(srv, "s3cret-guess") as stranger:
            err = await refused(stranger.submit_job(spec("x", "shared")), CODE.UNAUTHENTICATED)
            assert "s3cret-guess" not in err.message
            await refused(stranger.list_queues(), CODE.UNAUTHENTICATED)
    assert "s3cret-guess" not in caplog.text and NLP not in caplog.text and ADMIN not in caplog.text


async def test_a_tenant_submits_only_to_queues_it_owns_or_open_ones(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp:
            made = await nlp.submit_job(spec("nlp-1", "nlp-q"))
            assert made.job.tenant == "nlp"
            await nlp.submit_job(spec("nlp-open", "shared"))
            before = counts(store)
            err = await refused(nlp.submit_job(spec("sneaky", "vision-q")), CODE.PERMISSION_DENIED)
            assert "vision-q" in err.message
            assert counts(store) == before


async def test_a_tenant_sees_and_cancels_only_its_queues_jobs(store: Store) -> None:
    async with running(store, secured(), watch_poll_seconds=0.05) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp, client(srv, VISION) as vision, client(srv, ADMIN) as admin:
            await nlp.submit_job(spec("nlp-1", "nlp-q"))
            await vision.submit_job(spec("vis-1", "vision-q"))
            await vision.submit_job(spec("vis-open", "shared"))
            assert sorted(j.id for j in await nlp.list_jobs()) == ["nlp-1", "vis-open"]  # silently filtered
            assert sorted(j.id for j in await admin.list_jobs()) == ["nlp-1", "vis-1", "vis-open"]
            await refused(nlp.list_jobs(queue="vision-q"), CODE.PERMISSION_DENIED)
            for call in (nlp.get_job("vis-1"), nlp.cancel_job("vis-1"), nlp.explain_job("vis-1"),
                         nlp.job_audit("vis-1")):
                await refused(call, CODE.PERMISSION_DENIED)
            assert (await vision.get_job("vis-1")).state == jobs_pb2.JOB_STATE_PENDING  # not cancelled
            assert (await nlp.cancel_job("vis-open")).state == jobs_pb2.JOB_STATE_CANCELLED  # open queue
            events: list[str] = []
            async for ev in nlp.watch_jobs():
                events.append(ev.job.id)
                if ev.job.id == "vis-open" and ev.type == jobs_pb2.JOB_EVENT_TYPE_CANCELLED:
                    break
            assert "vis-1" not in events and events[0] == "nlp-1"


async def test_only_admins_manage_queues(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, NLP) as nlp, client(srv, ADMIN) as admin:
            before = counts(store)
            await refused(nlp.create_queue(queue("mine", "nlp")), CODE.PERMISSION_DENIED)
            await refused(nlp.update_queue(queue("nlp-q", "nlp", weight=9)), CODE.PERMISSION_DENIED)
            await refused(nlp.delete_queue("shared"), CODE.PERMISSION_DENIED)
            assert counts(store) == before
            assert sorted(q.name for q in await nlp.list_queues()) == ["nlp-q", "shared", "vision-q"]
            assert (await admin.update_queue(queue("nlp-q", "nlp", weight=9))).weight == 9
            await admin.delete_queue("shared")


async def test_an_agent_token_cannot_use_the_submitter_api(store: Store) -> None:
    async with running(store, secured()) as srv:
        await _queues(srv)
        async with client(srv, EAST) as agent:
            await refused(agent.submit_job(spec("x", "shared")), CODE.PERMISSION_DENIED)
            await refused(agent.list_jobs(), CODE.PERMISSION_DENIED)


class _Metadata:
    def __init__(self, token: str | None) -> None:
        self._md = (("authorization", f"Bearer {token}"),) if token else ()

    def invocation_metadata(self) -> Any:
        return self._md


def test_an_agent_speaks_only_for_its_own_cluster() -> None:
    auth = secured()
    assert auth.authorize_cluster(_Metadata(EAST), "east") == Identity(cluster="east")
    assert auth.authorize_cluster(_Metadata(WEST), "west").cluster == "west"  # plain-text entry
    with pytest.raises(PermissionDenied):
        auth.authorize_cluster(_Metadata(EAST), "west")
    with pytest.raises(PermissionDenied):
        auth.authorize_cluster(_Metadata(ADMIN), "east")  # admins manage queues, not clusters
    with pytest.raises(Unauthenticated):
        auth.authorize_cluster(_Metadata(None), "east")
    assert Authenticator.open_mode().authorize_cluster(_Metadata(None), "anything").admin


def test_tokens_file_digests_plain_tokens_and_refusals(tmp_path: Path) -> None:
    auth = secured()
    assert set(auth.tenants) == {digest(ADMIN), digest(NLP), digest(VISION)}  # only digests are kept
    assert auth.plain_tokens == 2 and "plain text" in auth.describe() and VISION not in auth.describe()
    assert "open development mode" in Authenticator.open_mode().describe()
    path = tmp_path / "tokens.yaml"
    path.write_text(f"tenants:\n  {digest('a')}: alpha\nadmins: [alpha]\n")
    assert Authenticator.from_file(path).identify([("authorization", "Bearer a")]) == Identity("alpha", admin=True)
    bad: dict[str, Any]
    for bad in ({"tenants": {"t": "a", f"sha256:{digest('t')}": "b"}},  # one token, two tenants
                {"tenants": {"t": "a"}, "admins": ["nobody"]},
                {"tenants": {"t": "a"}, "clusters": {"east": "t"}},
                {"tenant": {}}):
        with pytest.raises(ValueError):
            Authenticator.from_mapping(bad)
    assert TOKENS["admins"] == ["ops"]
    # an admins entry that is a list or a mapping (a YAML slip) is the same clean refusal,
    # which `federation serve` prints with exit code 2, not a TypeError's traceback
    for entry in ("[alpha]", "{alpha: 1}"):
        path.write_text(f"tenants:\n  {digest('a')}: alpha\nadmins: [{entry}]\n")
        with pytest.raises(ValueError, match="admins entry 0 must be a tenant name"):
            Authenticator.from_file(path)


async def test_tls_and_required_client_certificates(store: Store, tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls = ServerTls(pki["server_cert"], pki["server_key"], pki["ca"])
    async with running(store, tls=tls) as srv:
        target = f"127.0.0.1:{srv.port}"
        mutual = Tls(ca=pki["ca"], cert=pki["client_cert"], key=pki["client_key"])
        async with FederationClient(target, tls=mutual, timeout=5) as ok:
            await ok.create_queue(queue("secure"))
        async with FederationClient(target, tls=Tls(ca=pki["ca"]), timeout=5) as no_cert:
            await refused(no_cert.list_queues(), CODE.UNAVAILABLE)
        async with FederationClient(target, timeout=5) as plaintext:
            await refused(plaintext.list_queues(), CODE.UNAVAILABLE)
    async with running(store, tls=ServerTls(pki["server_cert"], pki["server_key"])) as srv, \
            FederationClient(f"localhost:{srv.port}", tls=Tls(ca=pki["ca"]), timeout=5) as server_only:
        assert [q.name for q in await server_only.list_queues()] == ["secure"]
