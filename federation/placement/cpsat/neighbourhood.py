"""Large-neighbourhood search: CP-SAT on a few clusters at a time when a whole band is too big.

Why: at fleet scale (2,000 gangs over 100 clusters) the greedy pass takes most of the round
budget, and a model of the whole band (tens of thousands of candidates) is never built in
what is left. All 12 measured rounds then shipped the greedy plan unchanged. The greedy
plan is near-optimal in amount placed but not in *where*: gangs a tier wider than they
needed, small jobs breaking whole domains (``Scoring.guard``), emptier domains than
necessary. Those losses are local to a few clusters, so a model over those clusters
alone is small enough to solve in the time that is left.

Steps, after a band's greedy decisions (the live round holds them), repeated over
disjoint windows of clusters until the band's time slice is spent (POP-style: the
clusters of different windows share no capacity, so each small model is independent):

1. rank the clusters not yet tried by the band's placement loss there: per unit, the tier
   steps x ``TIER_PENALTY`` + leftover + guard of each placement (what a perfect
   placement would not pay); take the ``HOOD_CLUSTERS`` worst;
2. undo the band's placements in those clusters (at most ``HOOD_JOBS``, the worst first).
   Add the band's still-pending jobs that may use them;
3. build a window over those jobs with candidates ranked and pruned *inside* the hood's
   clusters, hinted with the greedy decisions (so the hint is feasible and the model
   starts from the greedy value). Exact per-node capacity is used when small enough.
   Solve for at most ``STEP_SECONDS`` (the rest of the slice goes to the next windows),
   decode, and greedy-repair what did not pack;
4. keep the result only if the band's value (``score_vector``) is strictly higher, else
   restore the step's checkpoint. So the plan is never worse than greedy, step by step.

The band's value is computed over the band's members only (``band_value``): higher bands
do not move during the step, so the fairness credit the band can still earn is the
``fair_left`` it was given, and lower bands do not count for it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from federation.domain.jobs import Job
from federation.domain.plans import PendingJob, Placement, Plan, PlanLimits
from federation.placement.cpsat import decode, solve
from federation.placement.cpsat.classes import attach_candidates, group_jobs, hint_domains
from federation.placement.cpsat.solve import Outcome
from federation.placement.cpsat.variables import Window
from federation.placement.greedy import run_bands
from federation.placement.rounds import PlanningRound
from federation.placement.score import FAIR_BONUS, TIER_PENALTY

HOOD_CLUSTERS = 4
HOOD_JOBS = 48
EXACT_MAX_VARS = 1_500
MIN_HOOD_SECONDS = 0.05  # below this the model would not get past its hint
STEP_SECONDS = 0.15  # solver time of one window; measured: later windows gain more than a longer first solve
STEP_OVERHEAD = 0.06  # window, model, decode, repair and value of one step outside the solver (measured, loaded host)
MAX_STEPS = 32


def loss(rnd: PlanningRound, job: Job, p: Placement) -> int:
    """What ``p`` gives up against a perfect placement of ``job`` (objective units)."""
    sc = rnd.scoring
    per_unit = TIER_PENALTY * sc.tier_steps(job, p.tier) + sc.leftover(job, p.cluster, p.hypernode) \
        + sc.anticipation(job, p.cluster, p.hypernode)
    return sc.units(job) * per_unit


def _band_value(rnd: PlanningRound, band: int) -> int:
    partial = Plan(tuple(rnd.placements.values()), (), tuple(rnd.preempted.values()))
    return rnd.scoring.vector(partial)[band]


def band_value(rnd: PlanningRound, members: Sequence[PendingJob], fair_left: Mapping[str, int]) -> int:
    """The band's value in ``score_vector`` minus its (unchanging) victims' cost.

    Equal to ``_band_value`` up to that constant while the bands above keep their
    placements: ``fair_left`` is the deficit they left, consumed here per queue."""
    sc = rnd.scoring
    placements = rnd.placements
    value = 0
    units: dict[str, int] = {}
    for p in members:
        pl = placements.get(p.job.name)
        if pl is not None:
            value += sc.placement_value(p.job, pl.cluster, pl.hypernode, pl.tier)
            u = sc.units(p.job)
            units[p.job.queue] = units.get(p.job.queue, 0) + u
    for queue, amount in units.items():
        value += FAIR_BONUS * min(amount, fair_left.get(queue, 0))
    return value


def _window(rnd: PlanningRound, jobs: list[Job], hood: frozenset[str], hint: dict[str, Placement],
            fair_left: dict[str, int], band: int) -> Window:
    classes = group_jobs(rnd, jobs)
    for jc in classes:
        attach_candidates(rnd, jc, {}, hint_domains(rnd, jc, hint), prune=True, within=hood)
        jc.candidates = [u for u in jc.candidates if rnd.state.domains[u].cluster.name in hood]
        jc.cap = {u: c for u, c in jc.cap.items() if u in jc.candidates}
    classes = [jc for jc in classes if jc.candidates]
    pod_vars = sum(len(rnd.state.domains[u].nodes) * len(jc.tasks) for jc in classes for u in jc.candidates)
    return Window(rnd, classes, [], {band: 1}, pod_vars <= EXACT_MAX_VARS, fair_left)


def _step(rnd: PlanningRound, band: int, members: list[PendingJob], greedy_left: list[PendingJob], limits: PlanLimits,
          deadline: float, fair_left: dict[str, int], out: Outcome, tried: set[str]) -> list[PendingJob] | None:
    """One window; the band's jobs left pending, or None when no untried cluster loses value."""
    jobs = rnd.scoring.jobs
    mine = [(loss(rnd, jobs[p.job.name], pl), pl) for p in members if (pl := rnd.placements.get(p.job.name))]
    by_cluster: dict[str, int] = {}
    for lost, pl in mine:
        if pl.cluster not in tried:
            by_cluster[pl.cluster] = by_cluster.get(pl.cluster, 0) + lost
    ranked = sorted((c for c, lost in by_cluster.items() if lost > 0), key=lambda c: (-by_cluster[c], c))
    if not ranked:
        return None
    hood = frozenset(ranked[:HOOD_CLUSTERS])
    tried.update(hood)
    moved = sorted((x for x in mine if x[1].cluster in hood), key=lambda x: (-x[0], x[1].job))[:HOOD_JOBS]
    waiting = [p.job for p in greedy_left if any(c in hood for g in rnd.groups(p.job)[:1] for c in g)]
    waiting = waiting[: max(0, HOOD_JOBS - len(moved))]
    value = band_value(rnd, members, fair_left)
    mark = rnd.mark()  # copy-on-write: only the clusters the step touches are copied
    hint = {pl.job: pl for _, pl in moved}
    for _, pl in moved:
        rnd.undo(jobs[pl.job])
    window_jobs = [jobs[pl.job] for _, pl in moved] + waiting
    w = _window(rnd, window_jobs, hood, hint, fair_left, band)
    if w.classes and deadline - time.monotonic() - STEP_OVERHEAD >= MIN_HOOD_SECONDS:
        v = solve.model(w, hint, set())
        solver = solve.weighted(w, v, min(STEP_SECONDS, deadline - time.monotonic() - STEP_OVERHEAD), limits, out)
        if solver is not None:
            decode.apply(w, v, solver)
    # Repair only the window's jobs: the band's other pending jobs saw no room given back.
    names = {j.name for j in window_jobs}
    run_bands(rnd, tuple(p for p in members if p.job.name in names and p.job.name not in rnd.placements),
              preempt=False)
    if band_value(rnd, members, fair_left) <= value:
        rnd.roll_back(mark)
        return greedy_left
    rnd.keep()
    again = {pl.job for _, pl in moved}
    return [p for p in greedy_left if p.job.name not in rnd.placements] + [
        p for p in members if p.job.name in again and p.job.name not in rnd.placements]


def improve(rnd: PlanningRound, band: int, members: list[PendingJob], greedy_left: list[PendingJob],
            limits: PlanLimits, deadline: float, fair_left: dict[str, int], out: Outcome) -> list[PendingJob]:
    """LNS steps on the band's greedy decisions until ``deadline``; returns the band's jobs left pending."""
    tried: set[str] = set()
    left = greedy_left
    for _ in range(MAX_STEPS):
        if deadline - time.monotonic() < MIN_HOOD_SECONDS + STEP_OVERHEAD:
            break
        found = _step(rnd, band, members, left, limits, deadline, fair_left, out, tried)
        if found is None:
            break
        left = found
    return left
