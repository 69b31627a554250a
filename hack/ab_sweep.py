"""A/B sweeps of the planner over the bench scenarios (the tool behind issue 12's tables).

    python hack/ab_sweep.py run TAG [--policy P ...] [--scenario NAME ...] [--seed N]
                                    [--set NAME=VALUE ...] [--bench=ARG ...] [--greedy-only]
    python hack/ab_sweep.py compare BASE TAG [TAG ...]

``run`` runs ``federation bench`` once per scenario (default: the nine smaller ones, cpsat
only) and writes ``out/ab/TAG/<scenario>.json``. Run it once with ``--policy`` for all four
policies to get a same-code baseline (``run base --policy cpsat --policy volcano-greedy
--policy karmada-spread --policy armada-drf``); the three baselines have no time budget, so
their figures do not depend on load.

* ``--set NAME=VALUE`` rebinds a module constant (``FAIR_BONUS=64``, ``JOB_START=256``) in
  every ``federation.placement`` module that holds that name, so modules that imported it
  by name see it too. It is for experiments only: the shipped figures use no ``--set``.
* ``--bench=ARG`` passes one more argument to ``federation bench``, e.g. a policy flag
  (``--bench=--reserve-after=1800``): opt-in policies are measured as users would run them.
* ``--greedy-only`` ships cpsat's greedy plan every round instead of the model's (the
  planner's own greedy pass, as the hint and fallback use it).
* ``--seed N`` runs a copy of each scenario with its generator seed replaced, to see how
  much one run says (the generated scenarios' spread).

``compare`` prints, per scenario, cpsat's avg JCT over the best baseline's in BASE, then
cpsat's lowestTierFraction and fairness deviation, one column per TAG.

The output folder is ``out/ab`` under the current directory (``AB_OUT`` overrides it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("volcano-1cluster", "seed-8node", "fleet-4clusters", "fair-saturated", "fragmented",
             "mixed-gpu-models", "demo", "elastic-gangs", "hierarchical-queues")
BASELINES = ("volcano-greedy", "karmada-spread", "armada-drf")


def out_dir() -> Path:
    return Path(os.environ.get("AB_OUT", "out/ab"))


def scenario_file(name: str) -> Path:
    """The project's own scenarios, else ``../shared/scenarios`` (its copy under tests/fixtures)."""
    for folder in (ROOT / "federation" / "sim" / "scenarios", ROOT.parent / "shared" / "scenarios",
                   ROOT / "tests" / "fixtures" / "scenarios" / "shared"):
        if (folder / f"{name}.yaml").exists():
            return folder / f"{name}.yaml"
    raise SystemExit(f"scenario {name} not found")


def reseeded(path: Path, seed: int, folder: Path) -> Path:
    text, count = re.subn(r"(?m)^seed: *\d+", f"seed: {seed}", path.read_text())
    if count != 1:
        raise SystemExit(f"{path}: no top-level 'seed:' line to replace")
    target = folder / f"{path.stem}-seed{seed}.yaml"
    target.write_text(text)
    return target


def patch(settings: list[str], greedy_only: bool) -> None:
    from gang_outcomes import greedy_alone

    import federation.placement.planner as planner

    for item in settings:
        name, _, value = item.partition("=")
        hits = [m for key, m in list(sys.modules.items())
                if key.startswith("federation.placement") and m is not None and hasattr(m, name)]
        if not hits:
            raise SystemExit(f"--set {name}: no federation.placement module has this name")
        for module in hits:
            setattr(module, name, type(getattr(module, name))(value))
    if greedy_only:
        setattr(planner, "plan_cpsat", greedy_alone)  # noqa: B010  (a monkeypatch, on purpose)


def run(args: argparse.Namespace) -> int:
    from federation.cli.main import main as federation

    patch(args.set, args.greedy_only)
    folder = out_dir() / args.tag
    folder.mkdir(parents=True, exist_ok=True)
    policies = [a for p in (args.policy or ["cpsat"]) for a in ("--policy", p)]
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.scenario or SCENARIOS:
            path = scenario_file(name)
            if args.seed is not None:
                path = reseeded(path, args.seed, Path(scratch))
            code = federation(["bench", "--scenario", str(path), "--json", str(folder / f"{name}.json"), *policies,
                               *args.bench])
            if code:
                return code
    return 0


def _load(tag: str, name: str) -> dict[str, Any] | None:
    path = out_dir() / tag / f"{name}.json"
    return json.loads(path.read_text())["policies"] if path.exists() else None


def compare(args: argparse.Namespace) -> int:
    print("scenario".ljust(20), "best baseline JCT".ljust(18), *(t[:24].ljust(26) for t in args.tags))
    for name in SCENARIOS:
        base = _load(args.base, name)
        if base is None or not all(b in base for b in BASELINES):
            continue
        best = min(base[b]["avgJctSeconds"] for b in BASELINES)
        row = [name.ljust(20), f"{best:,.0f} s".ljust(18)]
        for tag in args.tags:
            got = _load(tag, name)
            c = got.get("cpsat") if got else None
            row.append("-".ljust(26) if c is None else
                       f"{c['avgJctSeconds'] / best:.3f} {c['lowestTierFraction'] or 0:.3f} "
                       f"{c['fairnessMaxDeviation']:.3f}".ljust(26))
        print(*row)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("tag")
    r.add_argument("--policy", action="append")
    r.add_argument("--scenario", action="append", choices=SCENARIOS)
    r.add_argument("--seed", type=int)
    r.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    r.add_argument("--bench", action="append", default=[], metavar="ARG",
                   help="an extra argument for federation bench, e.g. --bench=--reserve-after=1800")
    r.add_argument("--greedy-only", action="store_true")
    r.set_defaults(func=run)
    c = sub.add_parser("compare")
    c.add_argument("base")
    c.add_argument("tags", nargs="+")
    c.set_defaults(func=compare)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
