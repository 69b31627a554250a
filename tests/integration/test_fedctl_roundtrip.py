"""The issue's round trip with real processes: ``federation serve`` on SQLite and on
PostgreSQL, driven by ``fedctl`` (create queue, submit a Volcano Job, get, list, explain,
cancel, audit; every read also with ``-o json``), plus graceful shutdown on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
import yaml
from fedctlkit import MANIFESTS, fedctl, federation, serve
from servicekit import spec

from federation.client import FederationClient, ServiceError
from federation.service.auth import digest
from federation.store import Store
from federation.v1 import queues_pb2

ADMIN, NLP = "rt-admin", "rt-nlp"


def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tenants": {digest(ADMIN): "ops", digest(NLP): "nlp"}, "admins": ["ops"]}))
    return path


def _prepare(db_url: str) -> None:
    """PostgreSQL is never migrated implicitly: serve refuses, `federation db upgrade` fixes it."""
    if db_url.startswith("sqlite"):
        return
    refused = federation("serve", "--listen", "127.0.0.1:0", "--db", db_url)
    assert refused.code != 0 and "federation db upgrade" in refused.err, refused
    upgraded = federation("db", "upgrade", "--db", db_url)
    assert upgraded.code == 0, upgraded.err


def test_fedctl_round_trip_against_federation_serve(db_url: str, tmp_path: Path) -> None:
    _prepare(db_url)
    with serve(db_url, tmp_path, "--tokens", str(_tokens(tmp_path))) as srv:
        s = srv.address
        made = fedctl(s, "queue", "create", "-f", str(MANIFESTS / "queue-research.yaml"), token=ADMIN)
        assert made.code == 0 and "queue/research created" in made.out, made
        flags = fedctl(s, "queue", "create", "scratch", "--weight", "2", "--capability", "cpu=64,nvidia.com/gpu=8",
                       "--owner", "nlp", "-o", "json", token=ADMIN)
        assert flags.code == 0 and flags.json()["queues"][0]["capability"]["quantities"]["nvidia.com/gpu"] == "8"
        queues = fedctl(s, "queue", "list", "-o", "json", token=NLP).json()["queues"]
        assert {q["name"]: q["owners"] for q in queues} == {"research": ["nlp", "vision"], "scratch": ["nlp"]}
        assert "research" in fedctl(s, "queue", "list", token=NLP).out

        job_file = str(MANIFESTS / "pytorch-llama-pretrain.yaml")
        submitted = fedctl(s, "submit", "-f", job_file, FEDCTL_TOKEN=NLP)  # token from the environment
        assert submitted.code == 0 and "job/llama-pretrain created in queue research" in submitted.out, submitted
        again = fedctl(s, "submit", "-f", job_file, "-o", "json", token=NLP)
        assert again.code == 0 and again.json()["results"][0]["created"] is False

        shown = fedctl(s, "get", "job", "llama-pretrain", token=NLP)
        assert shown.code == 0 and "queue:      research" in shown.out and "worker: 15 x" in shown.out
        as_json = fedctl(s, "get", "job", "llama-pretrain", "-o", "json", token=NLP).json()
        assert as_json["id"] == "llama-pretrain" and as_json["tenant"] == "nlp"
        assert as_json["spec"]["minAvailable"] == 16 and as_json["spec"]["networkTopology"]["highestTierAllowed"] == 1
        assert as_json["state"] in ("JOB_STATE_PENDING",)

        listed = fedctl(s, "list", "jobs", "--queue", "research", token=NLP)
        assert listed.code == 0 and "llama-pretrain" in listed.out and "pending" in listed.out
        listed_json = fedctl(s, "list", "jobs", "--state", "pending", "-o", "json", token=NLP).json()
        assert [j["id"] for j in listed_json["jobs"]] == ["llama-pretrain"]
        assert fedctl(s, "list", "jobs", "--state", "running", "-o", "json", token=NLP).json() == {"jobs": []}

        explained = fedctl(s, "explain", "llama-pretrain", token=NLP)
        assert explained.code == 0 and "is pending" in explained.out
        assert "pending" in fedctl(s, "explain", "llama-pretrain", "-o", "json", token=NLP).json()

        clusters = fedctl(s, "cluster", "list", "-o", "json", token=NLP)
        assert clusters.code == 0 and clusters.json() == {"clusters": []}
        assert fedctl(s, "cluster", "list", token=NLP).out.startswith("NAME")

        cancelled = fedctl(s, "cancel", "llama-pretrain", "--reason", "superseded", token=NLP)
        assert cancelled.code == 0 and "job/llama-pretrain cancelled" in cancelled.out, cancelled
        state = fedctl(s, "get", "job", "llama-pretrain", "-o", "json", token=NLP).json()
        assert state["state"] == "JOB_STATE_CANCELLED" and state["reason"] == "superseded"

        audit = fedctl(s, "audit", "llama-pretrain", token=NLP)
        assert audit.code == 0 and ("llama-pretrain" in audit.out or audit.out.startswith("ROUND")), audit
        audit_json = fedctl(s, "audit", "llama-pretrain", "-o", "json", token=NLP).json()
        assert audit_json["job"] == "llama-pretrain" and isinstance(audit_json["decisions"], list)

        watched = fedctl(s, "watch", "--count", "2", "-o", "json", token=NLP)
        assert watched.code == 0 and '"JOB_EVENT_TYPE_SUBMITTED"' in watched.out

        assert fedctl(s, "queue", "delete", "scratch", token=ADMIN).code == 0
        denied = fedctl(s, "queue", "delete", "research", token=NLP)
        assert denied.code == 1 and "PERMISSION_DENIED" in denied.err
        missing = fedctl(s, "get", "job", "nope", token=NLP)
        assert missing.code == 1 and "NOT_FOUND" in missing.err and len(missing.err.splitlines()) == 1
        assert srv.stop() == 0
    log = srv.log.read_text()
    assert ADMIN not in log and NLP not in log  # tokens are never logged


def test_federation_serve_prints_its_address_and_warns_in_open_mode(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'open.db'}", tmp_path) as srv:
        assert srv.address.startswith("127.0.0.1:") and not srv.address.endswith(":0")
        assert fedctl(srv.address, "queue", "create", "anyone").code == 0  # everyone is admin
        assert srv.stop(signal.SIGINT) == 0
    assert "open development mode" in srv.log.read_text()


async def test_sigterm_lets_in_flight_submissions_finish_and_exits_zero(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'drain.db'}"
    with serve(db, tmp_path) as srv:
        async with FederationClient(srv.address, timeout=30) as c:
            await c.create_queue(queues_pb2.Queue(name="research"))
            acked: list[str] = []
            refused: list[str] = []

            async def submit(i: int) -> None:
                try:
                    await c.submit_job(spec(f"drain-{i}"))
                    acked.append(f"drain-{i}")
                except ServiceError as exc:
                    refused.append(exc.code.name)

            tasks = [asyncio.create_task(submit(i)) for i in range(300)]
            while len(acked) < 20:
                await asyncio.sleep(0.005)
            srv.proc.send_signal(signal.SIGTERM)
            await asyncio.gather(*tasks)
        code = await asyncio.to_thread(srv.proc.wait, 30)
    assert code == 0
    # Calls that had not reached a handler are refused (the client may resubmit: submission
    # is idempotent); a handler that started finishes within the grace period.
    assert set(refused) <= {"UNAVAILABLE", "CANCELLED"}, refused
    with Store(db) as store:
        stored = {r.name for r in store.jobs.list(page_size=1000).items}
        events = store.jobs.events_since(0, limit=10_000).events
    assert set(acked) <= stored  # every acknowledged job is durable
    assert sorted(e.job for e in events if e.type == "Submitted") == sorted(stored)  # and whole
    assert "federation: stopped" in srv.log.read_text()


async def test_stop_waits_for_an_in_flight_request(store: Store) -> None:
    from servicekit import client, running

    slow_calls: list[str] = []
    real_submit_many = store.jobs.submit_many

    def slow_submit_many(*a: object, **kw: object) -> object:
        import time

        time.sleep(1.0)  # a slow database: the request is in flight when stop() begins
        slow_calls.append("done")
        return real_submit_many(*a, **kw)  # type: ignore[arg-type]  # forwarded exactly as the store was called

    async with running(store) as srv, client(srv) as c:
        await c.create_queue(queues_pb2.Queue(name="research"))
        store.jobs.submit_many = slow_submit_many  # type: ignore[method-assign,assignment]  # a test double replaces the method
        pending = asyncio.create_task(c.submit_job(spec("in-flight")))
        await asyncio.sleep(0.3)
        await srv.stop(grace=10)
        assert (await pending).created and slow_calls == ["done"]
    assert store.jobs.get("in-flight").state == "pending"


@pytest.mark.parametrize(("bad", "message"), [
    ("--listen nonsense", "is not HOST:PORT"),
    ("--tokens /nonexistent.yaml", "--tokens"),
    ("--db postgresql+psycopg://postgres@127.0.0.1:1/absent", "database unavailable"),
])
def test_serve_refuses_bad_options_with_one_line(bad: str, message: str, tmp_path: Path) -> None:
    result = federation("serve", "--listen", "127.0.0.1:0", "--db", f"sqlite:///{tmp_path / 'x.db'}", *bad.split())
    lines = result.err.strip().splitlines()
    assert result.code != 0 and lines[-1].startswith("error: ") and message in lines[-1], result.err
