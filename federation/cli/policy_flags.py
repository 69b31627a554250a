"""Command-line flags for the planning policy, shared by ``serve``, ``demo`` and ``bench``.

The defaults are ``PlanLimits``'s, so the service, the demo and the benchmark run the
same shipped policy unless told otherwise (docs/design/preemption-and-topology-wait.md).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from federation.domain.plans import PlanLimits

NEVER = "never"


def _grace(text: str) -> float | None:
    """Seconds >= 0, or None for 'never'."""
    if text.strip().lower() == NEVER:
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or '{NEVER}', got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or '{NEVER}', got {text!r}")
    return value


def _seconds(text: str) -> float:
    value = _grace(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def _factor(text: str) -> float | None:
    """A factor between 1 and 10, or None for 'never'."""
    value = _grace(text)
    if value is not None and not 1.0 <= value <= 10.0:
        raise argparse.ArgumentTypeError(f"expected a factor between 1 and 10 or '{NEVER}', got {text!r}")
    return value


def add_policy_flags(parser: argparse.ArgumentParser) -> None:
    defaults = PlanLimits()
    shown = NEVER if defaults.preemption_grace_seconds is None else f"{defaults.preemption_grace_seconds:g}"
    parser.add_argument(
        "--preemption-grace", type=_grace, default=defaults.preemption_grace_seconds, metavar="SECONDS|never",
        help=f"a pending gang may preempt (same queue) or reclaim (other queues) once it has waited this long; "
             f"'{NEVER}' disables eviction (default: {shown})")
    parser.add_argument(
        "--topology-wait", type=_seconds, default=defaults.topology_wait_seconds, metavar="SECONDS",
        help=f"opt-in service default: a multi-pod gang WITH a networkTopology and no wait of its own (annotation "
             f"federation.io/topology-wait, queue default) holds out this long for a domain of the lowest tier "
             f"that could hold it before the wider domains its constraint allows are offered; 0 = Volcano "
             f"semantics, never held back (default: {defaults.topology_wait_seconds:g})")
    kept = NEVER if defaults.reserve_after_seconds is None else f"{defaults.reserve_after_seconds:g}"
    parser.add_argument(
        "--reserve-after", type=_grace, default=defaults.reserve_after_seconds, metavar="SECONDS|never",
        help=f"a job of a queue well below its fair share that has waited this long and cannot be placed gets "
             f"the fewest nodes that could hold it kept for it (jobs of its band and below from queues not short "
             f"of their own share may not start there) (default: {kept})")

    held = NEVER if defaults.gang_hold_after_seconds is None else f"{defaults.gang_hold_after_seconds:g}"
    parser.add_argument(
        "--hold-gangs-after", type=_grace, default=defaults.gang_hold_after_seconds, metavar="SECONDS|never",
        help=f"a gang of several pods that has waited this long and cannot be placed gets the nodes it needs "
             f"held in a domain of its lowest feasible tier (smaller jobs of its band and below may not start "
             f"there) (default: {held})")

    tiered = NEVER if defaults.tier_reserve_after_seconds is None else f"{defaults.tier_reserve_after_seconds:g}"
    parser.add_argument(
        "--reserve-tier-after", type=_grace, default=defaults.tier_reserve_after_seconds, metavar="SECONDS|never",
        help=f"a gang that one leaf (tier-1 domain) could hold and that has waited this long is placed only in a "
             f"domain of its lowest feasible tier; when none has room, the nodes it needs are held in the one "
             f"closest to holding it (smaller jobs of its band and below may not start there); applied only while "
             f"pending GPUs are at most 1.5x the fleet's; a gang with a topology wait set is governed by it "
             f"(default: {tiered})")

    ordered = NEVER if defaults.wide_order_after_seconds is None else f"{defaults.wide_order_after_seconds:g}"
    parser.add_argument(
        "--order-wide-gangs-after", type=_grace, default=defaults.wide_order_after_seconds, metavar="SECONDS|never",
        help=f"wide gangs (no leaf can hold them) that have waited this long take room oldest first: a newer one "
             f"of the same or a lower priority may not take the nodes an older one can use this round; smaller "
             f"jobs are not held back; '{NEVER}' leaves the order to the objective (default: {ordered})")

    gate = NEVER if defaults.enqueue_overcommit is None else f"{defaults.enqueue_overcommit:g}"
    parser.add_argument(
        "--enqueue-overcommit", type=_factor, default=defaults.enqueue_overcommit, metavar="FACTOR|never",
        help=f"Volcano-style enqueue gate: pending jobs are planned oldest first (by priority) while their "
             f"requests fit FACTOR x capacity - used; the rest wait for a later round (default: {gate})")


def policy_limits(args: argparse.Namespace, base: PlanLimits | None = None) -> PlanLimits:
    """``base`` (default ``PlanLimits()``) with the policy flags of ``args`` applied."""
    limits = base or PlanLimits()
    return replace(limits,
                   preemption_grace_seconds=getattr(args, "preemption_grace", limits.preemption_grace_seconds),
                   topology_wait_seconds=getattr(args, "topology_wait", limits.topology_wait_seconds),
                   reserve_after_seconds=getattr(args, "reserve_after", limits.reserve_after_seconds),
                   gang_hold_after_seconds=getattr(args, "hold_gangs_after", limits.gang_hold_after_seconds),
                   enqueue_overcommit=getattr(args, "enqueue_overcommit", limits.enqueue_overcommit),
                   tier_reserve_after_seconds=getattr(args, "reserve_tier_after", limits.tier_reserve_after_seconds),
                   wide_order_after_seconds=getattr(args, "order_wide_gangs_after", limits.wide_order_after_seconds))
