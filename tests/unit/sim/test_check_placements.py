"""``hack/check_placements.py``: a bench placements file checked line by line against its
scenario — passes a clean run of every policy, and names a pod moved off its allowed nodes."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from simkit import document, job
from test_sim_constraints import H100, models, pinned

from federation.sim.bench import run_bench
from tests.fixtures.hack import load_hack_script


def checker() -> ModuleType:
    return load_hack_script("check_placements")


def test_a_clean_run_passes_and_a_moved_pod_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(document(clusters=[models()], jobs=[
        pinned("pinned", nodeSelector=H100), job("elastic", pods=2, at=5.0, minAvailable=1)])))
    out = tmp_path / "p.jsonl"
    run_bench(scenario, placements_out=out)
    check = checker()
    assert check.main(str(scenario), str(out)) == 0
    assert "cpsat:" in capsys.readouterr().out
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    moved = next(d for d in lines if d["job"] == "pinned")
    moved["pods"][0]["node"] = "n2"  # an A100 node: its nodeSelector excludes it
    out.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    assert check.main(str(scenario), str(out)) == 1
    assert "excluded by the task's node constraints" in capsys.readouterr().out
