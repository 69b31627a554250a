"""``plan()``: the round entry point (CP-SAT over a greedy hint; see ``placement.cpsat``)."""

from __future__ import annotations

from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement.greedy import greedy_plan

DEFAULT_LIMITS = PlanLimits()


def plan(snapshot: FederationSnapshot, limits: PlanLimits = DEFAULT_LIMITS, previous: Plan | None = None) -> Plan:
    """Plan one round. Interim: the greedy planner (the CP-SAT layer lands on top of it)."""
    del previous
    return greedy_plan(snapshot, limits)
