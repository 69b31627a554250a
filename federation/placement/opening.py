"""Opening a planning round: the setup every planner shares, written once."""

from __future__ import annotations

import time
from collections.abc import Callable

from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement.admission import hold_room
from federation.placement.rounds import PlanningRound
from federation.placement.tier_reserve import reserve_tiers
from federation.placement.wide_order import order_wide_gangs


def open_round(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None = None, *,
               deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> PlanningRound:
    """The one way a planner (greedy, CP-SAT, the reference) starts a round, so the setup
    is written once: the policy of ``limits`` (preemption grace, topology wait), last
    round's victims kept off the room planned for their preemptors (``previous``; none
    for a planner without a previous plan), then the room held for a starved queue or a
    waiting gang (``admission.hold_room``), then the room reserved at their lowest tier for
    gangs that waited past ``limits.tier_reserve_after_seconds`` (``tier_reserve``), then
    the room older wide gangs can use kept from newer ones (``wide_order``)."""
    rnd = PlanningRound(snapshot, deadline=deadline, grace=limits.preemption_grace_seconds,
                topology_wait=limits.topology_wait_seconds, clock=clock)
    rnd.bar_returning_victims(previous)
    hold_room(rnd, limits)
    reserve_tiers(rnd, limits.tier_reserve_after_seconds)
    order_wide_gangs(rnd, limits.wide_order_after_seconds)
    return rnd
