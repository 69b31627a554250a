"""Same-process A/B of the planner against an older commit, and a check that plans are identical.

    python hack/replan_speed.py identity REF   # plans, reasons, score terms and vectors equal?
    python hack/replan_speed.py ab REF [--pending 10000] [--seeds 7,8,9] [--reps 3]

REF's ``federation`` and ``tests/fixtures`` are extracted with ``git archive`` into a
temporary directory and imported as ``fedold`` / ``oldtests`` (import lines rewritten), so
the old and the working-tree planner run in ONE process, alternating on fresh snapshots of
the same seed. On a shared 2-core host the load moves by the second; ratios of
back-to-back pairs in one process are what survives it (docs/benchmarks.md, issue 12,
"Sixth session ... `speed`").

``identity`` compares ``greedy_plan`` on 10,000-job seeds 7-9 and 2,000-gang seeds 0-11,
and ``plan()`` on the 10,000-job seeds (which ship the greedy plan; the 2,000-gang
``plan()`` depends on CP-SAT's time-limited portfolio and is not deterministic).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMPORT = re.compile(r"^(\s*)(from|import) federation(\.|\s)", re.MULTILINE)
FIXTURES = re.compile(r"^(\s*)from tests\.fixtures", re.MULTILINE)


def materialise(ref: str) -> Path:
    """REF's planner as packages ``fedold`` and ``oldtests`` under a temporary directory."""
    out = Path(tempfile.mkdtemp(prefix="replan-speed-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "federation", "tests/fixtures"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    (out / "federation").rename(out / "fedold")
    (out / "tests").rename(out / "oldtests")
    (out / "oldtests" / "__init__.py").touch()
    for path in out.rglob("*.py"):
        text = path.read_text()
        new = FIXTURES.sub(r"\1from oldtests.fixtures", IMPORT.sub(r"\1\2 fedold\3", text))
        if new != text:
            path.write_text(new)
    return out


def sides(ref: str) -> dict[str, tuple[ModuleType, ModuleType, Any]]:
    """name -> (placement package, domain package, synthetic fixture) for REF and the working tree."""
    sys.path.insert(0, str(materialise(ref)))
    sys.path.insert(0, str(ROOT))
    out = {}
    for name, pkg, fixtures in (("old", "fedold", "oldtests"), ("new", "federation", "tests")):
        out[name] = (importlib.import_module(f"{pkg}.placement"), importlib.import_module(f"{pkg}.domain"),
                     importlib.import_module(f"{fixtures}.fixtures.instances").synthetic)
    return out


def canon(p: Any) -> tuple[Any, ...]:
    """A plan as plain tuples: placements (sorted, with pods), reasons, preemptions, status, objective, terms."""
    placements = tuple(sorted((pl.job, pl.cluster, pl.hypernode, pl.tier,
                               tuple((a.task, a.index, a.node) for a in pl.pods)) for pl in p.placements))
    unplaced = tuple((u.job, u.reason, u.constraint, u.closest_cluster, u.unschedulable) for u in p.unplaced)
    terms = tuple(sorted((k, tuple(sorted(v.items()))) for k, v in (p.score_terms or {}).items()))
    preempted = tuple((v.job, v.reason, v.preemptor) for v in p.preemptions)
    return placements, unplaced, preempted, p.status, p.objective, terms


def identity(ref: str) -> int:
    both = sides(ref)
    cases = [("greedy_plan", s, 10_000, 1.5) for s in (7, 8, 9)] + [("plan", s, 10_000, 1.5) for s in (7, 8, 9)]
    cases += [("greedy_plan", s, 2_000, 1.0) for s in range(12)]
    bad = 0
    for fn, seed, pending, budget in cases:
        got = []
        for placement, domain, synthetic in both.values():
            snap = synthetic(seed=seed, clusters=100, nodes=100, pending=pending)
            p = getattr(placement, fn)(snap, domain.PlanLimits(time_limit_seconds=budget, workers=2))
            keep = canon(p) if fn == "greedy_plan" else canon(p)[:4]
            got.append((keep, placement.score_vector(snap, p)))
        same = got[0] == got[1]
        bad += not same
        print(f"{fn} seed {seed} pending {pending}: {'identical' if same else 'DIFFERENT'} "
              f"({len(got[1][0][0])} placed, vector equal: {got[0][1] == got[1][1]})")
    return 1 if bad else 0


def ab(ref: str, pending: int, seeds: list[int], reps: int) -> int:
    both = sides(ref)
    budget = 1.5 if pending >= 10_000 else 1.0
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = []
    for rep in range(reps):
        for seed in seeds:
            loads.append(os.getloadavg()[0])
            for fn in ("greedy_plan", "plan"):
                order = ("old", "new") if (rep + seed) % 2 == 0 else ("new", "old")
                for name in order:
                    placement, domain, synthetic = both[name]
                    snap = synthetic(seed=seed, clusters=100, nodes=100, pending=pending)
                    gc.collect()
                    gc.disable()
                    wall, cpu = time.perf_counter(), time.process_time()
                    getattr(placement, fn)(snap, domain.PlanLimits(time_limit_seconds=budget, workers=2))
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    gc.enable()
                    times.setdefault((name, fn), []).append((1000 * wall, 1000 * cpu))
    for fn in ("greedy_plan", "plan"):
        old, new = times[("old", fn)], times[("new", fn)]
        walls = [n[0] / o[0] for o, n in zip(old, new, strict=True)]
        cpus = [n[1] / o[1] for o, n in zip(old, new, strict=True)]
        med = {k: statistics.median(row[i] for row in rows) for k, (rows, i) in {
            "old wall": (old, 0), "new wall": (new, 0), "old CPU": (old, 1), "new CPU": (new, 1)}.items()}
        print(f"{fn}: medians " + ", ".join(f"{k} {v:.0f} ms" for k, v in med.items())
              + f"; paired new/old median: wall {statistics.median(walls):.3f}, CPU {statistics.median(cpus):.3f}"
              f" ({len(walls)} pairs)")
    print("load average (1 min) at each seed:", [round(x, 2) for x in loads])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("identity").add_argument("ref")
    timing = sub.add_parser("ab")
    timing.add_argument("ref")
    timing.add_argument("--pending", type=int, default=10_000)
    timing.add_argument("--seeds", default="7,8,9")
    timing.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if args.command == "identity":
        return identity(args.ref)
    return ab(args.ref, args.pending, [int(s) for s in args.seeds.split(",")], args.reps)


if __name__ == "__main__":
    sys.exit(main())
