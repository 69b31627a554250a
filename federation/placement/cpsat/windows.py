"""Windows: which jobs each model decides, with which hint, and the never-worse guard.

Two shapes, chosen per round:

* **joint** (small rounds): one model over every pending job, bands weighted
  lexicographically, exact per-node capacity when the pod-variable count allows; the hint
  is the complete greedy plan; the result is kept only if its score vector beats the
  greedy plan's.
* **per band** (large rounds, or when lexicographic weights would not fit 64-bit
  coefficients): bands are decided highest first. For each band the greedy planner runs
  on the live round (that is the hint), its decisions are undone, the band's model is
  solved with the remaining time slice and decoded, leftovers go through the greedy
  planner (placement then preemption), and the band's value is compared with the greedy
  one: the model's decisions stay only if strictly better, otherwise the greedy decisions
  are replayed. Lower bands only ever see what higher bands left, so the plan is
  lexicographically at least as good as the pure greedy plan — by construction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from federation.domain.jobs import Job
from federation.domain.plans import FederationSnapshot, PendingJob, Placement, Plan, PlanLimits, Preemption
from federation.placement.cpsat import (
    assignment,
    capacity,
    decode,
    fairness,
    fit,
    hint,
    objective,
    preemption,
    priority,
    quota,
    topology,
    variables,
)
from federation.placement.cpsat.classes import attach_candidates, group_jobs, hint_domains, victim_room
from federation.placement.cpsat.variables import Window
from federation.placement.greedy import finish, run_bands
from federation.placement.rounds import Round
from federation.placement.score import FAIR_BONUS, VALUE

EXACT_MAX_VARS = 1_500
JOINT_MAX_JOBS = 300
MAX_COEFFICIENT = 1 << 50
RESERVE = 0.15  # fraction of the budget kept for decoding and reasons


@dataclass
class Outcome:
    solved: bool = False
    optimal: bool = True
    gap: float = 0.0


def fair_left(rnd: Round, before_band: int) -> dict[str, int]:
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


def build(rnd: Round, jobs: Sequence[Job], weights: dict[int, int], keep: Mapping[str, Placement],
          small: bool, before_band: int) -> Window:
    classes = group_jobs(rnd, jobs)
    victims = preemption.candidates(rnd, classes)
    room = victim_room(rnd, victims)
    for jc in classes:
        attach_candidates(rnd, jc, room, hint_domains(rnd, jc, keep), prune=not small)
    classes = [jc for jc in classes if jc.candidates]
    pod_vars = sum(len(rnd.state.domains[u].nodes) * len(jc.tasks) for jc in classes for u in jc.candidates)
    exact = small and pod_vars <= EXACT_MAX_VARS
    return Window(rnd, classes, victims, weights, exact, fair_left(rnd, before_band))


def solve(w: Window, keep: Mapping[str, Placement], evicted: set[str], seconds: float,
          limits: PlanLimits) -> tuple[object, cp_model.CpSolver, variables.Vars]:
    v = variables.create(w)
    for module in (assignment, capacity, quota, fairness, priority, topology, fit, preemption):
        module.add(w, v)
    objective.add(v)
    hint.add(w, v, keep, evicted)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = max(1, limits.workers)
    solver.parameters.random_seed = limits.seed
    status = solver.solve(v.model)
    return status, solver, v


def _record(out: Outcome, status: object, solver: cp_model.CpSolver) -> bool:
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        out.optimal = False
        return False
    out.solved = True
    if status != cp_model.OPTIMAL:
        out.optimal = False
        obj, bound = solver.objective_value, solver.best_objective_bound
        out.gap = max(out.gap, (bound - obj) / max(1.0, abs(bound)))
    return True


def joint_weights(rnd: Round) -> dict[int, int] | None:
    """Lexicographic band weights for one model, or None if they would be too large."""
    sc = rnd.scoring
    reach = [0] * len(sc.bands.order)
    for p in rnd.snapshot.pending:
        reach[sc.band(p.job)] += sc.units(p.job) * (VALUE + FAIR_BONUS)
    for r in rnd.snapshot.running:
        reach[sc.band(r.job)] += sc.victim_cost(r)
    weights: dict[int, int] = {}
    acc = 1
    for b in reversed(range(len(reach))):
        weights[b] = acc
        acc *= 2 * reach[b] + 1
    top = max(reach, default=0) * max(weights.values(), default=1)
    return weights if top < MAX_COEFFICIENT else None


def _band_value(rnd: Round, band: int) -> int:
    partial = Plan(tuple(rnd.placements.values()), (), tuple(rnd.preempted.values()))
    return rnd.scoring.vector(partial)[band]


def _replay(rnd: Round, jobs: Mapping[str, Job], placed: Mapping[str, Placement],
            evicted: Mapping[str, Preemption]) -> None:
    for name, pre in evicted.items():
        rnd.evict(rnd.running[name], pre.reason, pre.preemptor)
    for name, p in placed.items():
        dom = rnd.state.domains[rnd.state.uid_of[(p.cluster, p.hypernode)]]
        rnd.commit(jobs[name], dom, [a.node for a in p.pods])


def _rollback(rnd: Round, jobs: Mapping[str, Job], placed: set[str], evicted: set[str]) -> None:
    for name in [n for n in rnd.placements if n not in placed]:
        rnd.undo(jobs[name])
    for name in [n for n in rnd.preempted if n not in evicted]:
        rnd.unevict(rnd.running[name])


def per_band(
    rnd: Round, limits: PlanLimits, deadline: float, previous: Plan | None
) -> tuple[list[PendingJob], Outcome]:
    out = Outcome()
    jobs = {p.job.name: p.job for p in rnd.snapshot.pending}
    bands: dict[int, list[PendingJob]] = {}
    for p in rnd.snapshot.pending:
        bands.setdefault(rnd.scoring.band(p.job), []).append(p)
    left: list[PendingJob] = []
    prev = {p.job: p for p in previous.placements} if previous is not None else {}
    for index, band in enumerate(sorted(bands)):
        members = bands[band]
        placed0, evicted0 = set(rnd.placements), set(rnd.preempted)
        greedy_left = run_bands(rnd, tuple(members))
        g_placed = {n: p for n, p in rnd.placements.items() if n not in placed0}
        g_evicted = {n: p for n, p in rnd.preempted.items() if n not in evicted0}
        remaining = deadline - time.monotonic()
        share = sum(len(bands[b]) for b in sorted(bands)[index:])
        seconds = remaining * len(members) / max(1, share)
        perfect = not greedy_left and not any(rnd.scoring.tier_steps(jobs[n], p.tier) for n, p in g_placed.items())
        if perfect or seconds < 0.02:
            left.extend(greedy_left)
            continue
        g_value = _band_value(rnd, band)
        _rollback(rnd, jobs, placed0, evicted0)
        keep = {**{n: p for n, p in prev.items() if n in jobs}, **g_placed}
        w = build(rnd, [p.job for p in members], {band: 1}, keep, small=False, before_band=band)
        started = time.monotonic()
        status, solver, v = solve(w, g_placed, set(g_evicted), seconds - (time.monotonic() - started), limits)
        if _record(out, status, solver):
            decode.apply(w, v, solver)
        band_left = run_bands(rnd, tuple(p for p in members if p.job.name not in rnd.placements))
        if _band_value(rnd, band) <= g_value:
            _rollback(rnd, jobs, placed0, evicted0)
            _replay(rnd, jobs, g_placed, g_evicted)
            band_left = greedy_left
        left.extend(band_left)
    return left, out


def joint(rnd: Round, greedy: Plan, weights: dict[int, int], limits: PlanLimits, deadline: float,
          previous: Plan | None) -> tuple[list[PendingJob], Outcome]:
    out = Outcome()
    keep = {p.job: p for p in greedy.placements}
    if previous is not None:
        keep = {**{p.job: p for p in previous.placements if p.job in keep}, **keep}
    pending = [p.job for p in rnd.snapshot.pending]
    w = build(rnd, pending, weights, keep, small=True, before_band=0)
    seconds = deadline - time.monotonic()
    status, solver, v = solve(w, {p.job: p for p in greedy.placements}, {p.job for p in greedy.preemptions},
                              seconds, limits)
    if _record(out, status, solver):
        decode.apply(w, v, solver)
    return run_bands(rnd, tuple(p for p in rnd.snapshot.pending if p.job.name not in rnd.placements)), out


def plan_cpsat(snapshot: FederationSnapshot, limits: PlanLimits, previous: Plan | None, greedy: Plan) -> Plan:
    """The CP-SAT plan of a round (never worse than ``greedy`` by ``score_vector``)."""
    started = time.monotonic()
    budget = max(0.05, limits.time_limit_seconds)
    deadline = started + budget * (1 - RESERVE) - greedy.solve_seconds
    rnd = Round(snapshot)
    weights = joint_weights(rnd) if len(snapshot.pending) <= JOINT_MAX_JOBS else None
    if weights is not None:
        left, out = joint(rnd, greedy, weights, limits, deadline, previous)
    else:
        left, out = per_band(rnd, limits, deadline, previous)
    status = "OPTIMAL" if out.solved and out.optimal else "FEASIBLE" if out.solved else "GREEDY"
    result = finish(rnd, left, status, started)
    if rnd.scoring.vector(result) < rnd.scoring.vector(greedy):
        return greedy
    bound = result.objective + out.gap * abs(result.objective)
    return Plan(result.placements, result.unplaced, result.preemptions, result.status, result.objective, bound,
                time.monotonic() - started + greedy.solve_seconds, result.score_terms)
