"""Tier reservation (opt-in): a gang that waited past a bound gets room held at its lowest tier, and runs there.

Why: with Volcano's semantics (no topology wait) a gang takes any domain its constraint
allows the moment one has room. Room frees where jobs happen to finish, so a gang that
could run in one leaf often starts across two (tier 2) or across spines (tier 3) and runs
slower there (``commModel``), while the leaves it needed free up minutes later
(docs/benchmarks.md, issue 12: every gang placed above its lowest tier was placed when the
free room was scattered). The opt-in gang hold (``admission.hold_for_gangs``) keeps nodes
for a waiting gang but lets the gang itself take a wider domain as soon as one has room,
so the held room is usually given up the round it completes. Volcano's ``reserve``
action (``pkg/scheduler/actions/reserve``, with the ``elect`` action choosing the target
job, volcano-sh/volcano v1.x, since removed) locked nodes for one starving job and placed
that job *there*. We do the same for gangs, per round and without state:

1. candidates: pending gangs of several pods whose lowest feasible tier is the first tier
   (a leaf can hold them, so a hold keeps at most one leaf's nodes), that have waited
   ``after`` seconds or more (``PlanLimits.tier_reserve_after_seconds``, off by default;
   ``--reserve-tier-after 300`` is the measured setting),
   have no topology wait set (``intent.topology_wait``: a job annotation or queue default,
   even 0, or a service default > 0 governs instead), and are admissible
   (capability, guarantees). Highest band first, then oldest first;
2. each candidate is offered only domains of its lowest feasible tier this round
   (``PlanningRound.reserve_tier``). If one has room now it is placed there; otherwise the
   fewest, freest nodes of the lowest-tier domain closest to holding it are held
   (``reserve.held_nodes``, ``reserve.keep_for_first``): every other pending job of the
   same or a lower band is barred from them, and the gang waits for them to drain. Every
   other node of the domain stays open, so smaller work backfills there;
3. at most ``MAX_RESERVED`` gangs hold room per round, on disjoint nodes;
4. nothing is reserved while the pending GPUs exceed ``MAX_QUEUED`` x the healthy fleet's
   GPUs: in a long queue every held GPU is one that queued work would use at once, and
   the holds cost more wait than the tiers win back.

The choice is a pure function of the snapshot, so the same nodes are held round after
round and drain as their jobs finish. It idles at most the held nodes' free GPUs, and only
while they are fewer than the gang needs. ``validate(snapshot, plan, limits)`` checks a
plan against the reservations (``problems``).

Measured (docs/benchmarks.md, issue 12, "Third session (2026-11-24, tiers)"): before
main's packing change (``Scoring.leftover``) it raised lowestTierFraction on
``volcano-1cluster`` (six seeds: 0.846 -> 0.887 at equal wait and JCT; seed 1216: 0.676 ->
0.824). After it, the packing term alone lands every leaf-sized gang at its leaf there
(0.882), the rule adds nothing measurable, and it costs 4 % avg JCT on
``mixed-gpu-models``: so it is not the default. Rules 1 and 4 come from measurement:
reserving spine-sized gangs too reaches 0.91 on ``volcano-1cluster`` but costs +30-70 %
avg wait (a spine is half that cluster) and 1.2-1.4x the 8-node gangs' max wait; without
rule 4 the rule cost 3-8 % avg JCT on ``fleet-4clusters``, where the queue is always
longer than the fleet.
"""

from __future__ import annotations

from collections.abc import Iterator

from federation.domain.jobs import Job
from federation.domain.plans import PendingJob, Plan
from federation.domain.resources import GPU
from federation.domain.topology import LEAF_TIER
from federation.placement.reserve import held_nodes, keep_for_first
from federation.placement.rounds import PlanningRound

MAX_RESERVED = 4  # gangs that hold room per round
MAX_QUEUED = 1.5  # no reservation while pending GPUs exceed this x the healthy fleet's GPUs


def candidates(rnd: PlanningRound, after: float) -> list[PendingJob]:
    """The gangs rule 1 admits, in the order they are served."""
    now = rnd.snapshot.now
    return sorted(
        (p for p in rnd.snapshot.pending
         if p.job.gang_size > 1 and now - p.submitted_at >= after
         and rnd.wait_of(p.job).source == "none" and rnd.scoring.lowest_tier(p.job) == LEAF_TIER
         and rnd.admissible(p.job)),
        key=lambda p: (rnd.scoring.band(p.job), p.submitted_at, p.job.name),
    )


def _why(job: Job, after: float) -> tuple[str, str]:
    return f"a gang of {job.gang_size} pods waiting over {after:g} s for a domain of its lowest tier", "capacity"


def queued(rnd: PlanningRound) -> float:
    """Pending GPUs over the healthy fleet's GPUs (inf for a fleet without GPUs)."""
    capacity = rnd.ledger.capacity.get(GPU)
    demand = sum(p.job.requests.get(GPU) for p in rnd.snapshot.pending)
    return demand / capacity if capacity > 0 else float("inf")


def reserve_tiers(rnd: PlanningRound, after: float | None) -> list[str]:
    """Apply rules 1-3 to the round; return the gangs that hold room, in order."""
    if after is None or queued(rnd) > MAX_QUEUED:
        return []
    held: list[str] = []
    for p in candidates(rnd, after):
        if len(held) >= MAX_RESERVED:
            break
        rnd.reserve_tier(p.job.name, after)
        kept = keep_for_first(rnd, [p], lambda dom, job: held_nodes(rnd, dom, job), lambda job: _why(job, after))
        if kept is None:
            rnd.release_tier(p.job.name)  # room at its lowest tier now, or none it could ever drain
            continue
        held.append(kept.name)
    return held


def problems(rnd: PlanningRound, plan: Plan) -> Iterator[str]:
    """How ``plan`` breaks the holds of ``rnd`` (``validate``).

    ``rnd`` is the round opened on the plan's snapshot the way every planner opens it
    (``opening.open_round``: gang hold, tier reservation, then the wide gangs' age order;
    last round's victims are not known here): a reserved gang placed above its lowest
    tier, or a job on a node a hold bars it from (``rnd.barred``: the holder's band and
    below, or for a claim of ``wide_order`` the wide gangs served after the holder).
    """
    jobs = {p.job.name: p.job for p in rnd.snapshot.pending}
    for placed in plan.placements:
        job = jobs.get(placed.job)
        if job is None:
            continue
        lowest = rnd.scoring.lowest_tier(job)
        if placed.job in rnd.tier_reserved and lowest is not None and placed.tier > lowest:
            yield (f"job {placed.job}: placed at tier {placed.tier} although room is reserved for it at its lowest "
                   f"tier {lowest} (it waited over {rnd.tier_reserved[placed.job]:g} s)")
        barred = rnd.barred.get(placed.job, frozenset())
        for holder, cluster, _, held, _, _ in rnd.holds:
            if holder == placed.job or cluster != placed.cluster:
                continue
            on = sorted({a.node for a in placed.pods if (cluster, a.node) in held and (cluster, a.node) in barred})
            if on:
                yield f"job {placed.job}: placed on {', '.join(on)}, held for {holder}"
