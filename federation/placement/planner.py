"""``plan()``: the round entry point — CP-SAT over the greedy plan, never worse.

The greedy planner always runs first inside ``plan_cpsat`` (for the whole round when it is
small, band by band when it is large): it is the CP-SAT hint, the fallback when the model
cannot finish in time, and the yardstick the CP-SAT decisions must beat to be kept.
"""

from __future__ import annotations

from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement.cpsat import plan_cpsat
from federation.placement.greedy import greedy_plan

DEFAULT_LIMITS = PlanLimits()


def plan(snapshot: FederationSnapshot, limits: PlanLimits = DEFAULT_LIMITS, previous: Plan | None = None) -> Plan:
    """Plan one round: placements, reasons for the rest, preemptions (see ``placement.cpsat``).

    ``previous`` (the last round's plan) keeps its domains among the candidates so stable
    decisions stay cheap to repeat (warm start).
    """
    if not snapshot.pending:
        return greedy_plan(snapshot, limits)
    return plan_cpsat(snapshot, limits, previous)
