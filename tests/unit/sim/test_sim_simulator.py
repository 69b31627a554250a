"""Simulator semantics: rounds, runtimes by tier, faults, preemption, and refusing bad plans."""

from __future__ import annotations

import pytest
from simkit import FakeTimer, job, place, plan_of, scenario, scripted, two_leaf_cluster

from federation.domain.plans import FederationSnapshot, Plan
from federation.placement.baselines import POLICIES
from federation.sim.simulator import MAX_CHURN, SimResult, simulate
from federation.sim.tracking import JobOutcome


def record(result: SimResult, name: str) -> JobOutcome:
    return next(j for j in result.jobs if j.name == name)


def test_the_same_scenario_gives_the_same_run() -> None:
    s = scenario(jobs=[], generate={"count": 40, "arrivalPerMinute": 4, "gpusPerJob": {1: 0.5, 8: 0.3, 16: 0.2},
                                    "topologyMix": {"hard": 0.5, "none": 0.5}})
    first = simulate(s, POLICIES["volcano-greedy"], timer=FakeTimer())
    again = simulate(s, POLICIES["volcano-greedy"], timer=FakeTimer())
    assert first.jobs == again.jobs and first.rounds == again.rounds and first.samples == again.samples


def test_a_gang_across_leaves_runs_slower_by_the_tier_multiplier() -> None:
    s = scenario(jobs=[job("near", pods=2, duration=100), job("far", pods=2, duration=100)])

    def decide(snap: FederationSnapshot) -> Plan:
        if not snap.pending:
            return Plan()
        return plan_of(place("near", "c1", "c1-l0", 1, ["n0", "n1"]), place("far", "c1", "c1-top", 2, ["n2", "n3"]))

    result = simulate(s, scripted(decide))
    assert record(result, "near").finished_at == 100.0
    assert record(result, "far").tier == 1  # n2,n3 share leaf l1: tier 1

    def split(snap: FederationSnapshot) -> Plan:
        if not snap.pending:
            return Plan()
        return plan_of(place("near", "c1", "c1-top", 2, ["n1", "n2"]))

    s2 = scenario(jobs=[job("near", pods=2, duration=100)])
    slow = simulate(s2, scripted(split))
    near = record(slow, "near")
    assert near.tier == 2 and near.finished_at == pytest.approx(150.0)


def test_a_gang_on_one_node_runs_at_full_speed_even_in_a_wide_domain() -> None:
    s = scenario(jobs=[job("pair", pods=2, gpus=4, duration=100)])
    result = simulate(s, scripted(lambda snap: plan_of(place("pair", "c1", "c1-top", 2, ["n0", "n0"]))
                                  if snap.pending else Plan()))
    assert record(result, "pair").finished_at == 100.0


def test_arrivals_in_one_instant_are_coalesced_into_one_round_on_the_grid() -> None:
    s = scenario(jobs=[job(f"j{i}", at=3.0) for i in range(4)])
    result = simulate(s, POLICIES["karmada-spread"], round_interval=10.0)
    assert [r.at for r in result.rounds] == [10.0] and result.rounds[0].pending == 4
    assert all(record(result, f"j{i}").first_start == 10.0 for i in range(4))


def test_placements_that_do_not_fit_are_recorded_and_never_applied() -> None:
    s = scenario(jobs=[job("a", pods=1), job("b", pods=1)])
    bad = plan_of(place("a", "c1", "c1-l0", 1, ["n0"]), place("b", "c1", "c1-l0", 1, ["n0"]))
    result = simulate(s, scripted(lambda snap: bad if len(snap.pending) == 2 else Plan()))
    assert [r.job for r in result.rejections] == ["b"]
    assert "do not fit" in result.rejections[0].reason
    assert record(result, "b").starts == 0


@pytest.mark.parametrize("placement,reason", [
    (place("a", "c1", "c1-l0", 1, ["n2"]), "leave HyperNode"),
    (place("a", "c9", "c1-l0", 1, ["n0"]), "unknown cluster"),
    (place("a", "c1", "nope", 1, ["n0"]), "unknown HyperNode"),
    (place("a", "c1", "c1-top", 2, ["zz"]), "not in cluster"),
], ids=["outside its HyperNode", "unknown cluster", "unknown HyperNode", "unknown node"])
def test_malformed_placements_are_refused(placement: object, reason: str) -> None:
    s = scenario(jobs=[job("a")])
    result = simulate(s, scripted(lambda snap: plan_of(placement) if snap.pending else Plan()))  # type: ignore[arg-type]  # a scripted planner has a narrower signature than Planner
    assert reason in result.rejections[0].reason


def test_a_hard_tier_limit_is_enforced_by_the_simulator_too() -> None:
    s = scenario(jobs=[job("a", pods=2, networkTopology={"mode": "hard", "highestTierAllowed": 1})])
    result = simulate(s, scripted(lambda snap: plan_of(place("a", "c1", "c1-top", 2, ["n1", "n2"]))
                                  if snap.pending else Plan()))
    assert "hard topology" in result.rejections[0].reason


def test_a_node_failure_kills_and_requeues_its_gang_which_restarts_from_scratch() -> None:
    gang = [job("a", pods=2, duration=100, networkTopology={"mode": "hard", "highestTierAllowed": 1})]
    # Volcano breaks ties between the two empty leaves at random: fail a node the gang is on.
    node = simulate(scenario(jobs=gang), POLICIES["volcano-greedy"]).starts[0].placement.pods[0].node
    s = scenario(jobs=gang, events=[{"at": 50, "kind": "nodeFail", "target": node}])
    result = simulate(s, POLICIES["volcano-greedy"])
    a = record(result, "a")
    assert a.fault_kills == 1 and a.starts == 2
    assert a.fault_gpu_seconds == 16 * 50.0
    assert a.last_start == 50.0 and a.finished_at == 150.0
    assert a.cluster == "c1" and a.tier == 1  # the other leaf


def test_a_cluster_outage_moves_its_jobs_and_blocks_new_ones_until_it_returns() -> None:
    second = {"name": "c2", "nodeGroups": [{"namePattern": "m{i}", "count": 2,
                                           "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}}]}
    s = scenario(clusters=[two_leaf_cluster(), second], jobs=[job("a", pods=2, duration=100)],
                 events=[{"at": 30, "kind": "clusterDown", "target": "c1"}, {"at": 500, "kind": "clusterUp",
                                                                              "target": "c1"}])
    result = simulate(s, POLICIES["volcano-greedy"])
    a = record(result, "a")
    assert a.fault_kills == 1 and a.cluster == "c2" and a.last_start == 30.0
    down = [x for x in result.samples if 30 <= x.at < 500]
    assert down and all(x.capacity.gpus == 16 for x in down)


def test_a_pod_failure_restarts_the_job_in_place() -> None:
    s = scenario(jobs=[job("a", pods=2, duration=100)], events=[{"at": 40, "kind": "podFail", "target": "a"}])
    result = simulate(s, POLICIES["armada-drf"])
    a = record(result, "a")
    assert a.restarts_in_place == 1 and a.starts == 1 and a.finished_at == 140.0


def test_a_preempted_job_goes_back_to_pending_and_restarts_from_scratch() -> None:
    s = scenario(jobs=[job("low", pods=4, duration=1000), job("high", pods=4, at=100, duration=100)])
    top = ["n0", "n1", "n2", "n3"]

    def decide(snap: FederationSnapshot) -> Plan:
        pending = {p.job.name for p in snap.pending}
        running = {r.job.name for r in snap.running}
        if "high" in pending and "low" in running:
            return plan_of(place("high", "c1", "c1-top", 2, top), preempt=["low"])
        if pending and not running:
            return plan_of(place(sorted(pending)[-1], "c1", "c1-top", 2, top))
        return Plan()

    result = simulate(s, scripted(decide), round_interval=10.0)
    low, high = record(result, "low"), record(result, "high")
    assert low.preempted == 1 and high.first_start == 100.0
    assert low.preempted_gpu_seconds == 32 * 100.0  # 4 x 8 GPUs for 100 s
    assert low.last_start == 250.0 and low.finished_at == 250.0 + 1500.0


def test_jobs_nothing_can_hold_stay_pending_and_the_run_still_ends() -> None:
    s = scenario(jobs=[job("huge", pods=9), job("ok", pods=1)])
    result = simulate(s, POLICIES["karmada-spread"])
    huge = record(result, "huge")
    assert not huge.holdable and huge.starts == 0
    assert record(result, "ok").finished_at == 100.0


def test_planner_wall_time_is_measured_with_the_injected_timer() -> None:
    result = simulate(scenario(), POLICIES["volcano-greedy"], timer=FakeTimer())
    assert result.rounds and all(r.wall_seconds == pytest.approx(0.005) for r in result.rounds)


def test_a_planner_that_keeps_evicting_cannot_keep_simulated_time_running_forever() -> None:
    s = scenario(jobs=[job("x", pods=4, duration=1e6), job("y", pods=4, at=50, duration=1e6)])
    top = ["n0", "n1", "n2", "n3"]

    def flip(snap: FederationSnapshot) -> Plan:  # always evict whatever runs for whatever waits
        waiting = [p.job.name for p in snap.pending]
        victims = [r.job.name for r in snap.running]
        return plan_of(place(waiting[0], "c1", "c1-top", 2, top), preempt=victims) if waiting else Plan()

    result = simulate(s, scripted(flip))
    assert result.churn_stops == 1 and len(result.rounds) == 2 + MAX_CHURN + 1
    assert sum(r.preempted for r in result.rounds) == 1 + MAX_CHURN  # then it waits for a real event (a finish)
