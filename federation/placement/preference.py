"""Preferred node affinity: a soft term of the objective, below topology.

Kubernetes scores a node by the summed weights of the ``preferredDuringScheduling…``
terms it matches (``NodeAffinity`` score plugin, kubernetes/kubernetes
``pkg/scheduler/framework/plugins/nodeaffinity``), normalised over the candidate nodes.
We place gangs into domains, so the preference is scored per domain: for each task with
preferred terms, the mean over the domain's usable nodes that the task may use of
``matched weight / total weight``; averaged over those tasks and scaled to
``0..PREFER_MAX`` points per unit.

Why ``PREFER_MAX`` is what is left under one tier step: a placement's value is ``VALUE``
minus ``TIER_PENALTY`` per tier step, minus packing (``leftover``, up to
``PACK_PENALTY_MAX``) and anticipation (``guard``, up to ``GUARD_MAX``). A preferred domain
one tier higher must never beat the lower tier even when the lower one costs the most
packing and anticipation, so ``PREFER_MAX + PACK_PENALTY_MAX + GUARD_MAX < TIER_PENALTY``.
Between domains of one tier the preference decides when packing and anticipation differ
by less than it, or not at all. Inside the chosen domain, the preferred nodes are tried
first (``PlanningRound.pack``).
"""

from __future__ import annotations

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.scheduling import NodeConstraints


def domain_preference(cluster: ClusterSnapshot, hypernode: str, constraints: tuple[NodeConstraints, ...],
                      scale: int) -> int:
    """``0..scale``: how well the domain's nodes match the tasks' preferred node affinity."""
    prefs = [c for c in constraints if c.preferred]
    domain = cluster.tree.domains.get(hypernode)
    if not prefs or domain is None or scale <= 0:
        return 0
    nodes = [n for n in cluster.nodes if n.name in domain.nodes and n.usable]
    total = 0.0
    for c in prefs:
        weight = sum(w for w, _ in c.preferred)
        usable = [n for n in nodes if c.allows(n)]
        if usable and weight > 0:
            total += sum(c.preference(n) for n in usable) / (weight * len(usable))
    return round(scale * total / len(prefs))


def prefers(job: Job) -> bool:
    """Whether any task of ``job`` carries preferred node affinity."""
    return any(c.preferred for c in job.node_constraints)
