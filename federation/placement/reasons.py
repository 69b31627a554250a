"""Why a job stayed pending: the blocking constraint and the closest cluster.

Users ask "why isn't my job scheduled?" more than anything else (Armada #703, #983), so
every unplaced job gets one ``BLOCKED_BY`` name and a sentence. The checks run from the
most permanent cause to the most transient one, so the answer says what would have to
change: no cluster allowed at all (affinity / taints) → no allowed cluster could EVER hold
it, even empty (``unschedulable=True``) — unless an unhealthy cluster blocked only by its
health could, then it waits ("allowed clusters unavailable") → queue capability → others' guarantees (fairness)
→ it would have fitted at the start of the round, so higher- or equal-priority work took
the room (priority) → it fits now only above its hard tier limit (topology) → capacity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from federation.domain.jobs import Job
from federation.domain.plans import Unplaced
from federation.domain.resources import GPU
from federation.placement.eligibility import (
    affinity_terms,
    can_ever_hold,
    cluster_block,
    empty_capacity,
    lowest_feasible_tier,
    unmatched_constraints,
)
from federation.placement.rounds import PlanningRound

MAX_START_PACKS = 64
UNAVAILABLE = "allowed clusters unavailable: {clusters}; it is placed when one returns"


def _unavailable(rnd: PlanningRound, job: Job) -> Unplaced | None:
    """'Unavailable' is not 'impossible': the job waits if an unhealthy cluster blocked only
    by its health could hold it once it returns (its last snapshot, health set aside).

    Without this a job whose only allowed cluster was lost was declared unschedulable (or
    blamed on affinity, since every other cluster is excluded by it) although it is placed
    the moment the cluster comes back.
    """
    terms = affinity_terms(job)
    names, admitted = [], []
    for cluster in rnd.snapshot.clusters:
        if cluster.healthy:
            continue
        revived = replace(cluster, healthy=True)
        if any(cluster_block(job, revived, t) is None for t in terms):
            admitted.append(cluster.name)
            if can_ever_hold(job, revived):
                names.append(cluster.name)
    if not names:
        if admitted and not any(rnd.groups(job)):  # only lost clusters admit it, none big enough
            return Unplaced(job.name, f"the gang is larger than its allowed cluster(s) {', '.join(admitted)} could "
                            "hold even when empty (they are unavailable now)", "unschedulable", admitted[0], True)
        return None
    listed = ", ".join(f"{n} (lost)" for n in names)
    return Unplaced(job.name, UNAVAILABLE.format(clusters=listed), "capacity", names[0], False)


def _no_cluster(rnd: PlanningRound, job: Job) -> Unplaced:
    waiting = _unavailable(rnd, job)
    if waiting is not None:
        return waiting
    blocks = [cluster_block(job, c, t) for c in rnd.snapshot.clusters for t in affinity_terms(job)]
    if "taints" in blocks:
        return Unplaced(job.name, "every cluster the affinity allows has taints the job does not tolerate",
                        "taints", None, True)
    if "affinity" in blocks or not blocks:
        return Unplaced(job.name, "no cluster matches the job's cluster affinity", "affinity", None, True)
    return Unplaced(job.name, "every cluster the job may use is unhealthy", "capacity", None, False)


def _fits_at_start(rnd: PlanningRound, job: Job, names: Sequence[str]) -> str | None:
    st = rnd.state
    _, need = rnd.demand(job)
    tries = 0
    for name in names:
        limit = rnd.tier_cap(job, st.clusters[name])
        for uid in st.cluster_domains.get(name, ()):
            dom = st.domains[uid]
            if limit is not None and dom.tier > limit:
                continue
            if any(f < n for f, n in zip(st.start_domain_free[uid], need, strict=True)):
                continue
            tries += 1
            if rnd.pack(dom, job, start=True) is not None:
                return name
            if tries >= MAX_START_PACKS:
                return None
    return None


def _freest(rnd: PlanningRound, names: Sequence[str]) -> str | None:
    gi = rnd.state.gpu_index
    best: tuple[int, str] | None = None
    for name in names:
        free = max((rnd.state.domains[u].free[gi] for u in rnd.state.cluster_domains.get(name, ())), default=0)
        if best is None or (free, name) > best:
            best = (free, name)
    return best[1] if best else None


def _kept_for_another(rnd: PlanningRound, job: Job, ever: Sequence[str]) -> Unplaced | None:
    """Room exists, but only on the nodes a reservation keeps for a starved job."""
    holds = [h for h in rnd.holds if h[0] != job.name]
    if not holds or job.name not in rnd.barred:
        return None
    held = rnd.barred.pop(job.name)
    try:
        home = next((h for g in rnd.groups(job) if (h := rnd.find_home(job, tuple(n for n in g if n in ever)))), None)
    finally:
        rnd.barred[job.name] = held
    if home is None:
        return None
    used = {(home[0].cluster.name, n) for n in home[1]}
    starved, cluster, domain, _, because, constraint = next((h for h in holds if h[3] & used), holds[0])
    # Name the starved job only to its own queue's users: explain must not reveal another
    # tenant's job (issue 10); its queue is public (ListQueues), so name that instead.
    queue = next((p.job.queue for p in rnd.snapshot.pending if p.job.name == starved), "")
    who = starved if queue == job.queue else f"a job of queue {queue}"
    return Unplaced(job.name, f"the room that fits it, in {cluster}, is kept for {who} ({because}) until "
                    f"{domain} can hold it", constraint, cluster)


def diagnose(rnd: PlanningRound, job: Job) -> Unplaced:
    """The blocking constraint of a job left pending at the end of the round."""
    names = tuple(dict.fromkeys(n for group in rnd.groups(job) for n in group))
    if not names:
        return _no_cluster(rnd, job)
    clusters = [rnd.state.clusters[n] for n in names]
    ever = rnd.ever_holding(job, names)
    gpus = job.requests.get(GPU)
    size = f"{job.total_replicas} pods, {gpus} GPUs"
    if not ever:
        waiting = _unavailable(rnd, job)
        if waiting is not None:
            return waiting
        unmatched = unmatched_constraints(job, clusters)
        if unmatched is not None:
            return Unplaced(job.name, unmatched, "node-constraints", None, True)
        biggest = max(clusters, key=lambda c: (empty_capacity(c, job).get(GPU), c.name)).name
        if any(lowest_feasible_tier(job, c) is not None for c in clusters):
            return Unplaced(job.name, f"no allowed cluster has a domain within the hard tier limit that could hold "
                            f"the gang ({size}) even when empty", "topology", biggest, True)
        narrowed = "; ".join(dict.fromkeys(c.describe() for c in job.node_constraints if c.selective))
        on = f" on the nodes its {narrowed} allows" if narrowed else ""
        return Unplaced(job.name, f"the gang ({size}) is larger than any allowed cluster could hold{on} even when "
                        "empty (pod-level packing)", "unschedulable", biggest, True)
    if not rnd.ledger.capability_ok(job):
        return Unplaced(job.name, f"queue {job.queue} would exceed its capability", "queue-capability", ever[0])
    if not rnd.ledger.guarantee_ok(job):
        return Unplaced(job.name, "the free capacity is held for other queues' unused guarantees", "fairness",
                        ever[0])
    kept = _kept_for_another(rnd, job, ever)
    if kept is not None:
        return kept
    wait = rnd.waiting_tier(job)
    if wait is not None:
        during = (f"room held for it there after it waited over {rnd.tier_reserved[job.name]:g} s"
                  if job.name in rnd.tier_reserved else f"during its {rnd.wait_of(job).describe()}")
        for group in rnd.groups(job):
            wider = rnd.find_home(job, tuple(n for n in group if n in ever), waiting=False)
            if wider is not None:
                return Unplaced(job.name, f"holding out for a tier-{wait} domain, {during}; room exists now at "
                                f"tier {wider[0].tier} in {wider[0].cluster.name}", "topology",
                                wider[0].cluster.name)
    start = _fits_at_start(rnd, job, ever)
    if start is not None:
        return Unplaced(job.name, f"it fitted in {start} at the start of the round, but work of higher or equal "
                        "priority (or of queues further below their fair share) took the room", "priority", start)
    if job.network_topology is not None and job.network_topology.hard:
        for group in rnd.groups(job):
            above = rnd.find_home(job, tuple(n for n in group if n in ever), ignore_limit=True)
            if above is not None:
                return Unplaced(job.name, f"room exists in {above[0].cluster.name} only above the hard tier "
                                "limit", "topology", above[0].cluster.name)
    excluded = _excluded_with_room(rnd, job, set(names))
    if excluded is not None:
        name, why = excluded
        text = "its cluster affinity excludes" if why == "affinity" else "it does not tolerate the taints of"
        return Unplaced(job.name, f"no allowed cluster has room now; {text} {name}, which has", why, name)
    return Unplaced(job.name, f"no allowed cluster has room for the whole gang ({size}) right now",
                    "capacity", _freest(rnd, ever))


def _excluded_with_room(rnd: PlanningRound, job: Job, allowed: set[str]) -> tuple[str, str] | None:
    """A healthy cluster closed to the job only by affinity or taints that could hold it now."""
    terms = affinity_terms(job)
    for cluster in rnd.snapshot.clusters:
        if cluster.name in allowed or not cluster.healthy:
            continue
        blocks = {cluster_block(job, cluster, t) for t in terms}
        why = "taints" if "taints" in blocks else "affinity"
        if rnd.find_home(job, (cluster.name,)) is not None:
            return cluster.name, why
    return None


class Diagnoses:
    """Memoised ``diagnose`` for identical jobs at the end of a round."""

    def __init__(self, rnd: PlanningRound) -> None:
        self.rnd = rnd
        self._cache: dict[object, Unplaced] = {}

    def __call__(self, job: Job) -> Unplaced:
        rnd = self.rnd
        # Everything the reason reads of the job: its gang shape (minimums included), its
        # whole size (the text counts every replica), queue, band, topology and its wait,
        # policy, and what this round held or barred for it.
        key = (rnd.ledger.shapes(job), tuple(t.replicas for t in job.tasks), job.queue, job.priority,
               job.network_topology, job.topology_wait_seconds, job.propagation, rnd.waiting_tier(job),
               rnd.barred.get(job.name), rnd.holds_room(job.name), job.name in rnd.tier_reserved)
        found = self._cache.get(key)
        if found is None:
            found = diagnose(self.rnd, job)
            self._cache[key] = found
        return Unplaced(job.name, found.reason, found.constraint, found.closest_cluster, found.unschedulable)
