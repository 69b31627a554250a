"""Solver-agnostic plan checker: every hard rule, re-derived from the snapshot alone.

Why independent of the planners: the CP-SAT model reasons about aggregates and a repair
pass packs pods afterwards; a bug in either would silently overcommit nodes. ``validate``
recomputes node usage pod by pod from the snapshot and the plan, so every planner test
(ours and the baselines') can assert ``validate(snapshot, plan) == []``.
"""

from __future__ import annotations

from collections.abc import Iterator

from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import BLOCKED_BY, FederationSnapshot, Placement, Plan, PlanLimits, PodAssignment
from federation.domain.resources import Resources
from federation.domain.topology import Domain
from federation.placement.elastic import placed_requests
from federation.placement.eligibility import (
    affinity_terms,
    cluster_block,
    exclusive_mask,
    node_masks,
    pod_classes,
    tier_limit,
)
from federation.placement.eviction import may_evict
from federation.placement.guarantees import guarantee_problems
from federation.placement.hierarchy import ancestors
from federation.placement.ledger import band_key, bands_of, queue_of
from federation.placement.opening import open_round
from federation.placement.packing import pack_masked, resource_keys, vector
from federation.placement.partitions import pack_partitioned, partition_problems, partitioned, strict_partitions
from federation.placement.tier_reserve import problems as reservation_problems


def _bookkeeping(snapshot: FederationSnapshot, plan: Plan) -> Iterator[str]:
    pending = {p.job.name for p in snapshot.pending}
    running = {r.job.name for r in snapshot.running}
    placed = [p.job for p in plan.placements]
    unplaced = [u.job for u in plan.unplaced]
    for name in {n for n in placed if placed.count(n) > 1}:
        yield f"job {name} is placed more than once"
    for name in {n for n in unplaced if unplaced.count(n) > 1}:
        yield f"job {name} is listed as unplaced more than once"
    for name in set(placed) & set(unplaced):
        yield f"job {name} is both placed and unplaced"
    for name in set(placed) & running:
        yield f"running job {name} is moved (running jobs are never re-placed)"
    for name in set(placed) - pending - running:
        yield f"placement of unknown job {name}"
    for name in set(unplaced) - pending:
        yield f"unplaced entry for unknown or non-pending job {name}"
    for name in pending - set(placed) - set(unplaced):
        yield f"pending job {name} is neither placed nor unplaced"
    for u in plan.unplaced:
        if u.constraint not in BLOCKED_BY:
            yield f"job {u.job}: unknown blocking constraint {u.constraint!r}"
        if not u.reason:
            yield f"job {u.job}: unplaced without a reason"
    victims = [v.job for v in plan.preemptions]
    for name in {n for n in victims if victims.count(n) > 1}:
        yield f"job {name} is preempted more than once"
    for name in set(victims) - running:
        yield f"preemption of {name}, which is not a running job"


def _placement(snapshot: FederationSnapshot, p: Placement, jobs: dict[str, Job],
               nodes: dict[str, dict[str, Node]]) -> Iterator[str]:
    job = jobs.get(p.job)
    cluster = snapshot.cluster(p.cluster)
    if job is None:
        return
    if cluster is None:
        yield f"job {p.job}: unknown cluster {p.cluster}"
        return
    if not cluster.healthy:
        yield f"job {p.job}: cluster {p.cluster} is unhealthy"
    blocks = [cluster_block(job, cluster, term) for term in affinity_terms(job)]
    if None not in blocks:
        yield f"job {p.job}: cluster {p.cluster} is not allowed ({', '.join(sorted({str(b) for b in blocks}))})"
    domain = cluster.tree.domains.get(p.hypernode)
    if domain is None:
        yield f"job {p.job}: unknown HyperNode {p.hypernode} in {p.cluster}"
        return
    if domain.tier != p.tier:
        yield f"job {p.job}: tier {p.tier} does not match HyperNode {p.hypernode} (tier {domain.tier})"
    limit = tier_limit(job, cluster)
    if limit is not None and domain.tier > limit:
        yield f"job {p.job}: HyperNode {p.hypernode} has tier {domain.tier} above the hard limit {limit}"
    wanted = sorted((t, i) for t, i, _ in job.pods())
    got = sorted((a.task, a.index) for a in p.pods)
    if not job.elastic and wanted != got:
        yield f"job {p.job}: pods {got} do not match the gang's pods {wanted} (all replicas, each once)"
    elif job.elastic:  # an elastic gang: at least minAvailable pods and every task's own minimum
        if len(set(got)) != len(got) or not set(got) <= set(wanted):
            yield f"job {p.job}: pods {got} are not distinct pods of the job"
        if len(got) < job.gang_size:
            yield f"job {p.job}: {len(got)} pods placed, fewer than minAvailable {job.gang_size}"
        for task in job.tasks:
            have = sum(1 for t, _ in got if t == task.name)
            if task.min_available is not None and have < task.min_available:
                yield f"job {p.job}: task {task.name} has {have} pods, fewer than its minAvailable {task.min_available}"
    known = nodes.setdefault(cluster.name, {n.name: n for n in cluster.nodes})
    yield from _pods(f"job {p.job}", job, p.pods, known, domain, set())
    yield from partition_problems(f"job {p.job}", job, cluster.tree, p.pods)


def _pods(who: str, job: Job, pods: tuple[PodAssignment, ...], known: dict[str, Node], domain: Domain,
          exclusive: set[tuple[str, str]]) -> Iterator[str]:
    """Each pod on a known, usable node its task allows, inside ``domain``, and at most one
    per node for a task with required pod anti-affinity (``exclusive``: (task, node) taken)."""
    constraints = {t.name: c for t, c in zip(job.tasks, job.node_constraints, strict=True)}
    for a in pods:
        node = known.get(a.node)
        c = constraints.get(a.task)
        if node is None:
            yield f"{who}: pod {a.task}-{a.index} on unknown node {a.node}"
        elif not node.usable:
            yield f"{who}: pod {a.task}-{a.index} on node {a.node} that is not ready or cordoned"
        elif c is not None and not c.allows(node):
            yield f"{who}: pod {a.task}-{a.index} on node {a.node} that its {c.describe()} excludes"
        elif a.node not in domain.nodes:
            yield f"{who}: pod {a.task}-{a.index} on node {a.node} outside HyperNode {domain.name}"
        if c is not None and c.one_per_node:
            if (a.task, a.node) in exclusive:
                yield f"{who}: two pods of task {a.task} on node {a.node} (required pod anti-affinity)"
            exclusive.add((a.task, a.node))


def _capacity(snapshot: FederationSnapshot, plan: Plan) -> Iterator[str]:
    running = {r.job.name: r for r in snapshot.running}
    jobs = {p.job.name: p.job for p in snapshot.pending}
    delta: dict[tuple[str, str], Resources] = {}
    for v in plan.preemptions:
        r = running.get(v.job)
        if r is None:
            continue
        req = {(t, i): res for t, i, res in r.job.pods()}
        for a in r.placement.pods:
            key = (r.placement.cluster, a.node)
            delta[key] = delta.get(key, Resources()) + req.get((a.task, a.index), Resources())
    jobs.update({r.job.name: r.job for r in snapshot.running})
    for p in (*plan.placements, *plan.growths):
        job = jobs.get(p.job)
        if job is None:
            continue
        req = {(t, i): res for t, i, res in job.pods()}
        for a in p.pods:
            key = (p.cluster, a.node)
            delta[key] = delta.get(key, Resources()) - req.get((a.task, a.index), Resources())
    index: dict[str, dict[str, Node]] = {}
    for (cname, nname), change in sorted(delta.items()):
        if cname not in index:
            found = snapshot.cluster(cname)
            index[cname] = {n.name: n for n in found.nodes} if found is not None else {}
        node = index[cname].get(nname)
        if node is None:
            continue
        after = node.free + change
        short = {k: -v for k, v in after if v < 0 and change.get(k) < 0}
        if short:
            yield f"node {cname}/{nname} is overcommitted by {short}"


def _queues(snapshot: FederationSnapshot, plan: Plan) -> Iterator[str]:
    """No queue, and no parent over its whole subtree, ends above its capability where the
    plan added work (usage counts the pods that run: an elastic job may run fewer)."""
    jobs = {p.job.name: p.job for p in snapshot.pending}
    running = {r.job.name: r for r in snapshot.running}
    queues = {q.name: q for q in snapshot.queues}
    usage: dict[str, Resources] = {}
    added: dict[str, Resources] = {}
    for r in snapshot.running:
        usage[r.job.queue] = usage.get(r.job.queue, Resources()) + placed_requests(r.job, r.placement.pods)
    for v in plan.preemptions:
        if v.job in running:
            r = running[v.job]
            usage[r.job.queue] = usage.get(r.job.queue, Resources()) - placed_requests(r.job, r.placement.pods)
    for p in (*plan.placements, *plan.growths):
        job = jobs[p.job] if p.job in jobs else running[p.job].job if p.job in running else None
        if job is not None:
            req = placed_requests(job, p.pods)
            for name in (job.queue, *ancestors(queues, job.queue)):
                usage[name] = usage.get(name, Resources()) + req
                added[name] = added.get(name, Resources()) + req
    for r in snapshot.running:  # the running usage of a subtree, for its parents
        for name in ancestors(queues, r.job.queue):
            usage[name] = usage.get(name, Resources()) + placed_requests(r.job, r.placement.pods)
    for v in plan.preemptions:
        if v.job in running:
            r = running[v.job]
            for name in ancestors(queues, r.job.queue):
                usage[name] = usage.get(name, Resources()) - placed_requests(r.job, r.placement.pods)
    for name, more in sorted(added.items()):
        cap = queue_of(snapshot, name).capability
        if cap is None:
            continue
        over = {k: usage[name].get(k) - v for k, v in cap if more.get(k) > 0 and usage[name].get(k) > v}
        if over:
            yield f"queue {name} exceeds its capability by {over}"


def _evictions(snapshot: FederationSnapshot, plan: Plan) -> Iterator[str]:
    """Every victim may be evicted (``eviction.may_evict``) by its recorded preemptor, or,
    when none is recorded, by some gang the plan places. The share conditions (taker below,
    victim's queue above its fair share) depend on when in the round the planner looked
    and are taken as met; queues, bands and priorities are checked."""
    if not plan.preemptions:
        return
    rank = {key: i for i, key in enumerate(bands_of(snapshot).order)}
    running = {r.job.name: r.job for r in snapshot.running}
    pending = {p.job.name: p.job for p in snapshot.pending}
    placed = [pending[p.job] for p in plan.placements if p.job in pending]

    def may(taker: Job, victim: Job) -> bool:
        return may_evict(queue_of(snapshot, taker.queue), rank[band_key(snapshot, taker)], True,
                         queue_of(snapshot, victim.queue), rank[band_key(snapshot, victim)], True) is not None

    for v in plan.preemptions:
        victim = running.get(v.job)
        if victim is None:
            continue  # reported by _bookkeeping
        if v.preemptor is not None:
            taker = pending.get(v.preemptor)
            if taker is None:
                yield f"preemption of {v.job} for {v.preemptor}, which is not a pending job"
            elif not may(taker, victim):
                yield f"job {v.preemptor} may not evict {v.job} (queue, priority band or reclaimable)"
        elif not any(may(taker, victim) for taker in placed):
            yield f"job {v.job} is evicted but no job the plan places may evict it"


def _fallback(snapshot: FederationSnapshot, plan: Plan) -> Iterator[str]:
    """A job placed in a later affinity group must not fit in any cluster of an earlier group.

    Checked against the plan's final node usage (with the job's own pods removed): if the
    gang still packs into an earlier group's cluster at the end, it could have gone there.
    """
    jobs = {p.job.name: p.job for p in snapshot.pending}
    late = [p for p in plan.placements if p.job in jobs and len(affinity_terms(jobs[p.job])) > 1]
    if not late:
        return
    free: dict[tuple[str, str], Resources] = {}
    for c in snapshot.clusters:
        for n in c.nodes:
            free[(c.name, n.name)] = n.free
    for p in plan.placements:
        job = jobs.get(p.job)
        if job is not None:
            req = {(t, i): res for t, i, res in job.pods()}
            for a in p.pods:
                free[(p.cluster, a.node)] = free.get((p.cluster, a.node), Resources()) - req[(a.task, a.index)]
    for p in late:
        earlier = _earlier_fit(snapshot, jobs[p.job], p, free)
        if earlier is not None:
            yield f"job {p.job}: placed via a later cluster affinity although {earlier} of an earlier group can hold it"


def _earlier_fit(
    snapshot: FederationSnapshot, job: Job, p: Placement, free: dict[tuple[str, str], Resources]
) -> str | None:
    own = snapshot.cluster(p.cluster)
    for term in affinity_terms(job):
        if term is None or (own is not None and term.matches(own.name, own.labels)):
            return None
        for c in snapshot.clusters:
            if cluster_block(job, c, term) is not None or c.name == p.cluster:
                continue
            masks = node_masks(c, job)
            pods = job.gang_pods()
            keys = resource_keys(r for _, _, r in pods)
            demands = [vector(r, keys) for _, _, r in pods]
            for dom in c.tree.domains_up_to(tier_limit(job, c)):
                buckets: dict[tuple[tuple[int, ...], int], list[str]] = {}
                for name in dom.nodes:
                    if name in masks:
                        buckets.setdefault((vector(free[(c.name, name)], keys), masks[name]), []).append(name)
                if not buckets:
                    continue
                if partitioned(job):
                    room = {n: vector(free[(c.name, n)], keys) for n in dom.nodes if n in masks}
                    if pack_partitioned(job, [(t, i) for t, i, _ in pods], demands, pod_classes(job), c.tree, dom,
                                        room, masks, exclusive_mask(job)) is not None:
                        return c.name
                    if strict_partitions(job):
                        continue
                if pack_masked(demands, pod_classes(job), buckets, exclusive_mask(job)) is not None:
                    return c.name
    return None


def _growths(snapshot: FederationSnapshot, plan: Plan, nodes: dict[str, dict[str, Node]]) -> Iterator[str]:
    """A growth adds pods of a running elastic job that it does not run yet, inside the
    cluster and HyperNode it runs in, on nodes the pods' tasks allow (placement/growth.py)."""
    running = {r.job.name: r for r in snapshot.running}
    preempted = {v.job for v in plan.preemptions}
    seen: set[str] = set()
    for g in plan.growths:
        run = running.get(g.job)
        if run is None or g.job in preempted:
            yield f"growth of {g.job}, which is not a running job (or is preempted)"
            continue
        if g.job in seen:
            yield f"job {g.job} grows more than once"
        seen.add(g.job)
        was = run.placement
        if (g.cluster, g.hypernode) != (was.cluster, was.hypernode):
            yield (f"growth of {g.job} moves it to {g.cluster}/{g.hypernode} "
                   f"(it runs in {was.cluster}/{was.hypernode}; running jobs are never moved)")
            continue
        have = {(a.task, a.index) for a in was.pods}
        added = [(a.task, a.index) for a in g.pods]
        if not g.pods or any(k in have for k in added) or len(set(added)) != len(added):
            yield f"growth of {g.job}: pods {sorted(added)} are not new, distinct pods"
        if not set(added) <= {(t, i) for t, i, _ in run.job.pods()}:
            yield f"growth of {g.job}: pods {sorted(added)} are not all pods of the job"
        cluster = snapshot.cluster(g.cluster)
        domain = cluster.tree.domains.get(g.hypernode) if cluster is not None else None
        if cluster is None or domain is None:
            yield f"growth of {g.job}: unknown HyperNode {g.hypernode} in {g.cluster}"
            continue
        if not cluster.healthy:
            yield f"growth of {g.job}: cluster {g.cluster} is unhealthy"
        known = nodes.setdefault(cluster.name, {n.name: n for n in cluster.nodes})
        yield from _pods(f"growth of {g.job}", run.job, g.pods, known, domain, {(a.task, a.node) for a in was.pods})
        yield from partition_problems(f"growth of {g.job}", run.job, cluster.tree, g.pods)  # whole new partitions


def validate(snapshot: FederationSnapshot, plan: Plan, limits: PlanLimits | None = None) -> list[str]:
    """Every violated rule as a readable sentence; ``[]`` means the plan is valid.

    With ``limits``, the room their policy holds on this snapshot must be respected too
    (``tier_reserve.problems``: reserved gangs at their lowest tier, held nodes left to
    their holder); without, only the hard rules, which hold under every policy."""
    problems = list(_bookkeeping(snapshot, plan))
    jobs = {x.job.name: x.job for x in snapshot.pending}
    nodes: dict[str, dict[str, Node]] = {}
    for p in plan.placements:
        problems.extend(_placement(snapshot, p, jobs, nodes))
    problems.extend(_growths(snapshot, plan, nodes))
    problems.extend(_capacity(snapshot, plan))
    problems.extend(_queues(snapshot, plan))
    problems.extend(_evictions(snapshot, plan))
    problems.extend(guarantee_problems(snapshot, plan))
    problems.extend(_fallback(snapshot, plan))
    if limits is not None:
        problems.extend(reservation_problems(open_round(snapshot, limits), plan))
    return problems
