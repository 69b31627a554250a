"""Large-neighbourhood search: CP-SAT on a few clusters when a whole band is too big.

Why: at fleet scale (2,000 gangs over 100 clusters) the greedy pass takes most of the round
budget, and a model of the whole band (tens of thousands of candidates) is never built in
what is left. All 12 measured rounds then shipped the greedy plan unchanged. The greedy
plan is near-optimal in amount placed but not in *where*: gangs a tier wider than they
needed, small jobs breaking whole domains (``Scoring.guard``), emptier domains than
necessary. Those losses are local to a few clusters, so a model over those clusters
alone is small enough to solve in the time that is left.

One step, after a band's greedy decisions (the live round holds them):

1. rank clusters by the band's placement loss there: per unit, the tier steps x
   ``TIER_PENALTY`` + emptiness + guard of each placement (what a perfect placement
   would not pay); take the ``HOOD_CLUSTERS`` worst;
2. undo the band's placements in those clusters (at most ``HOOD_JOBS``, the worst first).
   Add the band's still-pending jobs that may use them;
3. build a window over those jobs with candidates restricted to the hood's clusters,
   hinted with the greedy decisions (so the hint is feasible and the model starts from
   the greedy value). Exact per-node capacity is used when small enough. Solve in the
   time left, decode, and greedy-repair what did not pack;
4. keep the result only if the band's value (``score_vector``) is strictly higher,
   else restore the greedy checkpoint. So the plan is never worse than greedy.
"""

from __future__ import annotations

import time

from federation.domain.jobs import Job
from federation.domain.plans import PendingJob, Placement, Plan, PlanLimits
from federation.placement.cpsat import decode, solve
from federation.placement.cpsat.classes import attach_candidates, group_jobs, hint_domains
from federation.placement.cpsat.solve import Outcome
from federation.placement.cpsat.variables import Window
from federation.placement.greedy import run_bands
from federation.placement.rounds import PlanningRound
from federation.placement.score import TIER_PENALTY

HOOD_CLUSTERS = 4
HOOD_JOBS = 48
EXACT_MAX_VARS = 1_500
MIN_HOOD_SECONDS = 0.05  # below this the model would not get past its hint


def loss(rnd: PlanningRound, job: Job, p: Placement) -> int:
    """What ``p`` gives up against a perfect placement of ``job`` (objective units)."""
    sc = rnd.scoring
    per_unit = TIER_PENALTY * sc.tier_steps(job, p.tier) + sc.emptiness(p.cluster, p.hypernode) \
        + sc.guard(p.cluster, p.hypernode)
    return sc.units(job) * per_unit


def _band_value(rnd: PlanningRound, band: int) -> int:
    partial = Plan(tuple(rnd.placements.values()), (), tuple(rnd.preempted.values()))
    return rnd.scoring.vector(partial)[band]


def _window(rnd: PlanningRound, jobs: list[Job], hood: frozenset[str], hint: dict[str, Placement],
            fair_left: dict[str, int], band: int) -> Window:
    classes = group_jobs(rnd, jobs)
    for jc in classes:
        attach_candidates(rnd, jc, {}, hint_domains(rnd, jc, hint), prune=True)
        jc.candidates = [u for u in jc.candidates if rnd.state.domains[u].cluster.name in hood]
        jc.cap = {u: c for u, c in jc.cap.items() if u in jc.candidates}
    classes = [jc for jc in classes if jc.candidates]
    pod_vars = sum(len(rnd.state.domains[u].nodes) * len(jc.tasks) for jc in classes for u in jc.candidates)
    return Window(rnd, classes, [], {band: 1}, pod_vars <= EXACT_MAX_VARS, fair_left)


def improve(rnd: PlanningRound, band: int, members: list[PendingJob], greedy_left: list[PendingJob],
            limits: PlanLimits, deadline: float, fair_left: dict[str, int], out: Outcome) -> list[PendingJob]:
    """One LNS step on the band's greedy decisions; returns the band's jobs left pending."""
    if deadline - time.monotonic() < MIN_HOOD_SECONDS:
        return greedy_left
    jobs = rnd.scoring.jobs
    mine = [(loss(rnd, jobs[p.job.name], pl), pl) for p in members if (pl := rnd.placements.get(p.job.name))]
    by_cluster: dict[str, int] = {}
    for lost, pl in mine:
        by_cluster[pl.cluster] = by_cluster.get(pl.cluster, 0) + lost
    ranked = sorted((c for c, lost in by_cluster.items() if lost > 0), key=lambda c: (-by_cluster[c], c))
    if not ranked:
        return greedy_left
    hood = frozenset(ranked[:HOOD_CLUSTERS])
    moved = sorted((x for x in mine if x[1].cluster in hood), key=lambda x: (-x[0], x[1].job))[:HOOD_JOBS]
    waiting = [p.job for p in greedy_left if any(c in hood for g in rnd.groups(p.job)[:1] for c in g)]
    waiting = waiting[: max(0, HOOD_JOBS - len(moved))]
    value = _band_value(rnd, band)
    greedy_state = rnd.checkpoint()
    hint = {pl.job: pl for _, pl in moved}
    for _, pl in moved:
        rnd.undo(jobs[pl.job])
    w = _window(rnd, [jobs[pl.job] for _, pl in moved] + waiting, hood, hint, fair_left, band)
    seconds = deadline - time.monotonic()
    if w.classes and seconds >= MIN_HOOD_SECONDS:
        v = solve.model(w, hint, set())
        solver = solve.weighted(w, v, seconds, limits, out)
        if solver is not None:
            decode.apply(w, v, solver)
    left = run_bands(rnd, tuple(p for p in members if p.job.name not in rnd.placements), preempt=False)
    if _band_value(rnd, band) <= value:
        rnd.restore(greedy_state)
        return greedy_left
    return left
