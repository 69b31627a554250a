"""Tiny scenario builders for the simulator tests (plain dicts dumped to YAML)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from federation.domain.plans import FederationSnapshot, Placement, Plan, PlanLimits, PodAssignment, Preemption
from federation.sim.scenario import Scenario, parse_scenario

# The benchmark scenarios of ../shared/scenarios, copied into the repository so a clean
# clone tests the same files wherever it is checked out (tests/fixtures/scenarios/shared).
SHARED = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" / "shared"

NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}


def hypernode(name: str, tier: int, nodes: Sequence[str] = (), children: Sequence[str] = ()) -> dict[str, Any]:
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def two_leaf_cluster(name: str = "c1", prefix: str = "n") -> dict[str, Any]:
    """Four 8-GPU nodes: leaves {0,1} and {2,3} (tier 1) under one spine (tier 2)."""
    return {
        "name": name,
        "nodeGroups": [{"namePattern": prefix + "{i}", "count": 4, "allocatable": dict(NODE)}],
        "hyperNodes": [
            hypernode(f"{name}-l0", 1, [f"{prefix}0", f"{prefix}1"]),
            hypernode(f"{name}-l1", 1, [f"{prefix}2", f"{prefix}3"]),
            hypernode(f"{name}-top", 2, children=[f"{name}-l0", f"{name}-l1"]),
        ],
    }


def job(name: str, pods: int = 1, gpus: int = 8, at: float = 0.0, duration: float = 100.0, queue: str = "q",
        **extra: Any) -> dict[str, Any]:
    out = {"name": name, "queue": queue, "submitAt": at, "durationSeconds": duration,
           "tasks": [{"name": "worker", "replicas": pods,
                      "resources": {"cpu": str(8 * gpus), "memory": f"{64 * gpus}Gi", "nvidia.com/gpu": str(gpus)}}]}
    out.update(extra)
    return out


def document(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "toy",
        "seed": 7,
        "clusters": [two_leaf_cluster()],
        "queues": [{"name": "q"}],
        "jobs": [job("a", pods=2)],
        "commModel": {"slowdownByTier": {1: 1.0, 2: 1.5}},
    }
    base.update(copy.deepcopy(overrides))
    return base


def scenario(**overrides: Any) -> Scenario:
    return parse_scenario(yaml.safe_load(yaml.safe_dump(document(**overrides))))


Decide = Callable[[FederationSnapshot], Plan]


def scripted(decide: Decide) -> Callable[[FederationSnapshot, PlanLimits, Plan | None], Plan]:
    """A planner from a function of the snapshot only."""

    def planner(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None) -> Plan:
        del limits, previous
        return decide(snapshot)

    return planner


def place(job_name: str, cluster: str, hypernode_name: str, tier: int, nodes: Sequence[str]) -> Placement:
    pods = tuple(PodAssignment("worker", i, n) for i, n in enumerate(nodes))
    return Placement(job_name, cluster, hypernode_name, tier, pods)


def plan_of(*placements: Placement, preempt: Sequence[str] = ()) -> Plan:
    return Plan(tuple(placements), (), tuple(Preemption(v, "test") for v in preempt), "SCRIPTED")


class FakeTimer:
    """Each call advances 5 ms: planner wall time is exactly 5 ms per round."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.005
        return self.now
