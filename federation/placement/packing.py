"""Pod-level packing of a gang onto concrete nodes (best-fit decreasing).

Why pod-level: a domain with 16 free GPUs spread as 2 per node over 8 nodes cannot host
two 8-GPU pods. Summed free capacity (what volcano-global checks, issue #32) admits such a
gang and the pods then sit Pending forever; so every placement the planner emits is
backed by an explicit pod -> node assignment computed here, and ``validate()`` re-checks
it node by node.

The algorithm is best-fit decreasing: pods are taken largest first (GPU, then CPU, then
memory, then anything else), each onto the node where it leaves the least room. Nodes
with identical free vectors are bucketed, so the cost is O(pods x distinct free vectors)
rather than O(pods x nodes) — on GPU fleets most nodes are either empty or full, which
keeps the bucket count tiny.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import sub

from federation.domain.nodes import Node
from federation.domain.plans import PodAssignment
from federation.domain.resources import CPU, GPU, MEMORY, Resources

Pod = tuple[str, int, Resources]
Vector = tuple[int, ...]

_FIRST = (GPU, CPU, MEMORY)


def resource_keys(requests: Iterable[Resources]) -> tuple[str, ...]:
    """The resources that matter for fitting ``requests``, scarcest-first (GPU, CPU, memory, rest)."""
    seen: set[str] = set()
    for req in requests:
        seen.update(req.amounts)
    return tuple(k for k in _FIRST if k in seen) + tuple(sorted(seen - set(_FIRST)))


def vector(res: Resources, keys: Sequence[str]) -> Vector:
    amounts = res.amounts
    return tuple(amounts.get(k, 0) for k in keys)


def pack_vectors(
    demands: Sequence[Vector], buckets: Mapping[Vector, Sequence[str]]
) -> list[str] | None:
    """Best-fit decreasing on plain vectors: node name per demand (same order), or None.

    ``buckets`` maps a free vector to the names of the nodes that currently have exactly
    that much free; it is not mutated.

    One search for both: every node allows the single class 0 (``pack_masked`` with one
    task bit), so the tie-breaking and bucket order are the same as in ``pack_masked``.
    """
    return pack_masked(demands, [0] * len(demands), {(v, 1): names for v, names in buckets.items()})


def pack_masked(
    demands: Sequence[Vector], classes: Sequence[int], buckets: Mapping[tuple[Vector, int], Sequence[str]],
    exclusive: int = 0,
) -> list[str] | None:
    """``pack_vectors`` when pods differ in the nodes they may use (per-task node constraints).

    ``classes[i]`` is the task index of demand ``i``; a bucket key is (free vector, mask of
    the task indices allowed on its nodes). A task whose bit is set in ``exclusive`` takes at
    most one node per pod (required pod anti-affinity on the hostname): once one of its pods
    lands on a node, the node's mask loses that bit. Best fit decreasing as above.
    """
    work: dict[tuple[Vector, int], list[str]] = {k: list(reversed(v)) for k, v in buckets.items() if v}
    order = sorted(range(len(demands)), key=demands.__getitem__, reverse=True)
    out: list[str] = [""] * len(demands)
    for i in order:
        need, bit = demands[i], 1 << classes[i]
        first = need[0] if need else 0
        best: tuple[Vector, int] | None = None
        best_left: Vector | None = None
        for have, mask in work:
            if not mask & bit or (first and have[0] < first):  # the scarcest resource first: most fail here
                continue
            left = tuple(map(sub, have, need))
            if min(left, default=0) >= 0 and (best_left is None or left < best_left):
                best, best_left = (have, mask), left
        if best is None or best_left is None:
            return None
        names = work[best]
        node = names.pop()
        if not names:
            del work[best]
        work.setdefault((best_left, best[1] & ~(bit & exclusive)), []).append(node)
        out[i] = node
    return out


def bucket_nodes(
    nodes: Iterable[Node], free: Mapping[str, Resources], keys: Sequence[str]
) -> dict[Vector, list[str]]:
    """Group node names by their free vector over ``keys`` (node order preserved)."""
    buckets: dict[Vector, list[str]] = {}
    for node in nodes:
        have = free.get(node.name, node.free)
        buckets.setdefault(vector(have, keys), []).append(node.name)
    return buckets


def pack_gang(
    pods: Sequence[Pod], nodes: Sequence[Node], free: Mapping[str, Resources]
) -> tuple[PodAssignment, ...] | None:
    """Place every pod of a gang on ``nodes`` at the same time, or return None.

    ``pods`` are ``(task, index, requests)``; ``free`` gives each node's current free
    resources (a node missing from it counts with its own ``Node.free``). Callers pass only
    the nodes the gang may use (usable, taints tolerated, inside the chosen domain).
    The result lists assignments in the order of ``pods``.
    """
    if not pods:
        return ()
    keys = resource_keys(p[2] for p in pods)
    demands = [vector(p[2], keys) for p in pods]
    chosen = pack_vectors(demands, bucket_nodes(nodes, free, keys))
    if chosen is None:
        return None
    return tuple(PodAssignment(p[0], p[1], n) for p, n in zip(pods, chosen, strict=True))


def usage_of(pods: Iterable[PodAssignment], requests: Mapping[tuple[str, int], Resources]) -> dict[str, Resources]:
    """Per-node usage of a set of pod assignments (``requests`` keyed by (task, index))."""
    acc: dict[str, Resources] = {}
    for pod in pods:
        req = requests[(pod.task, pod.index)]
        acc[pod.node] = acc[pod.node] + req if pod.node in acc else req
    return acc
