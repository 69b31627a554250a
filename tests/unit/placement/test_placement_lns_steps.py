"""Fleet-scale decomposition (issue 12, item 3): the repeated large-neighbourhood steps of
``cpsat/neighbourhood.py`` and the copy-on-write ``PlanningRound.mark`` they roll back with.

Table tests: every plan validates and is never worse than its greedy seed (by the band's
value and by ``score_vector``); windows are disjoint; the cheap band value is the band's
entry of ``score_vector``; a mark rolls back to exactly what a full checkpoint restores."""

from __future__ import annotations

import time

import pytest

from federation.domain.plans import Plan, PlanLimits
from federation.placement import validate
from federation.placement.cpsat import neighbourhood
from federation.placement.cpsat.solve import Outcome
from federation.placement.cpsat.windows import fair_left
from federation.placement.greedy import finish, run_bands
from federation.placement.rounds import PlanningRound
from federation.placement.score import Scoring
from tests.fixtures.instances import synthetic


def _state(rnd: PlanningRound) -> tuple[object, ...]:
    st = rnd.state
    return ({c: dict(d) for c, d in st.node_free.items()},
            [(list(d.free), dict(d.gpu_hist), dict(d.index)) for d in st.domains],
            {k: list(v) for k, v in st.rows.items()}, dict(rnd.ledger.usage), rnd.ledger.free_total,
            dict(rnd.placements), dict(rnd.preempted))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_mark_rolls_back_exactly_what_a_full_checkpoint_restores(seed: int) -> None:
    snapshot = synthetic(seed=seed, clusters=5, nodes=12, pending=40)
    rnd = PlanningRound(snapshot, grace=None)
    run_bands(rnd, snapshot.pending[:20])
    before = _state(rnd)
    mark = rnd.mark()
    placed = sorted(rnd.placements)
    for name in placed[: len(placed) // 2]:  # give room back in several clusters, then take other room
        rnd.undo(rnd.scoring.jobs[name])
    run_bands(rnd, snapshot.pending[20:])
    assert _state(rnd) != before
    rnd.roll_back(mark)
    assert _state(rnd) == before
    with pytest.raises(RuntimeError):
        rnd.mark()
        rnd.mark()


@pytest.mark.parametrize("seed", [0, 1])
def test_kept_steps_stay_and_the_journal_closes(seed: int) -> None:
    snapshot = synthetic(seed=seed, clusters=4, nodes=12, pending=30)
    rnd = PlanningRound(snapshot, grace=None)
    rnd.mark()
    run_bands(rnd, snapshot.pending)
    kept = _state(rnd)
    rnd.keep()
    assert rnd.state.journal is None and _state(rnd) == kept
    rnd.mark()  # a new mark may open once the last one is closed


def _band0(seed: int, clusters: int, nodes: int, pending: int,
           seconds: float) -> tuple[PlanningRound, int, int, list[str]]:
    snapshot = synthetic(seed=seed, clusters=clusters, nodes=nodes, pending=pending)
    rnd = PlanningRound(snapshot, grace=None, topology_wait=0.0)
    band0 = [p for p in snapshot.pending if rnd.scoring.band(p.job) == 0]
    greedy_left = run_bands(rnd, tuple(band0))
    fair = fair_left(rnd, 0)
    before = neighbourhood.band_value(rnd, band0, fair)
    assert before == neighbourhood._band_value(rnd, 0)  # no victims: the cheap value is the vector's entry
    started = time.monotonic()
    left = neighbourhood.improve(rnd, 0, band0, greedy_left, PlanLimits(workers=1), started + seconds, fair,
                                 Outcome())
    after = neighbourhood.band_value(rnd, band0, fair)
    assert after == neighbourhood._band_value(rnd, 0)
    assert {p.job.name for p in left} == {p.job.name for p in band0 if p.job.name not in rnd.placements}
    left += run_bands(rnd, tuple(p for p in snapshot.pending if rnd.scoring.band(p.job) != 0))
    return rnd, before, after, validate(snapshot, finish(rnd, left, "FEASIBLE", started))


@pytest.mark.parametrize(("seed", "clusters", "nodes", "pending"), [
    (0, 6, 16, 60), (1, 6, 16, 60), (2, 8, 12, 80), (3, 10, 10, 120), (4, 12, 20, 150),
])
def test_repeated_steps_are_valid_and_never_lower_the_band(seed: int, clusters: int, nodes: int,
                                                            pending: int) -> None:
    _, before, after, problems = _band0(seed, clusters, nodes, pending, 0.5)
    assert problems == []
    assert after >= before


def test_more_than_one_window_is_tried_and_windows_are_disjoint(monkeypatch: pytest.MonkeyPatch) -> None:
    hoods: list[frozenset[str]] = []
    real = neighbourhood._window

    def spy(rnd: PlanningRound, jobs: list[object], hood: frozenset[str], *rest: object) -> object:
        hoods.append(hood)
        return real(rnd, jobs, hood, *rest)  # type: ignore[arg-type]  # the spy forwards exactly what it was called with

    monkeypatch.setattr(neighbourhood, "_window", spy)
    monkeypatch.setattr(neighbourhood, "STEP_SECONDS", 0.05)
    _, before, after, problems = _band0(3, 12, 10, 120, 5.0)
    assert problems == [] and after >= before
    assert len(hoods) >= 2
    assert all(not (a & b) for i, a in enumerate(hoods) for b in hoods[i + 1:])


def test_a_spent_slice_leaves_the_greedy_decisions_untouched() -> None:
    snapshot = synthetic(seed=5, clusters=6, nodes=16, pending=60)
    rnd = PlanningRound(snapshot, grace=None, topology_wait=0.0)
    band0 = [p for p in snapshot.pending if rnd.scoring.band(p.job) == 0]
    greedy_left = run_bands(rnd, tuple(band0))
    placed = dict(rnd.placements)
    left = neighbourhood.improve(rnd, 0, band0, greedy_left, PlanLimits(), time.monotonic(), fair_left(rnd, 0),
                                 Outcome())
    assert left == greedy_left and rnd.placements == placed


def test_the_shipped_round_is_never_worse_than_greedy_on_a_decomposed_round() -> None:
    """``plan()`` on a round too large for one band model (the neighbourhood path)."""
    from federation.placement import greedy_plan, plan

    snapshot = synthetic(seed=2, clusters=12, nodes=20, pending=400)
    limits = PlanLimits(time_limit_seconds=1.0, workers=1)
    shipped = plan(snapshot, limits)
    assert validate(snapshot, shipped) == []
    sc = Scoring(snapshot)
    assert sc.vector(shipped) >= sc.vector(greedy_plan(snapshot, limits))
    assert isinstance(shipped, Plan)


def test_a_large_band_of_a_large_round_gets_neighbourhood_steps_not_its_whole_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from federation.placement import greedy_plan, plan
    from federation.placement.cpsat import windows

    calls: list[int] = []
    real = neighbourhood.improve

    def spy(rnd: PlanningRound, band: int, *rest: object) -> object:
        calls.append(band)
        return real(rnd, band, *rest)  # type: ignore[arg-type]  # the spy forwards exactly what it was called with

    def no_whole_model(*_: object) -> None:
        raise AssertionError("a band of more than BAND_MODEL_MAX_JOBS jobs built its whole model")

    monkeypatch.setattr(neighbourhood, "improve", spy)
    monkeypatch.setattr(windows, "build", no_whole_model)
    snapshot = synthetic(seed=3, clusters=12, nodes=20, pending=2 * windows.BAND_MODEL_MAX_JOBS + 100)
    limits = PlanLimits(time_limit_seconds=2.0, workers=1)
    shipped = plan(snapshot, limits)
    assert validate(snapshot, shipped) == []
    sc = Scoring(snapshot)
    assert sc.vector(shipped) >= sc.vector(greedy_plan(snapshot, limits))
    assert calls  # the large bands were routed to the steps (which run while their slice lasts)
