"""Elastic gangs: start with the gang, plus as many further replicas as fit in its domain.

Volcano's gang plugin admits a job once ``minAvailable`` pods (and every task's own
``minAvailable``) can be bound; the other replicas are scheduled as room allows, in the
same job (volcano-sh/volcano ``pkg/scheduler/plugins/gang``, ``docs/design/elastic-
scheduler.md``). Here the domain a gang may use is chosen for its *gang* pods only
(``Job.gang_pods``), so an elastic job is never held back for room it does not need;
once chosen, ``extra_pods`` adds the remaining replicas, largest first, onto nodes of the
same domain their task may use (never outside it: the network-topology promise covers
every pod of the job). Queue capability bounds the extras too. A partitioned task's
extras are whole partitions, each inside one HyperNode it may use (placement/
partitions.py), as Volcano allocates a partition only whole. Growing a running job in
later rounds uses the same function on the job's own domain (placement/growth.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from federation.domain.jobs import Job
from federation.domain.partitions import partition_groups
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.placement.eligibility import exclusive_mask, node_masks
from federation.placement.packing import Vector, vector
from federation.placement.partitions import pack_partitioned

if TYPE_CHECKING:
    from federation.placement.rounds import PlanningRound
    from federation.placement.state import DomainState


def extra_pods(rnd: PlanningRound, job: Job, dom: DomainState, placed: tuple[PodAssignment, ...],
               running: bool = False) -> list[PodAssignment]:
    """Replicas beyond ``placed`` that fit in ``dom`` now (room is taken for each).

    ``running``: ``job`` already runs ``placed`` and the ledger already charges its queue
    for them (a growth, placement/growth.py); otherwise ``placed`` is the gang the round is
    committing and is charged here on top of the queue's usage.
    """
    st = rnd.state
    cluster = dom.cluster.name
    frees = st.node_free[cluster]
    masks = node_masks(dom.cluster, job)
    allowed = rnd.allowed_nodes(dom.cluster, job)
    exclusive = {t.name for t, c in zip(job.tasks, job.node_constraints, strict=True) if c.one_per_node}
    taken = {(a.task, a.node) for a in placed if a.task in exclusive}
    have = {(a.task, a.index) for a in placed}
    cap = rnd.ledger.queues[job.queue].capability
    used = rnd.ledger.usage[job.queue] if running else rnd.ledger.usage[job.queue] + rnd.ledger.req(job)
    index = {t.name: i for i, t in enumerate(job.tasks)}
    partitions = {t.name for t in job.tasks if t.partition_policy is not None}
    extras = sorted(((t, i, r) for t, i, r in job.pods() if (t, i) not in have and t not in partitions),
                    key=lambda p: (vector(p[2], st.keys), -index[p[0]], -p[1]), reverse=True)
    out: list[PodAssignment] = []
    for task, i, res in extras:
        if cap is not None and not all((used + res).get(k) <= v for k, v in cap if res.get(k) > 0):
            continue
        need = vector(res, st.keys)
        bit = 1 << index[task]
        best: tuple[Vector, str] | None = None
        for name in dom.nodes:
            if not masks.get(name, 0) & bit or (allowed is not None and name not in allowed):
                continue
            if task in exclusive and (task, name) in taken:
                continue
            left = tuple(f - n for f, n in zip(frees[name], need, strict=True))
            if min(left, default=0) >= 0 and (best is None or (left, name) < best):
                best = (left, name)
        if best is None:
            continue
        st.take(cluster, [(best[1], need)])
        used = used + res
        if task in exclusive:
            taken.add((task, best[1]))
        out.append(PodAssignment(task, i, best[1]))
    if partitions:
        out += _extra_partitions(rnd, job, dom, have, used, taken)
    return out


def _extra_partitions(rnd: PlanningRound, job: Job, dom: DomainState, have: set[tuple[str, int]],
                      used: Resources, taken: set[tuple[str, str]]) -> list[PodAssignment]:
    """Whole partitions of which no pod runs yet, in order, each where ``pack_partitioned``
    puts it in ``dom`` now and within the queue's capability (room is taken for each)."""
    st = rnd.state
    cluster = dom.cluster.name
    cap = rnd.ledger.queues[job.queue].capability
    allowed = rnd.allowed_nodes(dom.cluster, job)
    masks = {n: m for n, m in node_masks(dom.cluster, job).items() if allowed is None or n in allowed}
    index = {t.name: i for i, t in enumerate(job.tasks)}
    requests = {t.name: t.resources for t in job.tasks}
    exclusive = exclusive_mask(job)
    started = {(t, p) for (t, p) in partition_groups(job, have)}
    out: list[PodAssignment] = []
    for (task, part), keys in partition_groups(job, ((t, i) for t, i, _ in job.pods())).items():
        if (task, part) in started:
            continue
        need = requests[task].scaled(len(keys))
        if cap is not None and not all((used + need).get(k) <= v for k, v in cap if need.get(k) > 0):
            continue
        bit = 1 << index[task]
        here = {n: (m & ~bit if (task, n) in taken and bit & exclusive else m) for n, m in masks.items()}
        vec = vector(requests[task], st.keys)
        found = pack_partitioned(job, keys, [vec] * len(keys), [index[task]] * len(keys), dom.cluster.tree,
                                 dom.domain, st.node_free[cluster], {n: m for n, m in here.items() if m}, exclusive)
        if found is None:
            continue
        st.take(cluster, [(n, vec) for n in found])
        used = used + need
        taken.update((task, n) for n in found)
        out += [PodAssignment(t, i, n) for (t, i), n in zip(keys, found, strict=True)]
    return out


def placed_requests(job: Job, pods: tuple[PodAssignment, ...]) -> Resources:
    """Summed requests of the pods a placement starts (what runs, for fair share)."""
    res = {t.name: t.resources for t in job.tasks}
    acc: dict[str, int] = {}
    for a in pods:
        for k, v in res[a.task].amounts.items():
            acc[k] = acc.get(k, 0) + v
    return Resources(acc)
