"""A backend's pods grouped two ways, kept up to date pod by pod as its cache changes: the
room the pods on each node hold, and each job's pods.

Why: before every bind a backend checks the node's room over the pods bound to it, and a
job that wrote re-reads its pods by job label (``list_pods({LABEL_JOB: job})``); both
scanned every pod of the cluster on the event loop, once per bind and once per writing job.
In a pass of 200 new 4-pod jobs on 4,000 nodes with 16,000 other pods that was about 90% of
10 s of CPU (docs/benchmarks.md, "Agent pass where every job writes (twenty-seventh stop,
second part)"). Kept up to date as each pod changes, both answers cost only what they return.

The room is counted exactly as a full count counts it (``used_by_node`` in
agents/core/snapshot.py): a pod holds its requests on its node while it is bound and not
terminal, whether or not it is terminating (the apiserver keeps a terminating pod, and
its containers, until the kubelet confirms they are gone). The index remembers what it
counted for each pod, so a change needs only the pod after it; requests are integers
(federation/domain/resources.py), so taking back exactly what was added leaves no error
behind. Modelled on client-go's ``cache.Indexer`` (k8s.io/client-go/tools/cache/index.go:
an index kept beside the store and updated on every add, update and delete), with a sum
per node beside the groups.
"""

from __future__ import annotations

from typing import Self

from agents.core.records import LABEL_JOB, PodRecord
from federation.domain.resources import Resources

Key = tuple[str, str]  # (namespace, name)


class PodIndex:
    """The room held on each node and the pods of each job, for the pods ``put`` into it."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._holding: dict[Key, tuple[str, Resources]] = {}  # pod -> (node, requests) counted for it
        self._used: dict[str, Resources] = {}  # node -> what its pods hold (never an empty vector)
        self._job_of: dict[Key, str] = {}
        self._by_job: dict[str, dict[Key, PodRecord]] = {}
        self._ordered: dict[str, tuple[PodRecord, ...]] = {}  # a job's group sorted, until it changes

    def put(self, key: Key, pod: PodRecord | None) -> None:
        """``pod`` is now what the cache holds under ``key`` (None: nothing)."""
        holds = (pod.node, pod.requests) if pod is not None and pod.node is not None and not pod.terminal else None
        held = self._holding.get(key)
        if held != holds:
            if held is not None:
                del self._holding[key]
                hold(self._used, held[0], held[1], taken=False)
            if holds is not None:
                self._holding[key] = holds
                hold(self._used, holds[0], holds[1], taken=True)
        job = pod.labels.get(LABEL_JOB) if pod is not None else None
        was = self._job_of.get(key)
        if was is not None and was != job:
            del self._job_of[key]
            group = self._by_job[was]
            del group[key]
            if not group:
                del self._by_job[was]
            self._ordered.pop(was, None)
        if job is not None and pod is not None:
            self._job_of[key] = job
            self._by_job.setdefault(job, {})[key] = pod
            self._ordered.pop(job, None)

    def used(self, node: str) -> Resources:
        """What the bound, non-terminal pods on ``node`` request together."""
        return self._used.get(node, Resources())

    def used_by_node(self) -> dict[str, Resources]:
        """Every node that holds any room, with what it holds (a copy)."""
        return dict(self._used)

    def job_pods(self, job: str) -> list[PodRecord]:
        """The pods labelled as job ``job``'s, by (namespace, name), as ``list_pods`` orders them."""
        ordered = self._ordered.get(job)
        if ordered is None:
            group = self._by_job.get(job)
            if group is None:
                return []
            ordered = tuple(pod for _, pod in sorted(group.items(), key=lambda item: item[0]))
            self._ordered[job] = ordered
        return list(ordered)

    def fresh(self) -> Self:
        """An empty index of the same kind, filled beside this one while a cache relists."""
        return type(self)()

    def adopt(self, other: Self) -> None:
        """Hold what ``other`` holds, in one step (the relisted cache replaces the old one)."""
        self._holding, self._used = other._holding, other._used
        self._job_of, self._by_job, self._ordered = other._job_of, other._by_job, other._ordered
        other._clear()  # left empty: the two never share their dicts


def hold(used: dict[str, Resources], node: str, requests: Resources, *, taken: bool) -> None:
    """``requests`` taken on ``node`` in ``used`` (given back when not ``taken``); a node
    left holding nothing is dropped, so ``used`` never holds an empty vector."""
    held = used.get(node, Resources())
    held = held + requests if taken else held - requests
    if held:
        used[node] = held
    else:
        used.pop(node, None)
