"""Windows: which jobs each model decides, with which hint, and the never-worse guard.

Two shapes, chosen per round:

* **joint** (rounds of at most ``JOINT_MAX_JOBS``): one model over every pending job, bands weighted
  lexicographically, exact per-node capacity when the pod-variable count allows; the hint
  is the complete greedy plan; the result is kept only if its score vector beats the
  greedy plan's.
* **per band** (larger rounds, or when lexicographic weights would not fit 64-bit
  coefficients — big weights also slow the LP, so mid-size rounds do better here): bands
  are decided highest first. For each band the greedy planner runs
  on the live round (that is the hint), its decisions are undone, the band's model is
  solved with the remaining time slice and decoded, leftovers go through the greedy
  planner (placement then preemption), and the band's value is compared with the greedy
  one: the model's decisions stay only if strictly better, otherwise the greedy decisions
  are replayed. Lower bands only ever see what higher bands left, so the plan is
  lexicographically at least as good as the pure greedy plan — by construction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PlanLimits
from federation.placement.cpsat import decode, neighbourhood, preemption, solve
from federation.placement.cpsat.classes import attach_candidates, group_jobs, hint_domains, victim_room
from federation.placement.cpsat.solve import Outcome
from federation.placement.cpsat.variables import Window
from federation.placement.greedy import finish, run_bands
from federation.placement.opening import open_round
from federation.placement.rounds import PlanningRound
from federation.placement.score import FAIR_BONUS, JOB_START, VALUE

EXACT_MAX_VARS = 1_500
JOINT_MAX_JOBS = 40  # one lexicographically weighted model; beyond this its big coefficients slow the LP
SMALL_ROUND_JOBS = 300  # per-band windows of rounds up to this size: no pruning, exact capacity if small
BAND_MODEL_MAX_JOBS = 300  # on larger rounds, a band with more jobs gets neighbourhood steps, not its own model
MAX_COEFFICIENT = 1 << 50
RESERVE = 0.15  # fraction of the budget kept for decoding and reasons
FINISH_SECONDS_PER_JOB = 50e-6  # reasons, score terms and plan assembly per pending job (25-36 us measured at load 6-7)
MIN_WINDOW_SECONDS = 0.1
MIN_BAND_SECONDS = 0.25  # below this a band keeps its greedy decisions without building a model
DECODE_SECONDS_PER_VAR = 40e-6  # measured: building, decoding and repairing cost per x variable


def fair_left(rnd: PlanningRound, before_band: int) -> dict[str, int]:
    """Deficit units still unfilled after the bands above ``before_band`` were placed."""
    left = dict(rnd.scoring.deficit)
    placed: dict[tuple[str, int], int] = {}
    for p in rnd.placements.values():
        job = rnd.scoring.jobs[p.job]
        b = rnd.scoring.band(job)
        if b < before_band:
            placed[(job.queue, b)] = placed.get((job.queue, b), 0) + rnd.scoring.units(job)
    for (queue, _), amount in sorted(placed.items(), key=lambda kv: kv[0][1]):
        left[queue] = max(0, left.get(queue, 0) - amount)
    return left


def build(rnd: PlanningRound, jobs: Sequence[Job], weights: dict[int, int], keep: Mapping[str, Placement],
          small: bool, before_band: int, exact_max_vars: int | None = EXACT_MAX_VARS) -> Window:
    """The model window over ``jobs``; per-node (exact) capacity when the round is small and
    its pod variables number at most ``exact_max_vars`` (None: no limit, the reference)."""
    classes = group_jobs(rnd, jobs)
    victims = preemption.candidates(rnd, classes)
    room = victim_room(rnd, victims)
    for jc in classes:
        attach_candidates(rnd, jc, room, hint_domains(rnd, jc, keep), prune=not small)
    classes = [jc for jc in classes if jc.candidates]
    pod_vars = sum(len(rnd.state.domains[u].nodes) * len(jc.tasks) for jc in classes for u in jc.candidates)
    exact = small and (exact_max_vars is None or pod_vars <= exact_max_vars)
    if len(weights) == 1:  # one band: its terms outweigh every lower-band victim's cost
        (band,) = weights
        weights = {band: 1 + sum(rnd.scoring.victim_cost(r) for r in victims if rnd.scoring.band(r.job) != band)}
    return Window(rnd, classes, victims, weights, exact, fair_left(rnd, before_band))


def joint_weights(rnd: PlanningRound) -> dict[int, int] | None:
    """Lexicographic band weights for one model, or None if they would be too large."""
    sc = rnd.scoring
    reach = [0] * len(sc.bands.order)
    for p in rnd.snapshot.pending:
        reach[sc.band(p.job)] += JOB_START + sc.units(p.job) * (VALUE + FAIR_BONUS)
    for r in rnd.snapshot.running:
        reach[sc.band(r.job)] += sc.victim_cost(r)
    weights: dict[int, int] = {}
    acc = 1
    for b in reversed(range(len(reach))):
        weights[b] = acc
        acc *= 2 * reach[b] + 1
    top = max(reach, default=0) * max(weights.values(), default=1)
    return weights if top < MAX_COEFFICIENT else None


def _band_value(rnd: PlanningRound, band: int) -> int:
    partial = Plan(tuple(rnd.placements.values()), (), tuple(rnd.preempted.values()))
    return rnd.scoring.vector(partial)[band]


def per_band(
    rnd: PlanningRound, limits: PlanLimits, deadline: float, previous: Plan | None
) -> tuple[list[PendingJob], Outcome]:
    out = Outcome()
    jobs = {p.job.name: p.job for p in rnd.snapshot.pending}
    bands: dict[int, list[PendingJob]] = {}
    for p in rnd.snapshot.pending:
        bands.setdefault(rnd.scoring.band(p.job), []).append(p)
    left: list[PendingJob] = []
    prev = {p.job: p for p in previous.placements if p.job in jobs} if previous is not None else {}
    order = sorted(bands)
    small = len(rnd.snapshot.pending) <= SMALL_ROUND_JOBS
    floor = MIN_WINDOW_SECONDS if small else MIN_BAND_SECONDS
    greedy_seconds, greedy_jobs = 0.0, 0
    for index, band in enumerate(order):
        members = bands[band]
        # The band's own model needs the pre-greedy state; when not even its floor is left
        # it cannot run, so the full copy (10,000 nodes: tens of ms) is skipped.
        # A band this large on a large round goes straight to the neighbourhood steps: its
        # whole model (1,000 gangs: 0.2-0.7 s to build, then rarely past its hint) lost to
        # them in every measured round (docs/benchmarks.md, issue 12 fleet scale).
        whole = small or len(members) <= BAND_MODEL_MAX_JOBS
        before = rnd.checkpoint() if whole and deadline - rnd.clock() >= floor else None
        placed_before, evicted_before = set(rnd.placements), set(rnd.preempted)
        greedy_started = rnd.clock()
        greedy_left = run_bands(rnd, tuple(members))
        greedy_seconds += rnd.clock() - greedy_started
        greedy_jobs += len(members)
        g_placed = {n: p for n, p in rnd.placements.items() if n not in placed_before}
        g_evicted = {n for n in rnd.preempted if n not in evicted_before}
        # Higher bands matter lexicographically more: each band gets at least half of what
        # is left (the last one all of it), more when it holds most of the remaining jobs.
        # What is left excludes the greedy passes of the lower bands, estimated at this
        # round's greedy rate per job: they always run, so time a band's model or
        # neighbourhood steps took from them would push the round past its budget.
        later = sum(len(bands[b]) for b in order[index + 1:])
        share = len(members) / max(1, len(members) + later)
        spare = deadline - rnd.clock() - greedy_seconds / max(1, greedy_jobs) * later
        seconds = spare * (1.0 if index == len(order) - 1 else max(0.5, share))
        perfect = not greedy_left and not any(rnd.scoring.tier_steps(jobs[n], p.tier) for n, p in g_placed.items())
        if perfect or seconds < floor or before is None:
            if perfect or small:
                left.extend(greedy_left)
            else:  # too little time for the band's model: CP-SAT on its worst few clusters
                left.extend(neighbourhood.improve(rnd, band, members, greedy_left, limits,
                                                  time.monotonic() + seconds, fair_left(rnd, band), out))
            continue
        g_value = _band_value(rnd, band)
        after_greedy = rnd.checkpoint()
        rnd.restore(before)
        started = rnd.clock()
        w = build(rnd, [p.job for p in members], {band: 1}, {**prev, **g_placed}, small=small, before_band=band)
        size = sum(len(jc.candidates) for jc in w.classes)
        solve_seconds = seconds - (rnd.clock() - started) - size * DECODE_SECONDS_PER_VAR
        if solve_seconds < MIN_WINDOW_SECONDS:  # the model would not get to improve on its hint
            rnd.restore(after_greedy)
            if small:
                left.extend(greedy_left)
            else:  # the band's model is too big: CP-SAT on its worst few clusters instead
                left.extend(neighbourhood.improve(rnd, band, members, greedy_left, limits,
                                                  started + seconds, fair_left(rnd, band), out))
            continue
        v = solve.model(w, g_placed, g_evicted)
        solver = solve.weighted(w, v, solve_seconds, limits, out, reproducible=small)
        if solver is not None:
            decode.apply(w, v, solver)
        band_left = run_bands(rnd, tuple(p for p in members if p.job.name not in rnd.placements))
        if _band_value(rnd, band) <= g_value:
            rnd.restore(after_greedy)
            band_left = greedy_left
        left.extend(band_left)
    return left, out


def joint(rnd: PlanningRound, weights: dict[int, int], limits: PlanLimits, deadline: float,
          previous: Plan | None, greedy: Plan) -> tuple[list[PendingJob], Outcome]:
    """One model over the whole round, bands weighted lexicographically (``joint_weights``;
    ``plan_cpsat`` goes per band when they would not fit)."""
    out = Outcome()
    hinted = {p.job: p for p in greedy.placements}
    keep = {**({p.job: p for p in previous.placements} if previous is not None else {}), **hinted}
    w = build(rnd, [p.job for p in rnd.snapshot.pending], weights, keep, small=True, before_band=0)
    v = solve.model(w, hinted, {p.job for p in greedy.preemptions})
    solver = solve.weighted(w, v, deadline - rnd.clock(), limits, out, reproducible=True)
    if solver is not None:
        decode.apply(w, v, solver)
    return run_bands(rnd, tuple(p for p in rnd.snapshot.pending if p.job.name not in rnd.placements)), out


def plan_cpsat(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None = None,
               clock: Callable[[], float] = time.monotonic) -> Plan:
    """The CP-SAT plan of a round; never worse than the greedy plan by ``score_vector``.

    ``clock`` (monotonic seconds) measures the budget ``limits.time_limit_seconds``."""
    started = clock()
    budget = max(0.05, limits.time_limit_seconds)
    reserve = max(budget * RESERVE, FINISH_SECONDS_PER_JOB * len(snapshot.pending))
    deadline = started + budget - reserve
    rnd = open_round(snapshot, limits, previous, clock=clock)
    weights = joint_weights(rnd) if len(snapshot.pending) <= JOINT_MAX_JOBS else None
    if weights is not None:
        fresh = rnd.checkpoint()
        greedy_left = run_bands(rnd, snapshot.pending)
        greedy = Plan(tuple(rnd.placements.values()), (), tuple(rnd.preempted.values()))
        greedy_state = rnd.checkpoint()
        rnd.restore(fresh)
        left, out = joint(rnd, weights, limits, deadline, previous, greedy)
        mine = Plan(tuple(rnd.placements.values()), (), tuple(rnd.preempted.values()))
        if rnd.scoring.vector(mine) < rnd.scoring.vector(greedy):  # never worse than greedy
            rnd.restore(greedy_state)
            left, out = greedy_left, Outcome()
    else:
        left, out = per_band(rnd, limits, deadline, previous)
    status = "OPTIMAL" if out.solved and out.optimal else "FEASIBLE" if out.solved else "GREEDY"
    result = finish(rnd, left, status, started)
    bound = result.objective + out.gap * abs(result.objective)
    return Plan(result.placements, result.unplaced, result.preemptions, result.status, result.objective, bound,
                clock() - started, result.score_terms)
