"""``federation bench --placements FILE``: every job start as one JSON line, and its check.

The lines are the scenario contract's (``../shared/scenarios/README.md``): ``{"policy",
"job", "cluster", "hypernode", "tier", "at", "pods": [{"task", "index", "node"}]}`` with
``at`` in simulated seconds since the scenario's start, one per start (restarts
included); a running elastic job that grows gets a line too, with ``"growth": true``
and only the added pods. ``disallowed`` re-checks each pod against its task's node constraints from the
scenario alone, so a bench run can show that no policy put a pod where a kubelet would
refuse it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import IO

from federation.domain.nodes import Node
from federation.placement.eligibility import pod_allows
from federation.sim.scenario import Scenario
from federation.sim.simulator import Start


def lines(policy: str, starts: Iterable[Start]) -> Iterable[str]:
    """The JSON lines of one policy's run."""
    for s in starts:
        p = s.placement
        line: dict[str, object] = {
            "policy": policy, "job": p.job, "cluster": p.cluster, "hypernode": p.hypernode or None,
            "tier": p.tier if p.hypernode else None, "at": s.at,
            "pods": [{"task": a.task, "index": a.index, "node": a.node} for a in p.pods],
        }
        if s.growth:
            line["growth"] = True
        yield json.dumps(line, separators=(",", ":"))


def write(out: IO[str], runs: Mapping[str, Iterable[Start]]) -> None:
    for policy, starts in runs.items():
        for line in lines(policy, starts):
            out.write(line + "\n")


def disallowed(scenario: Scenario, starts: Iterable[Start]) -> list[str]:
    """Every pod placed on a node its task's nodeSelector / affinity / tolerations exclude."""
    jobs = {j.job.name: j.job for j in scenario.jobs}
    nodes: dict[tuple[str, str], Node] = {(c.name, n.name): n for c in scenario.clusters for n in c.nodes}
    out = []
    for s in starts:
        job = jobs[s.placement.job]
        for a in s.placement.pods:
            node = nodes.get((s.placement.cluster, a.node))
            if node is None or not pod_allows(job, a.task, node):
                out.append(f"{job.name} {a.task}[{a.index}] on {s.placement.cluster}/{a.node} at {s.at:g}s")
    return out
