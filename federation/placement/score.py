"""The layered objective, computed for ANY plan so planners can be compared.

Layering (docs/design/placement.md has the full argument):

1. **Queue priority, then job priority — strict.** Jobs fall into priority *bands*, the
   distinct ``(queue priority, job priority)`` pairs, highest first. The score is the
   vector of per-band values compared lexicographically: no amount of value in a lower
   band compensates one unit in a higher band. ``score()`` folds the vector into one float
   with band weights larger than any lower band can reach.
2. Inside a band, every term is an integer, weighted so that the layers dominate each
   other in practice (not strictly — that would need coefficients CP-SAT cannot handle):

   * **fairness**: each unit placed for a queue still below its DRF fair share earns
     ``FAIR_BONUS`` on top of the base value (the deficit is consumed by higher bands first);
   * **amount placed** (work conservation): ``VALUE`` per unit; a preempted running gang
     loses ``VALUE`` per unit in ITS band, plus a small cost that grows with the GPU-hours
     it has already run (victims that lose the least work are chosen);
   * **jobs started**: ``JOB_START`` per job placed, whatever its size (a stopped job loses
     it too). Amount placed alone counts GPUs, but the average wait and JCT count jobs:
     between plans that place the same units, the one that starts more jobs leaves fewer
     waiting (``JOB_START``'s comment has the measured reason);
   * **topology tier**: ``TIER_PENALTY`` per unit for each tier above the lowest tier any
     allowed empty cluster could offer the gang (at most ``MAX_TIER_STEPS`` steps, so placing
     a gang is always worth more than leaving it pending — soft topology never blocks);
   * **anticipation**: ``GUARD_MAX`` per unit for breaking a whole domain *above* the
     chosen one at a tier some pending gang needs as its lowest (a leaf in an empty spine,
     when an 8-node gang waits for a spine): whole room is kept whole for the queued
     gangs that need it (``guard``, ``cpsat/anticipation.py``); and ``OVERSIZE`` per unit
     for putting a pod on a node class bigger than the smallest the job could use, while
     queued pods need the bigger class (a one-GPU pod on an eight-GPU node when four-GPU
     nodes exist and eight-GPU pods wait: ``oversize``). A placement pays the larger of the
     two (``anticipation``), so the layer never reaches past ``GUARD_MAX``;
   * **packing**: up to ``PACK_PENALTY_MAX`` per unit for the room the placement leaves
     free in its domain (``leftover``: best fit by what is left, so whole domains stay
     free for the next big gang). Measured on what is *left*, not on the domain's emptiness
     before: a gang that must land where two whole nodes are free pays nothing when it
     fills them, and of two jobs of equal value that compete for one domain the one that
     fills it is preferred (best fit decreasing);
   * **preferred node affinity**: up to ``PREFER_MAX`` per unit for a domain whose nodes
     match the tasks' preferred terms (``placement/preference.py``); what is left of one
     tier step above packing and anticipation, so it never buys a wider tier.

A *unit* is a dominant share of federation capacity scaled so that one unit is about one
GPU on a GPU fleet (``units = round(dominant_share x max(1000, total GPUs))``, at least 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import FederationSnapshot, Placement, Plan, RunningJob
from federation.domain.resources import GPU
from federation.placement.eligibility import allowed_clusters, lowest_feasible_tiers, usable_nodes
from federation.placement.ledger import Bands, QueueLedger, band_key, bands_of
from federation.placement.preference import domain_preference, prefers

VALUE = 64
FAIR_BONUS = 256
TIER_PENALTY = 16
MAX_TIER_STEPS = 3
PACK_PENALTY_MAX = 7
GUARD_MAX = 6  # anticipation + packing (<= 13) stay below one tier step (16)
# Anticipation for node classes (``Scoring.oversize``), as much as breaking a whole domain.
# Measured on fleet-4clusters over six seeds (docs/benchmarks.md, "Seventh session"): 6
# gave avg JCT 0.988x the best baseline (mean), 3 gave 1.005x, none 1.024x.
OVERSIZE = GUARD_MAX
RUN_COST_MAX = 32
# Per job placed: a quarter of one unit's VALUE (a unit is one GPU on fleets of 1,000 GPUs
# or more; below, one GPU is 1,000 / GPUs units: on 192 GPUs a start is 5 % of a one-GPU
# job's value). Slurm's
# multifactor priority has the same lever (PriorityWeightJobSize with PriorityFavorSmall).
# Measured (docs/benchmarks.md, "Third session"): with the packing term on what is left,
# fair-saturated's avg JCT went 6,557 -> 5,888 s with it, fairness 0.035 -> 0.047.
JOB_START = 16
# Preferred node affinity (placement/preference.py): below one tier step even against the
# worst packing and anticipation of a lower tier.
PREFER_MAX = max(0, TIER_PENALTY - PACK_PENALTY_MAX - GUARD_MAX - 1)


@dataclass(frozen=True)
class JobTerms:
    band: int
    units: int
    lowest_tier: int | None


class Scoring:
    """Per-round constants of the objective (units, bands, deficits, lowest tiers)."""

    def __init__(self, snapshot: FederationSnapshot, ledger: QueueLedger | None = None) -> None:
        self.snapshot = snapshot
        self.ledger = ledger or QueueLedger(snapshot)
        self.bands: Bands = bands_of(snapshot)
        self.scale = max(1000, self.ledger.capacity.get(GPU))
        self.deficit = {
            q: max(0, round((self.ledger.fair[q] - self.ledger.start_share(q)) * self.scale))
            for q in self.ledger.queues
        }
        self._lowest: dict[object, int | None] = {}
        self._emptiness: dict[tuple[str, str], int] = {}
        self._room: dict[tuple[str, str], tuple[int, int, str]] = {}  # (free, allocatable, resource) at start
        self._leftover: dict[tuple[str, str, int], int] = {}
        self._nodes: dict[str, dict[str, Node]] = {}
        self._units: dict[str, int] = {}
        self._band: dict[str, int] = {}
        self._job_lowest: dict[str, int | None] = {}
        self._rank = {key: i for i, key in enumerate(self.bands.order)}
        self.jobs = {p.job.name: p.job for p in snapshot.pending}
        self.running = {r.job.name: r for r in snapshot.running}
        self._base: int | None = None
        self._guard: dict[tuple[str, str], int] = {}
        self._preference: dict[tuple[object, str, str], int] = {}
        self._needed: frozenset[int] | None = None
        self._node_sizes: frozenset[int] | None = None
        self._big_pod: int | None = None
        self._smallest_class: dict[tuple[object, ...], int | None] = {}
        self._domain_class: dict[tuple[str, str, int], int | None] = {}
        self._charged: dict[str, int] = {}

    def units(self, job: Job) -> int:
        found = self._units.get(job.name)
        if found is None:
            found = self._units[job.name] = max(1, round(self.ledger.size(job) * self.scale))
        return found

    def band(self, job: Job) -> int:
        found = self._band.get(job.name)
        if found is None:
            found = self._band[job.name] = self._rank[band_key(self.snapshot, job)]
        return found

    def lowest_tier(self, job: Job) -> int | None:
        """Lowest tier at which any allowed cluster, empty, could hold the gang."""
        if job.name in self._job_lowest:
            return self._job_lowest[job.name]
        key = (self.ledger.shapes(job), job.propagation)
        if key not in self._lowest:
            tiers = lowest_feasible_tiers(job, (c for group in allowed_clusters(job, self.snapshot) for c in group))
            self._lowest[key] = min(tiers) if tiers else None
        self._job_lowest[job.name] = self._lowest[key]
        return self._lowest[key]

    def tier_steps(self, job: Job, tier: int) -> int:
        low = self.lowest_tier(job)
        return 0 if low is None else min(MAX_TIER_STEPS, max(0, tier - low))

    def prime(self, known: dict[tuple[str, str], tuple[int, int]]) -> None:
        """Seed the domains' room from (free GPUs, allocatable GPUs) per domain computed elsewhere."""
        for key, (free, alloc) in known.items():
            if alloc > 0:
                self._room[key] = (max(0, free), alloc, GPU)

    def _usable(self, snap: ClusterSnapshot) -> dict[str, Node]:
        """The cluster's usable nodes by name (built once per round)."""
        found = self._nodes.get(snap.name)
        if found is None:
            found = self._nodes[snap.name] = {n.name: n for n in snap.nodes if n.usable}
        return found

    def room(self, cluster: str, hypernode: str) -> tuple[int, int, str]:
        """(free, allocatable, resource) of the domain at round start; GPUs when it has any."""
        key = (cluster, hypernode)
        found = self._room.get(key)
        if found is None:
            snap = self.snapshot.cluster(cluster)
            dom = snap.tree.domains.get(hypernode) if snap is not None else None
            found = (0, 0, GPU)
            if snap is not None and dom is not None:
                index = self._usable(snap)
                nodes = [index[name] for name in dom.nodes if name in index]
                res = GPU if any(n.allocatable.get(GPU) for n in nodes) else "cpu"
                found = (sum(max(0, n.free.get(res)) for n in nodes), sum(n.allocatable.get(res) for n in nodes), res)
            self._room[key] = found
        return found

    def emptiness(self, cluster: str, hypernode: str) -> int:
        """0 (full) .. PACK_PENALTY_MAX (empty): how empty the domain was at round start."""
        key = (cluster, hypernode)
        found = self._emptiness.get(key)
        if found is None:
            free, alloc, _ = self.room(cluster, hypernode)
            found = self._emptiness[key] = min(PACK_PENALTY_MAX, (PACK_PENALTY_MAX + 1) * free // alloc) if alloc else 0
        return found

    def gang_need(self, job: Job, res: str) -> int:
        """``res`` requested by the pods that must start together (an elastic job's extra
        replicas only take room that is left over, placement/elastic.py): the ledger's gang
        request, memoised per gang shape."""
        return self.ledger.req(job).get(res)

    def leftover(self, job: Job, cluster: str, hypernode: str) -> int:
        """0 .. PACK_PENALTY_MAX: how empty the domain would be with only ``job`` added to it.

        The packing term. Why not the domain's emptiness before the placement (the first
        version): that charged a gang for the room it *needs*. A two-node gang can only go
        where two whole nodes are free, so per unit it paid up to 4 more than a one-GPU job
        put in a nearly full leaf, and between plans of equal value the model kept the one
        that started small jobs; on ``fragmented`` its plans then left the wide gangs
        waiting (avg JCT 1.11x its own greedy seed's, ``docs/benchmarks.md``). Charged on
        what is left, each job still prefers its tightest domain, and a job that fills a
        domain pays less per unit than one that leaves most of it free: best fit
        decreasing, the bin-packing order that starts big items first.
        """
        free, alloc, res = self.room(cluster, hypernode)
        need = self.gang_need(job, res)
        key = (cluster, hypernode, need)
        found = self._leftover.get(key)
        if found is None:
            found = 0 if not alloc else min(PACK_PENALTY_MAX, (PACK_PENALTY_MAX + 1) * max(0, free - need) // alloc)
            self._leftover[key] = found
        return found

    def needed_tiers(self) -> frozenset[int]:
        """Tiers that some pending gang of several pods needs as its lowest feasible tier."""
        if self._needed is None:
            self._needed = frozenset(
                t for p in self.snapshot.pending if p.job.gang_size > 1 and (t := self.lowest_tier(p.job)) is not None)
        return self._needed

    def guard(self, cluster: str, hypernode: str) -> int:
        """0 or GUARD_MAX: does a placement in ``hypernode`` break a whole domain a queued gang needs?

        Every domain strictly above ``hypernode`` is checked. If it was (nearly) empty at round
        start (emptiness ``PACK_PENALTY_MAX``, at least 7/8 free) and its tier is the lowest
        feasible tier of some pending gang, the placement pays ``GUARD_MAX`` per unit (once,
        capped). So a leaf in a busy spine beats an equally tight leaf in a whole spine
        while an 8-node gang waits for a spine.
        A graded version (the ancestors' emptiness) was measured first: it moved small jobs
        out of the tightest leaves and cost wait and JCT on ``volcano-1cluster``.
        """
        key = (cluster, hypernode)
        found = self._guard.get(key)
        if found is None:
            found = 0
            snap = self.snapshot.cluster(cluster)
            needed = self.needed_tiers()
            if snap is not None and needed:
                domains = snap.tree.domains
                dom = domains.get(hypernode)
                parent = dom.parent if dom is not None else None
                while parent is not None:
                    above = domains[parent]
                    if above.tier in needed and self.emptiness(cluster, above.name) >= PACK_PENALTY_MAX:
                        found += GUARD_MAX  # breaks a whole domain a queued gang could use
                    parent = above.parent
            found = self._guard[key] = min(GUARD_MAX, found)
        return found

    def node_sizes(self) -> frozenset[int]:
        """GPU counts of the fleet's usable GPU nodes (one pass over the nodes per round)."""
        if self._node_sizes is None:
            self._node_sizes = frozenset(
                g for c in self.snapshot.clusters for n in c.nodes if n.usable and (g := n.allocatable.get(GPU)))
        return self._node_sizes

    def one_node_class(self) -> bool:
        """True when every usable GPU node of the fleet has the same GPU count (``oversize`` is 0)."""
        return len(self.node_sizes()) <= 1

    def big_pod(self) -> int:
        """GPUs of the largest pending pod some node could hold: the node class queued work needs.

        A pod bigger than every node never runs, so it claims no class (else one impossible
        job would switch ``oversize`` off for the whole fleet)."""
        if self._big_pod is None:
            largest = max(self.node_sizes(), default=0)
            self._big_pod = max((g for p in self.snapshot.pending if (g := pod_gpus(p.job)) <= largest), default=0)
        return self._big_pod

    def smallest_class(self, job: Job) -> int | None:
        """GPUs of the smallest node, among those the job may use, that holds its largest pod."""
        need = pod_gpus(job)
        key = (need, job.propagation, job.node_constraints)
        if key not in self._smallest_class:
            sizes = [n.allocatable.get(GPU) for group in allowed_clusters(job, self.snapshot) for c in group
                     for n in usable_nodes(c, job)]
            self._smallest_class[key] = min((s for s in sizes if s >= need), default=None)
        return self._smallest_class[key]

    def domain_class(self, cluster: str, hypernode: str, need: int) -> int | None:
        """GPUs of the smallest usable node of the domain that holds a pod of ``need`` GPUs."""
        key = (cluster, hypernode, need)
        if key not in self._domain_class:
            snap = self.snapshot.cluster(cluster)
            dom = snap.tree.domains.get(hypernode) if snap is not None else None
            found: int | None = None
            if snap is not None and dom is not None:
                index = self._usable(snap)
                found = min((g for name in dom.nodes if name in index
                             and (g := index[name].allocatable.get(GPU)) >= need), default=None)
            self._domain_class[key] = found
        return self._domain_class[key]

    def oversize(self, job: Job, cluster: str, hypernode: str) -> int:
        """0 or ``OVERSIZE``: does the job take a node class the largest queued pods need, when a
        smaller one would do?

        Why: an eight-GPU node holding one one-GPU pod can hold no eight-GPU pod, while a
        four-GPU node could have held the small pod and no queued gang pod at all. Best fit
        by free room alone sends the small pod to whichever domain is tightest, and on a
        fleet of mixed node sizes that is often one of big nodes (``fleet-4clusters``: three
        in four one-GPU jobs went to eight-GPU nodes). The pod pays when every node of the
        domain that could hold it could also hold the largest pending pod (``big_pod``),
        while some node the job may use (its allowed clusters, its node constraints) holds
        it and not that pod. The class is the node's allocatable size, not its free room: a
        small pod on a busy big node keeps the node from becoming whole when its other pods
        end. With no pending pod bigger than the job's smallest class, nobody needs the big
        nodes and the term is 0. The node-level analogue is Slurm's node ``Weight`` (lowest-weight
        nodes are allocated first, to keep big nodes for the jobs that need them).
        """
        need = self.charged_need(job)
        if not need:
            return 0
        here = self.domain_class(cluster, hypernode, need)
        return OVERSIZE if here is not None and here >= self.big_pod() else 0

    def charged_need(self, job: Job) -> int:
        """GPUs of the job's largest pod when ``oversize`` can charge it (it has a smallest node
        class and some pending pod needs a bigger one), else 0. Memoised per job: the greedy
        search and the model ask it per candidate domain."""
        found = self._charged.get(job.name)
        if found is None:
            need = 0 if self.one_node_class() else pod_gpus(job)
            smallest = self.smallest_class(job) if need > 0 else None
            found = self._charged[job.name] = need if smallest is not None and self.big_pod() > smallest else 0
        return found

    def anticipation(self, job: Job, cluster: str, hypernode: str) -> int:
        """The larger of ``guard`` and ``oversize`` (each at most ``GUARD_MAX``): what the placement
        takes from queued gangs, whole domains or the node class they need."""
        return max(self.guard(cluster, hypernode), self.oversize(job, cluster, hypernode))

    def placement_value(self, job: Job, cluster: str, hypernode: str, tier: int) -> int:
        """Base value of a placement without the fairness bonus (always > 0)."""
        return _value(self.units(job), self.tier_steps(job, tier), self.leftover(job, cluster, hypernode),
                      self.anticipation(job, cluster, hypernode), self.preference(job, cluster, hypernode))

    def preference(self, job: Job, cluster: str, hypernode: str) -> int:
        """``0..PREFER_MAX`` per unit: the domain's match with the job's preferred node affinity."""
        if not prefers(job):
            return 0
        key = (job.node_constraints, cluster, hypernode)
        found = self._preference.get(key)
        if found is None:
            snap = self.snapshot.cluster(cluster)
            found = 0 if snap is None else domain_preference(snap, hypernode, job.node_constraints, PREFER_MAX)
            self._preference[key] = found
        return found

    def run_cost(self, running: RunningJob) -> int:
        gpu_hours = running.job.requests.get(GPU) * max(0.0, self.snapshot.now - running.started_at) / 3600.0
        return min(RUN_COST_MAX, math.ceil(math.log2(1.0 + gpu_hours)))

    def victim_cost(self, running: RunningJob) -> int:
        return JOB_START + VALUE * self.units(running.job) + self.run_cost(running)

    def band_weight_base(self) -> int:
        """An integer larger than any band value can reach in absolute terms (per round)."""
        if self._base is not None:
            return self._base
        pend = sum(JOB_START + self.units(p.job) * (VALUE + FAIR_BONUS) for p in self.snapshot.pending)
        run = sum(self.victim_cost(r) for r in self.snapshot.running)
        self._base = pend + run + 1
        return self._base

    def vector(self, plan: Plan) -> tuple[int, ...]:
        """Per-band values, highest band first."""
        values = [0] * len(self.bands.order)
        placed: dict[tuple[str, int], int] = {}
        for p in plan.placements:
            job = self.jobs.get(p.job)
            if job is None:
                continue
            b = self.band(job)
            values[b] += self.placement_value(job, p.cluster, p.hypernode, p.tier)
            placed[(job.queue, b)] = placed.get((job.queue, b), 0) + self.units(job)
        left = dict(self.deficit)
        for (queue, b), amount in sorted(placed.items(), key=lambda kv: kv[0][1]):
            credit = min(amount, left.get(queue, 0))
            left[queue] = left.get(queue, 0) - credit
            values[b] += FAIR_BONUS * credit
        for v in plan.preemptions:
            running = self.running.get(v.job)
            if running is not None:
                values[self.band(running.job)] -= self.victim_cost(running)
        return tuple(values)

    def fold(self, vector: tuple[int, ...]) -> float:
        base = self.band_weight_base()
        acc = 0
        for value in vector:
            acc = acc * base + value
        return float(acc)

    def terms(self, placement: Placement) -> dict[str, float]:
        """Per-placement terms for the audit trail (why this domain scored as it did)."""
        job = self.jobs[placement.job]
        cluster, hypernode = placement.cluster, placement.hypernode
        units, steps = self.units(job), self.tier_steps(job, placement.tier)
        left, guard = self.leftover(job, cluster, hypernode), self.guard(cluster, hypernode)
        oversize, ahead = self.oversize(job, cluster, hypernode), self.anticipation(job, cluster, hypernode)
        liked = self.preference(job, cluster, hypernode)
        return {
            "band": float(self.band(job)),
            "units": float(units),
            "tierSteps": float(steps),
            "emptiness": float(self.emptiness(cluster, hypernode)),
            "leftover": float(left),
            "start": float(JOB_START),
            "guard": float(guard),
            "oversize": float(oversize),
            "preference": float(liked),
            "value": float(_value(units, steps, left, ahead, liked)),  # = placement_value, its parts asked once
        }


def pod_gpus(job: Job) -> int:
    """GPUs of the job's largest pod."""
    return max((t.resources.get(GPU) for t in job.tasks), default=0)


def _value(units: int, tier_steps: int, leftover: int, anticipation: int, preference: int) -> int:
    """``Scoring.placement_value`` from its terms (one formula for the value and the audit trail)."""
    return JOB_START + units * (VALUE - TIER_PENALTY * tier_steps - leftover - anticipation + preference)


def score_vector(snapshot: FederationSnapshot, plan: Plan) -> tuple[int, ...]:
    """The exact lexicographic objective of ``plan`` (per band, highest first)."""
    return Scoring(snapshot).vector(plan)


def score(snapshot: FederationSnapshot, plan: Plan) -> float:
    """The layered objective of ``plan`` folded into one float (higher is better)."""
    scoring = Scoring(snapshot)
    return scoring.fold(scoring.vector(plan))
