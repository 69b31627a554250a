"""The simulator grows running elastic jobs (``Plan.growths``): the added pods take room,
the rest of the job's work runs at its new size, and ``--placements`` lists the growth."""

from __future__ import annotations

import io
import json

import pytest
from simkit import NODE, hypernode, job, scenario

from federation.domain.plans import PlanLimits
from federation.placement.baselines import POLICIES
from federation.sim import placements
from federation.sim.bench import DEFAULT_POLICIES
from federation.sim.simulator import simulate

LIMITS = PlanLimits(time_limit_seconds=0.3, workers=1)


def one_leaf() -> dict[str, object]:
    return {"name": "c1", "nodeGroups": [{"namePattern": "n{i}", "count": 2, "allocatable": dict(NODE)}],
            "hyperNodes": [hypernode("leaf", 1, ["n0", "n1"])]}


@pytest.mark.parametrize("policy", DEFAULT_POLICIES)
def test_an_elastic_job_grows_when_room_appears_and_finishes_sooner(policy: str) -> None:
    # "blocker" holds n0 for 100 s; "elastic" (2 replicas of a node each, minAvailable 1,
    # 1000 s at full size) starts on n1 with one pod at t=10, at half speed, and grows onto
    # n0 in the round after the blocker ends.
    s = scenario(clusters=[one_leaf()], jobs=[
        job("blocker", pods=1, at=0.0, duration=100.0),
        job("elastic", pods=2, at=1.0, duration=1000.0, minAvailable=1),
    ])
    result = simulate(s, POLICIES[policy], limits=LIMITS, timer=lambda: 0.0)
    assert result.rejections == ()
    starts = [x for x in result.starts if x.placement.job == "elastic"]
    first, grown = starts
    assert not first.growth and [a.node for a in first.placement.pods] == ["n1"] and first.at == 10.0
    assert grown.growth and grown.at == 100.0 and [(a.index, a.node) for a in grown.placement.pods] == [(1, "n0")]
    assert grown.placement.hypernode == first.placement.hypernode == "leaf"
    done = {j.name: j.finished_at for j in result.jobs}
    # 90 s at half speed (4.5 % of the work), then 955 s at full speed
    assert done["elastic"] == pytest.approx(100.0 + 0.955 * 1000.0)
    out = io.StringIO()
    placements.write(out, {policy: result.starts})
    lines = [json.loads(line) for line in out.getvalue().splitlines() if '"elastic"' in line]
    assert [line.get("growth", False) for line in lines] == [False, True]
    assert placements.disallowed(s, result.starts) == []


def test_an_elastic_job_that_cannot_grow_runs_at_its_size() -> None:
    s = scenario(clusters=[one_leaf()], jobs=[
        job("blocker", pods=1, at=0.0, duration=5000.0),
        job("elastic", pods=2, at=1.0, duration=1000.0, minAvailable=1),
    ])
    result = simulate(s, POLICIES["cpsat"], limits=LIMITS, timer=lambda: 0.0)
    done = {j.name: j.finished_at for j in result.jobs}
    assert done["elastic"] == pytest.approx(10.0 + 2000.0)
    assert not any(x.growth for x in result.starts)
