"""Peer schedulers modelled as planners, so ``federation bench`` compares like with like.

Each baseline has the planner signature ``(snapshot, limits, previous) -> Plan``, plans
every pending job greedily in the peer's own order and explains each unplaced job. They
are models of published algorithms (each module cites its sources), not ports.

``POLICIES`` maps the bench policy names to planners; ``cpsat`` is our planner,
imported on first use so that importing the baselines never loads OR-Tools. Every
baseline's plan is followed by the same growth step as ours (``placement.growth.grow``:
running elastic jobs take room the plan leaves in their own domain), so the bench
compares placement decisions, not growth policies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType

from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement.baselines import armada_drf, karmada_spread, volcano_greedy
from federation.placement.growth import grow

Planner = Callable[[FederationSnapshot, PlanLimits, Plan | None], Plan]


def cpsat(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None) -> Plan:
    """Our CP-SAT planner (``federation.placement.plan``), imported lazily."""
    planner = getattr(importlib.import_module("federation.placement"), "plan", None)
    if planner is None:
        raise RuntimeError("federation.placement.plan is not available (the CP-SAT planner is not installed)")
    result: Plan = planner(snapshot, limits, previous)
    return result


def _volcano(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None) -> Plan:
    return grow(snapshot, volcano_greedy.plan(snapshot, limits, previous))


def _karmada(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None) -> Plan:
    return grow(snapshot, karmada_spread.plan(snapshot, limits, previous))


def _armada(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None) -> Plan:
    return grow(snapshot, armada_drf.plan(snapshot, limits, previous))


POLICIES: Mapping[str, Planner] = MappingProxyType({
    "cpsat": cpsat,
    "volcano-greedy": _volcano,
    "karmada-spread": _karmada,
    "armada-drf": _armada,
})

BASELINES = ("volcano-greedy", "karmada-spread", "armada-drf")

__all__ = ["BASELINES", "POLICIES", "Planner", "cpsat"]
