"""The shipped alert rules and dashboard queries are valid PromQL, and the alerts fire
when they should: ``promtool check rules`` on deploy/prometheus/federation-alerts.yaml
and on the dashboard's every ``expr`` (as recording rules), ``promtool test rules`` on
tests/integration/federation-alerts.test.yaml. The series names themselves are checked
against a real exposition by tests/unit/metrics/test_grafana_dashboard.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml
from promkit import binary

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "federation-alerts.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "federation-dashboard.json"
CASES = Path(__file__).with_name("federation-alerts.test.yaml")


def _promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("promtool"), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_alert_rules_parse() -> None:
    checked = _promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_alerts_fire_on_the_series_they_watch_and_stay_quiet_otherwise(tmp_path: Path) -> None:
    shutil.copy(RULES, tmp_path / RULES.name)
    shutil.copy(CASES, tmp_path / CASES.name)
    tested = _promtool("test", "rules", CASES.name, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    board = json.loads(DASHBOARD.read_text())
    # Grafana variables are not PromQL: substitute what Grafana would ("All" = .*).
    exprs = [re.sub(r"\$queue\b", ".*", t["expr"]) for p in board["panels"] for t in p["targets"]]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    checked = _promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(exprs)} rules found" in checked.stdout
