"""One line per gang of a simulated run: when it was submitted, how long it waited, where it ran.

    python hack/gang_outcomes.py SCENARIO POLICY [--min-pods N]

POLICY is ``cpsat`` (the shipped ``plan()``), ``greedy`` (cpsat's greedy plan alone) or a
baseline (``volcano-greedy``, ``karmada-spread``, ``armada-drf``). Each line: job, pods,
submission time, wait to first start (``-`` if never started), tier of its last placement
and the lowest tier an empty federation offers it, runtime, and its networkTopology
(``mode/highest tier``, ``none``). It is how issue 12's diagnoses found which gangs land
above their lowest tier and which wait longest (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys

from federation.domain.plans import FederationSnapshot, Plan, PlanLimits
from federation.placement import plan as shipped_plan
from federation.placement.baselines import POLICIES
from federation.placement.greedy import greedy_plan
from federation.sim.scenario import load_scenario
from federation.sim.simulator import simulate


def greedy_alone(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None = None) -> Plan:
    """cpsat's greedy pass alone, as a planner (the hint and fallback it gives the model)."""
    return greedy_plan(snapshot, limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario")
    parser.add_argument("policy", choices=["cpsat", "greedy", *sorted(POLICIES)])
    parser.add_argument("--min-pods", type=int, default=2)
    args = parser.parse_args(argv)
    planner = {"cpsat": shipped_plan, "greedy": greedy_alone}.get(args.policy) or POLICIES[args.policy]
    scenario = load_scenario(args.scenario)
    jobs = {s.job.name: s.job for s in scenario.jobs}
    result = simulate(scenario, planner)
    for outcome in sorted(result.jobs, key=lambda o: (o.submitted_at, o.name)):
        if outcome.gang_size < args.min_pods:
            continue
        topology = jobs[outcome.name].network_topology
        wait = "-" if outcome.first_start is None else f"{outcome.first_start - outcome.submitted_at:.0f}"
        print(f"{outcome.name} pods={outcome.gang_size} submitted={outcome.submitted_at:.0f} wait={wait} "
              f"tier={outcome.tier} lowest={outcome.best_tier} runtime={outcome.duration_seconds:.0f} "
              f"topology={'none' if topology is None else f'{topology.mode}/{topology.highest_tier_allowed}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
