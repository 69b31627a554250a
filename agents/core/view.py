"""The cluster as every job's pass and every snapshot sees it: nodes with their free
room, the HyperNode tree, and the pods grouped by job, built once per change of the
cluster, off the event loop.

A pass reconciles each active job in turn, and each job needs the whole cluster: free
room depends on every pod, and the tree on every node and HyperNode. Built per job, that
cost (jobs x cluster) ran on the event loop on every watch event: 4.6 s of CPU per pass
for 50 jobs on 2,000 nodes (docs/benchmarks.md, "Agent pass over many jobs"), which also
starves the Lease renewals that share the loop. The view depends only on what the
backend holds, so it is kept for as long as the backend's ``revision`` says nothing
changed; a job's own writes and every watch event change the revision, so a job's pass
never sees room another job's pass has just taken.

Built once is still about a second of CPU at 20,000 nodes and 80,000 pods, and the
agent's Lease renewals, heartbeats and informers share its event loop: a loop held past
the renew deadline loses the Lease while this leader still acts. So only the reads (the
backend's caches, which the loop mutates) run on the loop; the build, a pure function of
the lists they return (immutable records), runs in a worker thread
(docs/design/agent.md, "The event loop at scale"). The snapshot the agent reports is the
same build (``snapshot`` below), so a snapshot taken at the revision of the last pass
costs only its encoding.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from agents.backend import ClusterBackend
from agents.core.records import LABEL_JOB, NodeRecord, PodRecord
from agents.core.snapshot import build_snapshot, to_nodes
from federation.domain.clusters import ClusterSnapshot
from federation.domain.errors import InvalidInput
from federation.domain.nodes import Node
from federation.domain.topology import HyperNodeSpec, HyperNodeTree


@dataclass(frozen=True)
class ClusterView:
    revision: int
    nodes: tuple[Node, ...]  # free = allocatable - requests of every non-terminal pod on it
    pods_by_job: Mapping[str, tuple[PodRecord, ...]]
    # What the reported snapshot is made of (agents/runtime_snapshots.py):
    hypernodes: tuple[HyperNodeSpec, ...] | None = None  # the HyperNode objects as read; None: unreadable
    ready: frozenset[str] = frozenset()  # the names of the nodes that are Ready, for every job's NodeLost
    snapshot: ClusterSnapshot | None = None  # the valid snapshot (no labels, taken_at 0); None: invalid tree
    error: str = ""  # why the tree is invalid ("" when it is valid)
    unreadable: str = ""  # why the HyperNode objects could not be read ("" when they could)

    def job_pods(self, job: str) -> tuple[PodRecord, ...]:
        return self.pods_by_job.get(job, ())

    @property
    def tree(self) -> HyperNodeTree | None:
        """The tree to bind in; None when the HyperNodes are unreadable or form no valid tree."""
        return self.snapshot.tree if self.snapshot is not None and self.hypernodes is not None else None


def build_view(cluster: str, revision: int, nodes: Sequence[NodeRecord], pods: Sequence[PodRecord],
               specs: Sequence[HyperNodeSpec] | InvalidInput, label_keys: Sequence[str]) -> ClusterView:
    """The view of what the reads returned (pure; runs in a worker thread)."""
    readable = not isinstance(specs, InvalidInput)
    explicit = tuple(specs) if not isinstance(specs, InvalidInput) else ()
    result = build_snapshot(cluster, nodes, pods, explicit, label_keys=label_keys)
    domain_nodes = result.snapshot.nodes if result.snapshot is not None else to_nodes(nodes, pods)
    by_job: dict[str, list[PodRecord]] = {}
    for pod in pods:
        job = pod.labels.get(LABEL_JOB)
        if job is not None:
            by_job.setdefault(job, []).append(pod)
    return ClusterView(revision, domain_nodes, {job: tuple(p) for job, p in by_job.items()},
                       hypernodes=explicit if readable else None, snapshot=result.snapshot, error=result.error,
                       unreadable="" if readable else str(specs),
                       ready=frozenset(n.name for n in domain_nodes if n.ready))


async def read_view(backend: ClusterBackend, label_keys: Sequence[str]) -> ClusterView:
    """Everything a job's pass reads of the whole cluster, at the backend's revision now.

    The revision is taken before the reads: a change that lands while they run (or while
    the build runs in its thread) moves it on, so the next caller rebuilds rather than
    trust a view that may have missed it."""
    revision = backend.revision
    pods = await backend.list_pods({})
    nodes = await backend.list_nodes()
    specs: list[HyperNodeSpec] | InvalidInput
    try:
        specs = await backend.list_hypernodes()
    except InvalidInput as exc:
        specs = exc
    return await asyncio.to_thread(build_view, backend.cluster, revision, nodes, pods, specs, tuple(label_keys))


# Inside a pass, a view is kept across changes made by others while it is younger than
# this many times what it took to build (ClusterViews).
REUSE_FACTOR = 2.0


class ClusterViews:
    """The latest view of one backend. Owned by the runtime's job book and shared by
    every job's controller and the snapshot loop.

    It is reused while the backend's revision stands. On a busy cluster, changes made by
    others (pod status updates) land between any two jobs of a pass and would rebuild it
    for each job: jobs x cluster of CPU again. So inside one pass (``one_pass``) it is
    also reused across others' changes while younger than ``REUSE_FACTOR`` times its own
    build time: rebuilding takes at most a third of the time, and a pass sees others'
    changes within about two builds (milliseconds on a few thousand nodes, about two
    seconds at 20,000). Others' changes can always land between a read and a bind; this
    bounds that window. Two things always rebuild it: this agent's own pod writes (a
    job's pass must see the room the job before it took or gave back), and a change made
    before the pass began (every watch event is followed by a pass that sees it, and
    outside a pass, as for the snapshot, the revision alone decides)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._latest: _Latest | None = None
        self._pass_floor: int | None = None  # the revision the current pass began at
        self.builds = 0  # how many views were built (tests and benchmarks read it)

    @contextlib.contextmanager
    def one_pass(self, backend: ClusterBackend) -> Iterator[None]:
        """The jobs of one pass: changes made by others after this point may be seen late
        (by up to the reuse window), never those made before it."""
        self._pass_floor = backend.revision
        try:
            yield
        finally:
            self._pass_floor = None

    async def get(self, backend: ClusterBackend, label_keys: Sequence[str]) -> ClusterView:
        keys = tuple(label_keys)
        latest = self._latest
        if latest is not None and latest.serves(backend, keys) and (
                latest.view.revision == backend.revision or self._lenient(latest)):
            return latest.view
        writes, started = backend.writes, self._clock()
        view = await read_view(backend, keys)
        done = self._clock()
        self.builds += 1
        self._latest = _Latest(backend, keys, view, writes, done + REUSE_FACTOR * (done - started))
        return view

    def _lenient(self, latest: _Latest) -> bool:
        floor = self._pass_floor
        return floor is not None and latest.view.revision >= floor and self._clock() < latest.fresh_until


@dataclass(frozen=True)
class _Latest:
    backend: ClusterBackend
    keys: tuple[str, ...]
    view: ClusterView
    writes: int  # the backend's own pod writes when the view was read
    fresh_until: float  # reused across others' changes until then (ClusterViews' clock)

    def serves(self, backend: ClusterBackend, keys: tuple[str, ...]) -> bool:
        """Of this backend and label keys, and no pod written by this agent since."""
        return self.backend is backend and self.keys == keys and self.writes == backend.writes
