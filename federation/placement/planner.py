"""``plan()``: the round entry point — greedy first, CP-SAT on top, never worse.

The greedy plan is always computed first: it is the CP-SAT hint, the fallback when the
model cannot finish in time, and the yardstick the CP-SAT plan must beat by
``score_vector`` to be returned.
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
    greedy = greedy_plan(snapshot, limits)
    return plan_cpsat(snapshot, limits, previous, greedy)
