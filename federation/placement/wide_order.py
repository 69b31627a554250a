"""Wide gangs take room in age order: a newer one may not take the room an older one can use now.

Why: a *wide* gang is one no leaf can hold (its lowest feasible tier is above the first:
an 8-node gang on 4-node leaves needs a spine). It starts only when that many whole nodes
are free at once, which in a busy cluster happens rarely, and often for one wide gang
while several wait. The objective prices GPUs placed, jobs started, fairness, tiers and
packing, never age, so that room went to whichever waiting wide gang scored best: the one
whose queue was further below its fair share, else whichever of equal plans the CP-SAT
search returned. On ``volcano-1cluster`` the third 8-node gang submitted was placed
fourth, behind one submitted 3,000 s after it, and waited 9,138 s; the source-faithful
``volcano-greedy`` model's worst 8-node wait is 7,768 s (docs/benchmarks.md, issue 12,
"Fourth session (2026-11-24, tiers2)"). Volcano's ``allocate`` orders jobs by the plugins'
``JobOrderFn`` and, when they tie, by creation time (``Session.JobOrderFn`` in
``pkg/scheduler/framework/session_plugins.go``, volcano-sh/volcano); Slurm's backfill
starts the oldest job of equal priority first as well. Here age decides only between
wide gangs, and only for room both could use.

The rule, per round, pure (a function of the snapshot and the round's earlier holds):

1. wide gangs: pending gangs of several pods whose lowest feasible tier is above the
   first tier (``Scoring.lowest_tier``) and within their hard tier limit in some allowed
   cluster (``eligibility.can_ever_hold``; an 8-node gang bound to one 4-node leaf never
   runs and claims nothing), that have waited ``after`` seconds or more
   (``PlanLimits.wide_order_after_seconds``, default 0; None disables). Highest band
   first, then oldest, then name; the first ``MAX_WALKED`` are walked;
2. on a scratch copy of the round (``PlanningRound.mark`` / ``roll_back``) they are placed
   in that order where the greedy search would put them (``PlanningRound.place``: lowest
   tier, tightest domain, within every earlier hold and tier reservation). A gang that
   fits claims those nodes; one that does not, or that its queue may not admit now
   (capability, guarantees), claims nothing;
3. every wide gang after a claiming one, of the same or a lower band, is barred from the
   nodes it claimed this round (``rnd.barred``, recorded in ``rnd.holds``).

Nothing else is barred: smaller jobs may still take that room when the objective prefers
them (barring them too was measured: +9 % avg wait over six seeds), and a newer wide gang
that fits elsewhere still starts there (the greedy hint places both, and the model never
returns less). A claim is room the older gang can use this round, so the rule does not
hold room for later. What it trades is fairness between queues: age beats
the fair-share credit between two wide gangs (measured +0.006 fairness deviation over six
seeds; ordering only within a queue, as Volcano does, gave back the max-wait gain).
``validate(snapshot, plan, limits)`` checks plans against it (``tier_reserve.problems``).
"""

from __future__ import annotations

from collections.abc import Sequence

from federation.domain.jobs import Job
from federation.domain.plans import PendingJob
from federation.domain.topology import LEAF_TIER
from federation.placement.eligibility import can_ever_hold
from federation.placement.rounds import PlanningRound

# Wide gangs placed on the scratch copy per round, oldest first (each is one greedy search;
# every later wide gang is still barred from their claims). At 2,000 gangs over 100
# clusters 16 cost ~50 ms CPU a round; 4 and 16 gave the same figures on volcano-1cluster.
MAX_WALKED = 4


def why(gang_size: int, after: float) -> tuple[str, str]:
    """The reason recorded with a claim (``rnd.holds``)."""
    return f"an older gang of {gang_size} pods, waiting over {after:g} s, can use this room now", "capacity"


def wide_gangs(rnd: PlanningRound, after: float) -> list[PendingJob]:
    """Rule 1: the wide gangs that have waited ``after`` seconds, in the order they are served."""
    now, sc = rnd.snapshot.now, rnd.scoring
    return sorted(
        (p for p in rnd.snapshot.pending
         if p.job.gang_size > 1 and now - p.submitted_at >= after
         and (low := sc.lowest_tier(p.job)) is not None and low > LEAF_TIER and _holdable(rnd, p.job, low)),
        key=lambda p: (sc.band(p.job), p.submitted_at, p.job.name),
    )


def _holdable(rnd: PlanningRound, job: Job, low: int) -> bool:
    """Could some allowed cluster, empty, hold the gang within its hard tier limit?

    ``low`` is the lowest tier over the allowed clusters, so a numeric limit is one
    comparison; only a limit by tier name (resolved per cluster) asks every cluster — the
    round's allowed clusters (``PlanningRound.groups``, computed once per propagation policy:
    asking ``allowed_clusters`` per gang took 30 ms of the 10,000-job re-plan, this 5 ms)."""
    topo = job.network_topology
    if topo is None or not topo.hard:
        return True
    if topo.highest_tier_allowed is not None:
        return low <= topo.highest_tier_allowed
    clusters = rnd.state.clusters
    return any(can_ever_hold(job, clusters[name]) for group in rnd.groups(job) for name in group)


def order_wide_gangs(rnd: PlanningRound, after: float | None) -> list[str]:
    """Apply rules 1-3 to the round; return the gangs that claimed room, oldest first."""
    if after is None:
        return []
    wide = wide_gangs(rnd, after)
    if len(wide) < 2:
        return []
    walked = wide[:MAX_WALKED]
    mark = rnd.mark()
    claims = []
    try:
        for p in walked:
            placed = rnd.place(p.job)  # None when inadmissible or when nothing holds it now
            if placed is not None:
                claims.append((p, placed.cluster, placed.hypernode,
                               frozenset((placed.cluster, a.node) for a in placed.pods)))
    finally:
        rnd.roll_back(mark)
    for p, cluster, domain, nodes in claims:
        _bar_newer(rnd, p, nodes, wide)
        rnd.holds.append((p.job.name, cluster, domain, nodes, *why(p.job.gang_size, after)))
    return [p.job.name for p, _, _, _ in claims]


def _bar_newer(rnd: PlanningRound, older: PendingJob, nodes: frozenset[tuple[str, str]],
               wide: Sequence[PendingJob]) -> None:
    """Keep ``nodes`` from every wide gang served after ``older`` (its band or a lower one)."""
    band = rnd.scoring.band(older.job)
    after = False
    for p in wide:
        if p.job.name == older.job.name:
            after = True
        elif after and rnd.scoring.band(p.job) >= band:
            rnd.bar(p.job.name, nodes)
