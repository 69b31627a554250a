"""Rich tables for bench results: metrics side by side, and cpsat ÷ each baseline.

Ratios are only meaningful from one run (same scenario, seed and machine load), which is
why ``federation bench`` prints them itself instead of leaving readers to divide numbers
from different runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table

from federation.sim.metrics import Metrics

#: Metric -> True when higher is better (False: lower is better). Order = table order.
DIRECTION: Mapping[str, bool] = {
    "avgJctSeconds": False,
    "avgWaitSeconds": False,
    "largestGangWaitMaxSeconds": False,
    "largestGangWaitP95Seconds": False,
    "makespanSeconds": False,
    "gpuUtilization": True,
    "gpuGoodput": True,
    "lowestTierFraction": True,
    "meanGangTier": False,
    "fairnessMaxDeviation": False,
    "roundLatencyP50Ms": False,
    "roundLatencyP99Ms": False,
    "placementsPerSecond": True,
}
_ORDER = (
    "jobs", "placed", "finished", "unschedulable", *DIRECTION, "objectiveGapToBound", "rounds", "placements",
    "preemptions", "preemptedGpuHours", "faultRequeues", "faultLostGpuHours", "rejectedPlacements", "churnStops",
    "plannerSeconds",
)


def fmt(value: float | int | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def metrics_table(scenario: str, results: Mapping[str, Metrics]) -> Table:
    table = Table(title=f"federation bench — {scenario}")
    table.add_column("metric")
    for policy in results:
        table.add_column(policy, justify="right")
    keys = [k for k in _ORDER if any(k in m for m in results.values())]
    for key in keys:
        table.add_row(key, *(fmt(m.get(key)) for m in results.values()))
    return table


def ratio(ours: float | int | None, theirs: float | int | None) -> float | None:
    """ours / theirs, or None when either is missing or the baseline is 0."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return float(ours) / float(theirs)


def ratios(results: Mapping[str, Metrics], ours: str = "cpsat") -> dict[str, dict[str, float | None]]:
    """For each other policy: metric -> ours ÷ theirs (same run)."""
    if ours not in results:
        return {}
    mine = results[ours]
    return {
        policy: {key: ratio(mine.get(key), other.get(key)) for key in DIRECTION}
        for policy, other in results.items()
        if policy != ours
    }


def ratio_table(results: Mapping[str, Metrics], ours: str = "cpsat") -> Table | None:
    """cpsat ÷ baseline per metric, marked better/worse by the metric's direction."""
    table_data = ratios(results, ours)
    if not table_data:
        return None
    table = Table(title=f"{ours} ÷ baseline (same run; ▲ = {ours} better, ▼ = worse)")
    table.add_column("metric")
    for policy in table_data:
        table.add_column(f"{ours} ÷ {policy}", justify="right")
    for key, higher_better in DIRECTION.items():
        cells = []
        for values in table_data.values():
            value = values[key]
            if value is None:
                cells.append("—")
                continue
            mark = ""
            if abs(value - 1.0) > 1e-3:
                better = value > 1.0 if higher_better else value < 1.0
                mark = " ▲" if better else " ▼"
            cells.append(f"{value:.3f}{mark}")
        table.add_row(key, *cells)
    return table


def markdown(document: Mapping[str, object], ours: str = "cpsat") -> str:
    """A bench JSON document as two Markdown tables (metrics; ours ÷ each baseline)."""
    policies = document.get("policies")
    assert isinstance(policies, Mapping)
    results: dict[str, Metrics] = {str(k): dict(v) for k, v in policies.items()}
    names = list(results)
    keys = [k for k in _ORDER if any(k in m for m in results.values())]
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    lines += [f"| {k} | " + " | ".join(fmt(results[n].get(k)) for n in names) + " |" for k in keys]
    table_data = ratios(results, ours)
    if table_data:
        others = list(table_data)
        lines += ["", f"| {ours} ÷ baseline | " + " | ".join(others) + " |", "|---|" + "---:|" * len(others)]
        for key, higher_better in DIRECTION.items():
            cells = []
            for other in others:
                value = table_data[other][key]
                if value is None:
                    cells.append("—")
                    continue
                better = value > 1.0 if higher_better else value < 1.0
                mark = "" if abs(value - 1.0) <= 1e-3 else (" ▲" if better else " ▼")
                cells.append(f"{value:.3f}{mark}")
            lines.append(f"| {key} ({'higher' if higher_better else 'lower'} is better) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
