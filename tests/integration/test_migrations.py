"""Alembic migrations: up, down and up again on both dialects; the ORM matches the result."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from federation.store import migrate as migrations
from federation.store.engine import make_engine
from federation.store.models import Base

TABLES = {"queues", "jobs", "job_events", "clusters", "works", "placement_rounds", "placement_decisions",
          "audit_pruning", "propagation_policies", "policy_claims", "priority_classes", "leases",
          "placement_round_queues", "job_waits"}


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def _diff(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return list(compare_metadata(context, Base.metadata))


def test_upgrade_downgrade_upgrade_round_trip(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        assert migrations.current(db_url) is None
        migrations.upgrade(db_url, "head")
        assert migrations.is_at_head(db_url)
        assert _tables(engine) == TABLES

        migrations.downgrade(db_url, "base")
        assert migrations.current(db_url) is None
        assert _tables(engine) == set()

        migrations.upgrade(db_url)
        assert migrations.current(db_url) == migrations.head()
        assert _tables(engine) == TABLES
    finally:
        engine.dispose()


def test_models_match_the_migrated_schema(db_url: str) -> None:
    """Autogenerate finds nothing to do: a model change without a migration fails here."""
    migrations.upgrade(db_url)
    engine = make_engine(db_url)
    try:
        assert _diff(engine) == []
    finally:
        engine.dispose()


def test_migrations_are_found_through_the_installed_package() -> None:
    directory = migrations.migrations_dir()
    assert (directory / "env.py").is_file()
    assert any(p.name.endswith(".py") for p in (directory / "versions").iterdir())
    newest = max(p.name.split("_", 1)[0] for p in (directory / "versions").iterdir() if p.name[:4].isdigit())
    assert migrations.head() == newest


def test_upgrade_accepts_an_engine(db_url: str) -> None:
    engine = make_engine(db_url, foreign_keys=False)
    try:
        migrations.upgrade(engine)
        assert migrations.is_at_head(engine)
    finally:
        engine.dispose()


def test_work_state_running_becomes_bound_and_rows_are_carried_both_ways(db_url: str) -> None:
    """0006 renames the work state ``running`` to ``bound`` on existing rows (and back on
    downgrade); every other row and column is carried unchanged, and SQLite keeps its
    AUTOINCREMENT so a work id is never reused after the table is rebuilt."""
    migrations.upgrade(db_url, "0005")
    engine = make_engine(db_url)
    t = "'2026-01-01 00:00:00+00:00'"
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO queues (name, weight, priority, guarantee, reclaimable, owners, created_at, "
                              f"updated_at, version) VALUES ('q', 1, 0, '{{}}', true, '[]', {t}, {t}, 1)"))
            conn.execute(text("INSERT INTO clusters (name, epoch, agent_id, labels, taints, healthy, lost, "
                              "registered_at, last_heartbeat, nodes, ready_nodes, hypernodes, max_tier, allocatable, "
                              f"free, gpus_allocatable, gpus_free) VALUES ('east', 1, 'a', '{{}}', '[]', true, false, "
                              f"{t}, {t}, 0, 0, 0, 0, '{{}}', '{{}}', 0, 0)"))
            for job in ("bound-job", "applied-job", "gone-job"):
                conn.execute(text("INSERT INTO jobs (name, queue, tenant, spec, spec_digest, state, unschedulable, "
                                  "reason, message, cluster, restarts, created_at, updated_at, version) VALUES "
                                  f"('{job}', 'q', 't', '{{}}', 'd', 'running', false, '', '', 'east', 0, {t}, {t}, "
                                  "1)"))
            ids = [conn.execute(text("INSERT INTO works (job, cluster, version, state, message, payload, created_at, "
                                     f"updated_at) VALUES ('{job}', 'east', 1, '{state}', '{job}', '{{}}', {t}, {t}) "
                                     "RETURNING id")).scalar_one()
                   for job, state in [("bound-job", "running"), ("applied-job", "applied"), ("gone-job", "withdrawn")]]
            conn.execute(text(f"DELETE FROM works WHERE id = {ids[2]}"))  # the highest id is gone; it stays used

        def works() -> list[tuple[object, ...]]:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(text("SELECT id, job, state, message FROM works ORDER BY id"))]

        migrations.upgrade(db_url, "0006")
        assert works() == [(ids[0], "bound-job", "bound", "bound-job"),
                           (ids[1], "applied-job", "applied", "applied-job")]
        with engine.begin() as conn:
            with pytest.raises(IntegrityError), conn.begin_nested():  # the old spelling is refused from now on
                conn.execute(text(f"UPDATE works SET state = 'running' WHERE id = {ids[1]}"))
            new_id = conn.execute(text("INSERT INTO works (job, cluster, version, state, message, payload, created_at, "
                                       f"updated_at) VALUES ('gone-job', 'east', 2, 'pending', '', '{{}}', {t}, {t}) "
                                       "RETURNING id")).scalar_one()
        assert new_id > ids[2]
        migrations.upgrade(db_url, "head")  # the models describe the newest schema, not 0006's
        assert _diff(engine) == []

        migrations.downgrade(db_url, "0005")
        assert works()[:2] == [(ids[0], "bound-job", "running", "bound-job"),
                               (ids[1], "applied-job", "applied", "applied-job")]
    finally:
        engine.dispose()


def test_decisions_are_tied_to_the_job_of_their_name_that_exists(db_url: str) -> None:
    """0009 stamps each decision with its job's creation time (which job of that name it is
    about): existing decisions of an existing job get that job's; those of a job that no
    longer exists stay NULL (every decision under the name, for admins)."""
    migrations.upgrade(db_url, "0008")
    engine = make_engine(db_url)
    tables = Base.metadata.tables
    t = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            conn.execute(tables["queues"].insert().values(name="q", guarantee={}, owners=[], created_at=t,
                                                          updated_at=t))
            conn.execute(tables["jobs"].insert().values(
                name="kept", queue="q", tenant="", spec={}, spec_digest="d", state="pending", unschedulable=False,
                reason="", message="", restarts=0, created_at=t, updated_at=t, version=1))
            round_id = conn.execute(tables["placement_rounds"].insert().values(
                started_at=t, ended_at=t, trigger="", policy="", solver_status="", input_digest="")
                .returning(tables["placement_rounds"].c.id)).scalar_one()
            for job in ("kept", "gone"):
                conn.execute(tables["placement_decisions"].insert().values(
                    round_id=round_id, job=job, outcome="unplaced", pods=[], score_terms={}))
        migrations.upgrade(db_url, "head")
        with engine.connect() as conn:
            decisions = tables["placement_decisions"]
            stamped = dict(conn.execute(sa_select(decisions.c.job, decisions.c.job_created_at)).all())
        assert stamped == {"kept": t, "gone": None}
        assert _diff(engine) == []
        migrations.downgrade(db_url, "0008")
        assert "job_created_at" not in {c["name"] for c in inspect(engine).get_columns("placement_decisions")}
    finally:
        engine.dispose()


def test_decisions_of_an_earlier_job_of_the_name_are_not_stamped_as_the_current_ones(db_url: str) -> None:
    """A name taken again after its queue was deleted: the decisions of rounds that ended
    before the current job was created are about the earlier job (another tenant's, maybe),
    so 0009 leaves them NULL instead of handing them to the current job's audit."""
    migrations.upgrade(db_url, "0008")
    engine = make_engine(db_url)
    tables = Base.metadata.tables
    earlier, created, later = (datetime(2026, 1, d, tzinfo=UTC) for d in (1, 2, 3))
    try:
        with engine.begin() as conn:
            conn.execute(tables["queues"].insert().values(name="q", guarantee={}, owners=[], created_at=created,
                                                          updated_at=created))
            conn.execute(tables["jobs"].insert().values(
                name="reused", queue="q", tenant="", spec={}, spec_digest="d", state="pending", unschedulable=False,
                reason="", message="", restarts=0, created_at=created, updated_at=created, version=1))
            for at, reason in ((earlier, "about the earlier job"), (later, "about the current job")):
                round_id = conn.execute(tables["placement_rounds"].insert().values(
                    started_at=at, ended_at=at, trigger="", policy="", solver_status="", input_digest="")
                    .returning(tables["placement_rounds"].c.id)).scalar_one()
                conn.execute(tables["placement_decisions"].insert().values(
                    round_id=round_id, job="reused", outcome="unplaced", pods=[], score_terms={}, reason=reason))
        migrations.upgrade(db_url, "head")
        with engine.connect() as conn:
            decisions = tables["placement_decisions"]
            stamped = dict(conn.execute(sa_select(decisions.c.reason, decisions.c.job_created_at)).all())
        assert stamped == {"about the earlier job": None, "about the current job": created}
    finally:
        engine.dispose()


def test_the_names_stored_jobs_wait_for_are_written_out(db_url: str) -> None:
    """0011 writes a ``job_waits`` row for each distinct name in the ``after`` of every job
    already stored, with the job's namespace (left out of the spec when it is ``default``),
    so the TTL sweep keeps what they wait for from the first sweep after the upgrade."""
    migrations.upgrade(db_url, "0010")
    engine = make_engine(db_url)
    tables = Base.metadata.tables
    t = datetime(2026, 1, 1, tzinfo=UTC)
    specs = {"train": {"name": "train", "after": ["prep", "data", "prep"]},
             "eval": {"name": "eval", "namespace": "ml", "after": ["train"]},
             "prep": {"name": "prep"}}
    try:
        with engine.begin() as conn:
            conn.execute(tables["queues"].insert().values(name="q", guarantee={}, owners=[], created_at=t,
                                                          updated_at=t))
            for name, spec in specs.items():
                conn.execute(tables["jobs"].insert().values(
                    name=name, queue="q", tenant="", spec=spec, spec_digest="d", state="pending",
                    unschedulable=False, reason="", message="", restarts=0, created_at=t, updated_at=t, version=1))
        migrations.upgrade(db_url, "0011")
        with engine.connect() as conn:
            waits = tables["job_waits"]
            rows = {tuple(r) for r in conn.execute(sa_select(waits.c.job, waits.c.dependency, waits.c.namespace))}
        assert rows == {("train", "prep", "default"), ("train", "data", "default"), ("eval", "train", "ml")}
        migrations.upgrade(db_url, "head")
        assert _diff(engine) == []
        migrations.downgrade(db_url, "0010")
        assert "job_waits" not in _tables(engine)
    finally:
        engine.dispose()
