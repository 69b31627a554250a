"""``federation bench``: every policy on the same scenario, in one process, side by side.

Same scenario file, same seed, same machine load: the only fair way to compare planners
whose wall times are measured on a shared, noisy machine. The JSON written is exactly the
bench contract ``{"scenario": NAME, "policies": {POLICY: METRICS}}``; the printed output
adds cpsat ÷ baseline ratios.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.status import Status

from federation.domain.errors import InvalidInput
from federation.domain.plans import PlanLimits
from federation.placement.baselines import POLICIES
from federation.sim import placements
from federation.sim.metrics import Metrics, compute
from federation.sim.report import metrics_table, ratio_table
from federation.sim.scenario import load_scenario
from federation.sim.simulator import DEFAULT_ROUND_INTERVAL, SimulatedRound, Start, simulate

DEFAULT_POLICIES = ("cpsat", "volcano-greedy", "karmada-spread", "armada-drf")


def run_bench(
    scenario_path: str | os.PathLike[str],
    policies: Sequence[str] | None = None,
    json_out: str | os.PathLike[str] | None = None,
    console: Console | None = None,
    *,
    limits: PlanLimits | None = None,
    round_interval: float = DEFAULT_ROUND_INTERVAL,
    progress: Callable[[str, SimulatedRound], None] | None = None,
    placements_out: str | os.PathLike[str] | None = None,
) -> dict[str, object]:
    """Simulate ``scenario_path`` under each policy (default: all four) and report.

    Raises ``InvalidInput`` for a bad scenario or an unknown policy (the CLI prints it and
    exits 2). Returns the bench JSON document, also written to ``json_out`` when given.
    """
    chosen = list(policies) if policies else list(DEFAULT_POLICIES)
    for i, name in enumerate(chosen):
        if name not in POLICIES:
            raise InvalidInput(f"policy[{i}]", f"unknown policy {name!r} (one of {', '.join(POLICIES)})")
    scenario = load_scenario(scenario_path)
    results: dict[str, Metrics] = {}
    starts: dict[str, tuple[Start, ...]] = {}
    status = console.status("") if console is not None and progress is None else None
    with status if status is not None else contextlib.nullcontext():
        for name in chosen:
            hook = _bind(progress, name) if progress is not None else _status(status, name, len(scenario.jobs))
            result = simulate(scenario, POLICIES[name], round_interval=round_interval, limits=limits, on_round=hook)
            results[name] = compute(result, with_gap=name == "cpsat")
            starts[name] = result.starts
    document: dict[str, object] = {"scenario": scenario.name, "policies": results}
    if console is not None:
        console.print(metrics_table(scenario.name, results))
        ratios = ratio_table(results)
        if ratios is not None:
            console.print(ratios)
    if placements_out is not None:
        with Path(placements_out).open("w", encoding="utf-8") as out:
            placements.write(out, starts)
        if console is not None:
            for name, run in starts.items():
                bad = placements.disallowed(scenario, run)
                first = f" (first: {bad[0]})" if bad else ""
                grown = [s for s in run if s.growth]
                console.print(f"{name}: {sum(len(s.placement.pods) for s in run)} pods started "
                              f"({sum(len(s.placement.pods) for s in grown)} by {len(grown)} growths), "
                              f"{len(bad)} on a node their task does not allow{first}")
    if json_out is not None:
        Path(json_out).write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return document


def _status(status: Status | None, name: str, jobs: int) -> Callable[[SimulatedRound], None] | None:
    """Live one-line progress on a terminal (rich prints nothing when not a TTY)."""
    if status is None:
        return None
    rounds = [0]

    def hook(record: SimulatedRound) -> None:
        rounds[0] += 1
        status.update(f"{name}: round {rounds[0]}, simulated {record.at:,.0f} s, "
                      f"{record.pending} of {jobs} jobs pending")

    return hook


def _bind(progress: Callable[[str, SimulatedRound], None], name: str) -> Callable[[SimulatedRound], None]:
    def hook(record: SimulatedRound) -> None:
        progress(name, record)

    return hook
