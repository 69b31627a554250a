"""The layering rules of DESIGN.md, checked on the import statements of every module.

- ``domain`` imports nothing of ours;
- ``placement`` never imports grpc, sqlalchemy or asyncio;
- only ``agents/k8s`` imports kubernetes_asyncio;
- only ``store`` (and the Alembic environment) imports sqlalchemy/alembic;
- only ``placement/cpsat`` imports ortools;
- only ``federation/metrics`` and ``agents/metrics.py`` import prometheus_client.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for pkg in ("federation", "agents") for p in (ROOT / pkg).rglob("*.py") if "/v1/" not in str(p))


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def top(name: str) -> str:
    return name.split(".")[0]


RULES = [
    ("domain-imports-nothing-of-ours", lambda p: rel(p).startswith("federation/domain/"),
     lambda m: m.startswith(("federation", "agents")) and not m.startswith("federation.domain")),
    ("placement-is-pure", lambda p: rel(p).startswith("federation/placement/"),
     lambda m: top(m) in {"grpc", "sqlalchemy", "asyncio", "alembic"}),
    ("only-agents-k8s-imports-kubernetes", lambda p: not rel(p).startswith("agents/k8s/"),
     lambda m: top(m) == "kubernetes_asyncio"),
    ("only-store-imports-sqlalchemy", lambda p: not rel(p).startswith("federation/store/"),
     lambda m: top(m) in {"sqlalchemy", "alembic"}),
    ("only-cpsat-imports-ortools", lambda p: not rel(p).startswith("federation/placement/cpsat/"),
     lambda m: top(m) == "ortools"),
    ("only-metrics-imports-prometheus-client",
     lambda p: not rel(p).startswith("federation/metrics/") and rel(p) != "agents/metrics.py",
     lambda m: top(m) == "prometheus_client"),
]


@pytest.mark.parametrize("rule", RULES, ids=[r[0] for r in RULES])
def test_layering_rule_holds(rule: tuple[str, object, object]) -> None:
    name, applies, forbidden = rule
    offenders = [
        f"{rel(path)} imports {mod}"
        for path in SOURCES
        if applies(path)  # type: ignore[operator]
        for mod in sorted(imported_modules(path))
        if forbidden(mod)  # type: ignore[operator]
    ]
    assert not offenders, f"{name} broken:\n" + "\n".join(offenders)


def test_sources_were_found() -> None:
    assert any(rel(p).startswith("federation/domain/") for p in SOURCES)
