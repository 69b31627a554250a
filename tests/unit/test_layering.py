"""The layering rules of DESIGN.md and issue 9, checked on the import graph.

The rules are import-linter contracts in ``pyproject.toml`` (``[tool.importlinter]``), the
one place they are written; ``make lint`` runs ``lint-imports`` and this test runs the same
contracts in-process, so the unit suite fails too when a rule breaks. import-linter builds
the graph from every ``import`` and ``from`` statement, relative ones included.

The tests below also make sure the contracts stay complete: every rule the design names
has a contract, the ``domain`` contract forbids every other package of ours (a new
package cannot slip past it), and each kind of contract really catches a broken rule.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = {
    "domain-imports-nothing-of-ours",
    "placement-is-pure",
    "only-agents-k8s-imports-kubernetes",
    "only-store-imports-sqlalchemy",
    "only-cpsat-imports-ortools",
    "service-never-imports-cli",
    "agents-never-import-service",
    "propagation-never-imports-store",
    "only-metrics-imports-prometheus-client",
    "only-cli-parses-arguments",
}


def contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return found


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                           "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_every_design_rule_has_a_contract() -> None:
    assert {str(c["id"]) for c in contracts()} >= REQUIRED


def test_domain_contract_names_every_other_package_of_ours() -> None:
    ours = {f"federation.{p.stem if p.is_file() else p.name}" for p in (ROOT / "federation").iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    domain = next(c for c in contracts() if c["id"] == "domain-imports-nothing-of-ours")
    forbidden = set(domain["forbidden_modules"])  # type: ignore[call-overload]  # a TOML list of str
    assert ours - {"federation.domain"} <= forbidden, ours - {"federation.domain"} - forbidden


def test_layering_contracts_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


PROBES = [
    ("placement-imports-asyncio", "federation/placement/probe.py", "import asyncio\n",
     "placement never imports"),
    ("propagation-imports-store-relatively", "federation/propagation/probe.py",
     "from ..store import errors\n", "propagation is pure"),
    ("service-imports-cli", "federation/service/probe.py", "from federation.cli import errors\n",
     "service never imports cli"),
    ("agents-core-imports-kubernetes", "agents/core/probe.py", "import kubernetes_asyncio\n",
     "only agents.k8s imports kubernetes_asyncio"),
    ("domain-imports-store-relatively", "federation/domain/probe.py", "from .. import store\n",
     "domain imports nothing of ours"),
]


def test_each_kind_of_broken_rule_is_caught(tmp_path: Path) -> None:
    """One copy of the sources with every probe added (one graph build, not one per probe)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    for package in ("federation", "agents"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "v1"))
    (copy / "federation" / "v1").mkdir()
    (copy / "federation" / "v1" / "__init__.py").write_text("")
    for _, path, source, _ in PROBES:
        (copy / path).write_text(source)
    result = lint_imports(copy)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    for probe, _, _, contract in PROBES:
        assert any(line.startswith(contract) for line in broken), f"{probe} not caught:\n{result.stdout}"
