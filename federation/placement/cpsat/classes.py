"""Aggregation of identical jobs into classes, and candidate-domain pruning.

Why: a model with one variable per (job, cluster, node) has 2,000 x 10,000 x pods
entries and would not even be built in a second. Two reductions make it small:

* **classes** — jobs with the same pod shapes, queue, priority band, topology request,
  propagation policy and tolerations are interchangeable for the objective and every
  constraint, so one integer variable per (class, domain) counts how many of them go there;
  the concrete jobs are handed out in submission order when decoding;
* **candidates** — per class only domains of the first affinity group that can hold the
  gang (Karmada fallback), within the hard tier limit, with room now (or after evicting
  eligible victims), ranked lowest tier first then tightest fit, and cut to the best
  ``CANDIDATES_BASE + 2 x jobs`` (the domain the greedy hint chose is always kept, so the
  hint stays feasible). Identical domains are interchangeable too, which is why keeping
  only the tightest few loses little.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from federation.domain.jobs import Job
from federation.domain.plans import Placement, RunningJob
from federation.placement.packing import Vector, vector
from federation.placement.rounds import PlanningRound

CANDIDATES_BASE = 6
CANDIDATES_MAX = 48


@dataclass
class JobClass:
    """Interchangeable pending jobs and where the model may put them."""

    uid: int
    jobs: list[Job]
    band: int
    queue: str
    units: int
    pods: list[Vector]
    need: Vector
    tasks: list[tuple[str, int, Vector]]
    group: tuple[str, ...] = ()
    candidates: list[int] = field(default_factory=list)
    cap: dict[int, int] = field(default_factory=dict)
    may_evict: bool = False  # waited out the preemption grace: may be a preemptor


def class_key(rnd: PlanningRound, job: Job) -> tuple[object, ...]:
    shape = tuple((t.name, n, t.resources) for t, n in zip(job.tasks, job.gang_counts, strict=True))
    return (shape, job.queue, rnd.scoring.band(job), job.network_topology, job.propagation, job.node_constraints,
            rnd.barred.get(job.name), job.name in rnd.may_evict, rnd.waiting_tier(job),
            tuple(t.partition_policy for t in job.tasks))


def group_jobs(rnd: PlanningRound, jobs: Iterable[Job]) -> list[JobClass]:
    classes: dict[tuple[object, ...], JobClass] = {}
    for job in jobs:
        key = class_key(rnd, job)
        found = classes.get(key)
        if found is None:
            pods, need = rnd.demand(job)
            tasks = [(t.name, n, vector(t.resources, rnd.state.keys))
                     for t, n in zip(job.tasks, job.gang_counts, strict=True)]
            found = JobClass(len(classes), [], rnd.scoring.band(job), job.queue, rnd.scoring.units(job), pods, need,
                             tasks, may_evict=job.name in rnd.may_evict)
            classes[key] = found
        found.jobs.append(job)
    return list(classes.values())


def victim_room(rnd: PlanningRound, victims: Sequence[RunningJob]) -> dict[int, list[int]]:
    """Per domain id: the resources that evicting every potential victim would free."""
    room: dict[int, list[int]] = {}
    st = rnd.state
    for victim in victims:
        for node, vec in st.running_pods(victim):
            for uid in st.node_domains.get((victim.placement.cluster, node), ()):
                acc = room.setdefault(uid, [0] * len(st.keys))
                for i, v in enumerate(vec):
                    acc[i] += v
    return room


def _bound(rnd: PlanningRound, jc: JobClass, uid: int, extra: list[int] | None) -> int:
    """Upper bound on how many gangs of ``jc`` domain ``uid`` could hold (aggregate + slots)."""
    dom = rnd.state.domains[uid]
    best = len(jc.jobs)
    for i, need in enumerate(jc.need):
        if need > 0:
            best = min(best, (dom.free[i] + (extra[i] if extra else 0)) // need)
    if extra is None:
        ix, wanted = rnd.state.probe(jc.pods, jc.need)
        if ix > 0 and wanted > 0:
            best = min(best, dom.index[ix] // wanted)
        allowed = rnd.allowed_nodes(dom.cluster, jc.jobs[0])
        if allowed is not None and best > 0:  # node constraints: count only the nodes it may use
            frees = rnd.state.node_free[dom.cluster.name]
            for i, need in enumerate(jc.need):
                if need > 0:
                    best = min(best, sum(frees[n][i] for n in dom.nodes if n in allowed) // need)
    return max(0, best)


def choose_group(rnd: PlanningRound, jc: JobClass, room: Mapping[int, list[int]]) -> tuple[str, ...]:
    """The first affinity group that can hold one gang now (or after evictions)."""
    job = jc.jobs[0]
    groups = [g for g in rnd.groups(job) if g]
    for names in groups:
        if rnd.find_home(job, names) is not None:
            return names
    for names in groups:
        if any(uid in room for n in names for uid in rnd.state.cluster_domains.get(n, ())):
            return names
    return ()


def _domains(rnd: PlanningRound, jc: JobClass, room: Mapping[int, list[int]], prune: bool) -> Iterable[int]:
    """Domain ids worth scoring: all of the group's when not pruning, else per tier the
    tightest ones that pass the slot probe now, plus those only evictions could open."""
    st = rnd.state
    if not prune:
        for name in jc.group:
            yield from st.cluster_domains.get(name, ())
        return
    per_tier = min(CANDIDATES_MAX, CANDIDATES_BASE + 2 * len(jc.jobs))
    probe = st.probe(jc.pods, jc.need)
    for tier in st.tiers:
        taken = 0
        for dom in st.candidates(tier, probe, jc.group):
            if dom.cluster.name in jc.group and all(f >= n for f, n in zip(dom.free, jc.need, strict=True)):
                yield dom.uid
                taken += 1
                if taken >= per_tier:
                    break
    groups = set(jc.group)
    for uid in room:
        if st.domains[uid].cluster.name in groups:
            yield uid


def attach_candidates(
    rnd: PlanningRound, jc: JobClass, room: Mapping[int, list[int]], keep: Iterable[int], prune: bool,
    within: frozenset[str] | None = None,
) -> None:
    """Fill ``jc.group``, ``jc.candidates`` and ``jc.cap`` (see module docstring).

    ``within`` (a large-neighbourhood window) keeps only those clusters of the chosen
    group, so pruning ranks the tightest domains *inside* the window rather than
    federation-wide ones that would then all be dropped."""
    jc.group = choose_group(rnd, jc, room)
    if within is not None:
        jc.group = tuple(c for c in jc.group if c in within)
    st = rnd.state
    ix, _ = st.probe(jc.pods, jc.need)
    limits: dict[str, int | None] = {}
    scored: dict[int, tuple[int, int, int]] = {}
    for uid in _domains(rnd, jc, room, prune):
        if uid in scored:
            continue
        dom = st.domains[uid]
        name = dom.cluster.name
        if name not in limits:
            limits[name] = rnd.tier_cap(jc.jobs[0], st.clusters[name])
        limit = limits[name]
        if limit is not None and dom.tier > limit:
            continue
        now = _bound(rnd, jc, uid, None)
        later = now if now or uid not in room else _bound(rnd, jc, uid, room[uid])
        if later <= 0:
            continue
        scored[uid] = (dom.tier, 0 if now else 1, dom.index[ix])
        jc.cap[uid] = later
    ranked = sorted(scored, key=lambda u: (scored[u], u))
    cut = min(CANDIDATES_MAX, CANDIDATES_BASE + 2 * len(jc.jobs)) if prune else len(ranked)
    chosen = ranked[:cut]
    kept: dict[int, int] = {}
    for uid in keep:
        kept[uid] = kept.get(uid, 0) + 1
        if uid not in chosen:
            chosen.append(uid)
    jc.candidates = chosen
    jc.cap = {u: max(kept.get(u, 0), 1, min(jc.cap.get(u, 0), len(jc.jobs))) for u in chosen}


def hint_domains(rnd: PlanningRound, jc: JobClass, hint: Mapping[str, Placement]) -> list[int]:
    out = []
    for job in jc.jobs:
        p = hint.get(job.name)
        if p is not None:
            uid = rnd.state.uid_of.get((p.cluster, p.hypernode))
            if uid is not None:
                out.append(uid)
    return out
