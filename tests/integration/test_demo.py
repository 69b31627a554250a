"""``federation demo`` end to end on a short scenario: the wiring, not the timing.

The demo runs in-process exactly as the command does (``demo_main``): the central
service on a loopback port over a fresh SQLite file, one real agent per cluster over an
in-memory cluster, submissions through the client library, a node failure, a cluster
outage and its return, plain output, the report and the picture.
"""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from federation.cli.main import main
from federation.demo.main import DemoOptions, demo_main
from federation.demo.report import SECTIONS
from federation.sim.scenario import builtin_scenario_path, load_scenario

SHORT = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / "demo-short.yaml"
SVG = "{http://www.w3.org/2000/svg}"


def _args(out: Path, speed: float = 100.0, max_wall_seconds: float = 90.0) -> DemoOptions:
    return DemoOptions(scenario=str(SHORT), speed=speed, db=None, out=str(out), plain=True, hold=False,
                       max_wall_seconds=max_wall_seconds, agent_grace_seconds=2.0)


def test_short_demo_runs_to_the_end_and_writes_report_picture_and_audit(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert demo_main(_args(out)) == 0
    printed = capsys.readouterr().out
    assert "central service on 127.0.0.1:" in printed
    assert "FAULT" in printed and "clusterDown" in printed and "nodeFail" in printed

    report = (out / "report.md").read_text()
    for section in SECTIONS:
        assert section in report, section
    assert "4 jobs from 2 tenants on 2 clusters" in report
    assert "Workload finished" in report
    assert "fedctl --server" in report and "audit" in report

    root = ET.parse(out / "topology.svg").getroot()
    assert root.tag == f"{SVG}svg"
    clusters = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"]
    assert sorted(g.get("data-name") or "" for g in clusters) == ["alpha", "beta"]
    hypernodes = {g.get("data-name") for g in root.iter(f"{SVG}g") if g.get("class") == "hypernode"}
    assert {"al-leaf0", "al-leaf1", "al-spine"} <= hypernodes
    assert any(g.get("class") == "gang" for g in root.iter(f"{SVG}g"))

    with sqlite3.connect(out / "audit.db") as db:
        rounds = db.execute("select count(*) from placement_rounds").fetchone()[0]
        placed = db.execute("select count(*) from placement_decisions where outcome = 'placed'").fetchone()[0]
        states = dict(db.execute("select name, state from jobs").fetchall())
    assert rounds > 0 and placed >= 4
    assert states == {"gang-a": "succeeded", "gang-b": "succeeded", "single-a": "succeeded", "late-b": "succeeded"}
    assert (out / "tokens.yaml").is_file() and (out / "demo.log").is_file()


def test_demo_gives_up_at_the_wall_time_cap_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "capped"
    assert demo_main(_args(out, speed=1.0, max_wall_seconds=3.0)) == 1
    printed = capsys.readouterr().out
    assert "stopped after 3 s of wall time" in printed
    assert "STOPPED AT THE WALL-TIME CAP" in (out / "report.md").read_text()


def test_cli_refuses_a_bad_scenario_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nclusters: []\n")
    assert main(["demo", "--scenario", str(bad), "--out", str(tmp_path / "o"), "--plain"]) == 2


def test_the_packaged_demo_scenario_loads() -> None:
    scenario = load_scenario(builtin_scenario_path("demo"))
    assert len(scenario.clusters) == 4 and len(scenario.queues) == 3
    assert {e.kind for e in scenario.events} >= {"nodeFail", "clusterDown", "clusterUp", "podFail"}
