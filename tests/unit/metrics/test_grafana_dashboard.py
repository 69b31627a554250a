"""The shipped Grafana dashboard charts only series we export, and charts all of ours.

A dashboard whose query names a metric that does not exist shows "No data" forever and
nobody notices; this test reads every ``expr`` of deploy/grafana/federation-dashboard.json
and checks each ``federation_*`` name against the sample names of a real exposition
(``exported``). The PromQL itself is parsed by promtool in the integration suite
(tests/integration/test_metrics_rules.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from exported import exported_names

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "federation-dashboard.json"
NAME = re.compile(r"\bfederation_[a-z0-9_]+")


def dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p["targets"]]


def test_every_dashboard_query_names_an_exported_series() -> None:
    exported = exported_names()
    unknown = {name for expr in dashboard_exprs() for name in NAME.findall(expr)} - exported
    assert not unknown, f"dashboard queries name series nobody exports: {sorted(unknown)}"


def test_every_exported_federation_family_is_on_the_dashboard() -> None:
    charted = {name for expr in dashboard_exprs() for name in NAME.findall(expr)}
    families = {re.sub(r"_(bucket|sum|count|total|created)$", "", n) for n in exported_names()
                if n.startswith("federation_")}
    missing = {f for f in families if not any(c.startswith(f) for c in charted)}
    assert not missing, f"exported but not charted: {sorted(missing)}"


def test_panels_have_unique_ids_and_use_the_datasource_variable() -> None:
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"]["uid"] == "${datasource}" for p in board["panels"])
