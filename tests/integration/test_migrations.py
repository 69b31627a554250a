"""Alembic migrations: up, down and up again on both dialects; the ORM matches the result."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from federation.store import migrate as migrations
from federation.store.engine import make_engine
from federation.store.models import Base

TABLES = {"queues", "jobs", "job_events", "clusters", "works", "placement_rounds", "placement_decisions",
          "audit_pruning", "propagation_policies", "policy_claims", "priority_classes", "leases"}


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
    assert migrations.head() == "0005"


def test_upgrade_accepts_an_engine(db_url: str) -> None:
    engine = make_engine(db_url, foreign_keys=False)
    try:
        migrations.upgrade(engine)
        assert migrations.is_at_head(engine)
    finally:
        engine.dispose()
