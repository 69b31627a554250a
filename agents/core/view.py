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
(docs/design/agent.md, "The event loop at scale"); so does sorting the pods (the reads
return them unordered). The snapshot the agent reports is the same build (``snapshot``
below), so a snapshot taken at the revision of the last pass costs only its encoding.

A pass in which every job writes pods (a burst of new placements) would still rebuild the
view once per job: 200 new jobs on 4,000 nodes took 38 s of a worker thread. When nothing
but this agent's own pod writes moved the revision since a view was built, the backend
knows exactly what they changed (``agents/own_writes.py``), and the view is brought
forward by those changes alone (``follow_own_writes``), giving what a full build would.
Anything else that moved the revision, a watch event included, still means a full build.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from agents.backend import ClusterBackend
from agents.core.records import LABEL_JOB, NodeRecord, PodRecord
from agents.core.snapshot import build_snapshot, used_by_node, with_free
from agents.own_writes import PodChange
from agents.pod_index import hold
from federation.domain.clusters import ClusterSnapshot
from federation.domain.errors import InvalidInput
from federation.domain.nodes import Node
from federation.domain.resources import Resources
from federation.domain.topology import HyperNodeSpec, HyperNodeTree


@dataclass(frozen=True)
class ClusterView:
    revision: int
    nodes: tuple[Node, ...]  # by name; free = allocatable - requests of every non-terminal pod on it
    pods_by_job: Mapping[str, tuple[PodRecord, ...]]  # each job's pods in (namespace, name) order, as list_pods
    # What the reported snapshot is made of (agents/runtime_snapshots.py):
    hypernodes: tuple[HyperNodeSpec, ...] | None = None  # the HyperNode objects as read; None: unreadable
    ready: frozenset[str] = frozenset()  # the names of the nodes that are Ready, for every job's NodeLost
    snapshot: ClusterSnapshot | None = None  # the valid snapshot (no labels, taken_at 0); None: invalid tree
    error: str = ""  # why the tree is invalid ("" when it is valid)
    unreadable: str = ""  # why the HyperNode objects could not be read ("" when they could)
    # The requests held on each node that holds any (free before its clamp at zero): what
    # own writes are added to and taken from (follow_own_writes).
    used: Mapping[str, Resources] = field(default_factory=dict)

    def job_pods(self, job: str) -> tuple[PodRecord, ...]:
        return self.pods_by_job.get(job, ())

    @property
    def tree(self) -> HyperNodeTree | None:
        """The tree to bind in; None when the HyperNodes are unreadable or form no valid tree."""
        return self.snapshot.tree if self.snapshot is not None and self.hypernodes is not None else None


def build_view(cluster: str, revision: int, nodes: Sequence[NodeRecord], pods: Sequence[PodRecord],
               specs: Sequence[HyperNodeSpec] | InvalidInput, label_keys: Sequence[str]) -> ClusterView:
    """The view of what the reads returned, ``pods`` in any order (pure; runs in a worker thread)."""
    readable = not isinstance(specs, InvalidInput)
    explicit = tuple(specs) if not isinstance(specs, InvalidInput) else ()
    used = {name: held for name, held in used_by_node(pods).items() if held}
    result = build_snapshot(cluster, nodes, pods, explicit, label_keys=label_keys, used=used)
    domain_nodes = result.snapshot.nodes if result.snapshot is not None else with_free(nodes, used)
    by_job: dict[str, list[PodRecord]] = {}
    for pod in pods:
        job = pod.labels.get(LABEL_JOB)
        if job is not None:
            by_job.setdefault(job, []).append(pod)
    return ClusterView(revision, domain_nodes, {job: tuple(sorted(p, key=_pod_key)) for job, p in by_job.items()},
                       hypernodes=explicit if readable else None, snapshot=result.snapshot, error=result.error,
                       unreadable="" if readable else str(specs),
                       ready=frozenset(n.name for n in domain_nodes if n.ready), used=used)


def _pod_key(pod: PodRecord) -> tuple[str, str]:
    return pod.namespace, pod.name


def follow_own_writes(view: ClusterView, revision: int, changes: Sequence[PodChange]) -> ClusterView:
    """The view a full build at ``revision`` gives, from ``view`` and this agent's own pod
    changes since, which alone took the backend from ``view.revision`` to ``revision``
    (pure; runs in a worker thread: it copies the node list).

    A pod holds room exactly when a full build counts it (``used_by_node``): bound and
    not terminal. So a pod gives room back when it stops holding any, not when it is
    deleted: a terminal pod deleted gives nothing back (it held none), and a pod the
    apiserver keeps while it terminates holds its room until it is gone."""
    used = dict(view.used)
    touched: set[str] = set()
    by_job = dict(view.pods_by_job)
    for change in changes:
        for pod, taken in ((change.before, False), (change.after, True)):
            if pod is None:
                continue
            if pod.node is not None and not pod.terminal:
                hold(used, pod.node, pod.requests, taken=taken)
                touched.add(pod.node)
            job = pod.labels.get(LABEL_JOB)
            if job is not None:
                _regroup(by_job, job, pod, keep=taken)
    free: dict[str, Resources] = {}
    for name in touched:
        at = bisect.bisect_left(view.nodes, name, key=lambda n: n.name)
        if at < len(view.nodes) and view.nodes[at].name == name:
            free[name] = (view.nodes[at].allocatable - used.get(name, Resources())).clamp_min_zero()
    snapshot, nodes = view.snapshot, view.nodes
    if free and snapshot is not None:
        snapshot = snapshot.keeping_tree(free=free)  # the tree holds node names, not their room
        nodes = snapshot.nodes
    elif free:
        nodes = tuple(n if n.name not in free else replace(n, free=free[n.name]) for n in nodes)
    return replace(view, revision=revision, nodes=nodes, pods_by_job=by_job, snapshot=snapshot, used=used)


def _regroup(by_job: dict[str, tuple[PodRecord, ...]], job: str, pod: PodRecord, *, keep: bool) -> None:
    """Take ``pod`` (by name) out of ``job``'s group, then put it back when ``keep``, in order."""
    group = [p for p in by_job.get(job, ()) if _pod_key(p) != _pod_key(pod)]
    if keep:
        bisect.insort(group, pod, key=_pod_key)
    if group:
        by_job[job] = tuple(group)
    else:
        by_job.pop(job, None)


async def _read(backend: ClusterBackend, label_keys: tuple[str, ...]) -> tuple[ClusterView, bool]:
    """The view at the backend's revision now, and whether the reads all saw that revision.

    The revision is taken before the reads: a change that lands while they run (or while
    the build runs in its thread) moves it on, so the next caller rebuilds rather than
    trust a view that may have missed it. A view whose reads saw a change land (False)
    may already hold an own write that came after its revision, so it is never brought
    forward by own writes (it would count that one twice)."""
    revision = backend.revision
    pods = await backend.list_pods({}, ordered=False)  # sorted in the thread, not on the loop
    nodes = await backend.list_nodes()
    specs: list[HyperNodeSpec] | InvalidInput
    try:
        specs = await backend.list_hypernodes()
    except InvalidInput as exc:
        specs = exc
    still = backend.revision == revision
    view = await asyncio.to_thread(build_view, backend.cluster, revision, nodes, pods, specs, label_keys)
    return view, still


async def read_view(backend: ClusterBackend, label_keys: Sequence[str]) -> ClusterView:
    """Everything a job's pass reads of the whole cluster, at the backend's revision now."""
    view, _ = await _read(backend, tuple(label_keys))
    return view


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
    bounds that window. Two things are never waited for: this agent's own pod writes (a
    job's pass must see the room the job before it took or gave back), and a change made
    before the pass began (every watch event is followed by a pass that sees it, and
    outside a pass, as for the snapshot, the revision alone decides).

    After own writes, the view is brought forward by them (``follow_own_writes``) when
    they alone moved the revision since it was built, and rebuilt otherwise."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._latest: _Latest | None = None
        self._pass_floor: int | None = None  # the revision the current pass began at
        self.builds = 0  # how many views were built (tests and benchmarks read it)
        self.followed = 0  # how many were brought forward by own writes instead

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
        if latest is not None and latest.backend is backend and latest.keys == keys:
            if latest.writes == backend.writes and (
                    latest.view.revision == backend.revision or self._lenient(latest)):
                return latest.view
            if latest.writes != backend.writes and latest.followable:
                followed = await self._follow(latest)
                if followed is not None:
                    return followed
        writes, started = backend.writes, self._clock()
        view, followable = await _read(backend, keys)
        done = self._clock()
        self.builds += 1
        self._latest = _Latest(backend, keys, view, writes, done - started, done, followable)
        return view

    async def _follow(self, latest: _Latest) -> ClusterView | None:
        """``latest`` brought forward by the own writes since it, when nothing else moved
        the revision meanwhile (None: it must be rebuilt)."""
        backend = latest.backend
        revision, writes = backend.revision, backend.writes
        changes = backend.own_pod_writes(latest.view.revision, revision)
        if changes is None:
            return None
        view = latest.view
        if changes:
            view = await asyncio.to_thread(follow_own_writes, view, revision, changes)
            self.followed += 1
        # As fresh as a build made now (others changed nothing since the one it follows),
        # and as costly to rebuild as that one was.
        self._latest = replace(latest, view=view, writes=writes, built_at=self._clock())
        return view

    def _lenient(self, latest: _Latest) -> bool:
        floor = self._pass_floor
        return floor is not None and latest.view.revision >= floor and self._clock() < latest.fresh_until


@dataclass(frozen=True)
class _Latest:
    backend: ClusterBackend
    keys: tuple[str, ...]
    view: ClusterView
    writes: int  # the backend's own pod writes when the view was read (or brought forward)
    build_seconds: float  # what the full build took (ClusterViews' clock)
    built_at: float  # when the view was built or brought forward
    followable: bool  # its reads all saw its revision: own writes after it are not in it

    @property
    def fresh_until(self) -> float:
        """Reused across others' changes inside a pass until then."""
        return self.built_at + REUSE_FACTOR * self.build_seconds
