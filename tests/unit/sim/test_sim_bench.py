"""``run_bench`` smoke run on the shared 8-node scenario: every policy, contract-shaped JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from simkit import SHARED

from federation.domain.errors import InvalidInput
from federation.sim.bench import DEFAULT_POLICIES, run_bench
from federation.sim.report import markdown

CONTRACT = ("jobs", "placed", "avgJctSeconds", "makespanSeconds", "gpuUtilization", "lowestTierFraction",
            "meanGangTier", "fairnessMaxDeviation", "roundLatencyP50Ms", "roundLatencyP99Ms", "placementsPerSecond")


def test_run_bench_on_the_seed_scenario_writes_the_contract(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    screen = io.StringIO()
    document = run_bench(SHARED / "seed-8node.yaml", None, out, Console(file=screen, width=200))
    written = json.loads(out.read_text())
    assert written == json.loads(json.dumps(document))
    assert written["scenario"] == "seed-8node"
    assert list(written["policies"]) == list(DEFAULT_POLICIES)
    for policy, metrics in written["policies"].items():
        assert set(CONTRACT) <= set(metrics), policy
        assert metrics["jobs"] == 4 and metrics["placed"] == 4
        assert 0.0 <= metrics["gpuUtilization"] <= 1.0
    assert "objectiveGapToBound" in written["policies"]["cpsat"]
    printed = screen.getvalue()
    assert "cpsat ÷ volcano-greedy" in printed and "armada-drf" in printed


def test_an_unknown_policy_is_refused_before_anything_runs() -> None:
    with pytest.raises(InvalidInput) as caught:
        run_bench(SHARED / "seed-8node.yaml", ["volcano-greedy", "kueue"], None, None)
    assert caught.value.path == "policy[1]"


def test_markdown_tables_mark_which_side_is_better() -> None:
    document = {"scenario": "toy", "policies": {
        "cpsat": {"jobs": 2, "avgJctSeconds": 50.0, "gpuUtilization": 0.5},
        "volcano-greedy": {"jobs": 2, "avgJctSeconds": 100.0, "gpuUtilization": 0.8},
    }}
    text = markdown(document)
    assert "| avgJctSeconds (lower is better) | 0.500 ▲ |" in text
    assert "| gpuUtilization (higher is better) | 0.625 ▼ |" in text
    assert "| jobs | 2 | 2 |" in text
