"""The cluster as every job's pass sees it: nodes with their free room, the HyperNode
tree, and the pods grouped by job, built once per change of the cluster.

A pass reconciles each active job in turn, and each job needs the whole cluster: free
room depends on every pod, and the tree on every node and HyperNode. Built per job, that
cost (jobs x cluster) ran on the event loop on every watch event: 4.6 s of CPU per pass
for 50 jobs on 2,000 nodes (docs/benchmarks.md, "Agent pass over many jobs"), which also
starves the Lease renewals that share the loop. The view depends only on what the
backend holds, so it is kept for as long as the backend's ``revision`` says nothing
changed; a job's own writes and every watch event change the revision, so a job's pass
never sees room another job's pass has just taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agents.backend import ClusterBackend
from agents.core.records import LABEL_JOB, PodRecord
from agents.core.snapshot import build_snapshot, to_nodes
from federation.domain.errors import InvalidInput
from federation.domain.nodes import Node
from federation.domain.topology import HyperNodeTree


@dataclass(frozen=True)
class ClusterView:
    revision: int
    nodes: tuple[Node, ...]  # free = allocatable - requests of every non-terminal pod on it
    tree: HyperNodeTree | None  # None: the HyperNodes are unreadable or form no valid tree now
    pods_by_job: Mapping[str, tuple[PodRecord, ...]]

    def job_pods(self, job: str) -> tuple[PodRecord, ...]:
        return self.pods_by_job.get(job, ())


async def read_view(backend: ClusterBackend, label_keys: Sequence[str]) -> ClusterView:
    """Everything a job's pass reads of the whole cluster, at the backend's revision now.

    The revision is taken before the reads: a change that lands while they run moves it
    on, so the next caller rebuilds rather than trust a view that may have missed it."""
    revision = backend.revision
    pods = await backend.list_pods({})
    nodes = await backend.list_nodes()
    try:
        specs = await backend.list_hypernodes()
    except InvalidInput:
        specs = None
    result = build_snapshot(backend.cluster, nodes, pods, specs or (), label_keys=label_keys)
    if result.snapshot is not None:
        domain_nodes, tree = result.snapshot.nodes, result.snapshot.tree if specs is not None else None
    else:
        domain_nodes, tree = to_nodes(nodes, pods), None
    by_job: dict[str, list[PodRecord]] = {}
    for pod in pods:
        job = pod.labels.get(LABEL_JOB)
        if job is not None:
            by_job.setdefault(job, []).append(pod)
    return ClusterView(revision, domain_nodes, tree, {job: tuple(p) for job, p in by_job.items()})


class ClusterViews:
    """The latest view of one backend, reused while its revision stands. Owned by the
    runtime's job book and shared by every job's controller."""

    def __init__(self) -> None:
        self._latest: tuple[ClusterBackend, tuple[str, ...], ClusterView] | None = None
        self.builds = 0  # how many views were built (tests and benchmarks read it)

    async def get(self, backend: ClusterBackend, label_keys: Sequence[str]) -> ClusterView:
        keys = tuple(label_keys)
        latest = self._latest
        if latest is not None and latest[0] is backend and latest[1] == keys and latest[2].revision == backend.revision:
            return latest[2]
        view = await read_view(backend, keys)
        self.builds += 1
        self._latest = (backend, keys, view)
        return view
