"""ClusterService: the member clusters as their agents last reported them (read only).

Agents write cluster state through the AgentService; submitters only read it, so any
authenticated tenant may list clusters (they need it to understand placements). A
tenant's ``active_jobs`` counts only the jobs of queues it may use: the rest are other
tenants' jobs (issue 10). Capacity and free room are the cluster's, shown to all.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any, Protocol

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.domain.nodes import Taint
from federation.domain.queues import Queue
from federation.service.auth import Authenticator, Identity, usable_queues
from federation.service.views import cluster_to_view
from federation.store.records import ClusterRecord
from federation.v1 import clusters_pb2, clusters_pb2_grpc
from federation.wire.base import build
from federation.wire.limits import DEFAULT_LIMITS, Limits, check_taint_request

Context = grpc.aio.ServicerContext[Any, Any]


class Trigger(Protocol):
    def trigger(self, reason: str) -> None: ...


def taints_after(current: tuple[Taint, ...], request: clusters_pb2.TaintClusterRequest,
                 now: float, limits: Limits = DEFAULT_LIMITS) -> tuple[Taint, ...]:
    """The admin taints after ``request`` (kubectl taint semantics); refusals name the field.
    A NoExecute taint records ``now`` as its time added (kept when it is set again), from
    which the jobs' ``tolerationSeconds`` count (propagation/taints.py). Bounded first
    (``check_taint_request``) and linear in the taints: it runs on the event loop."""
    check_taint_request(request, limits)
    out = {(t.key, t.effect): t for t in current}
    for i, spec in enumerate(request.remove):
        key, _, effect = spec.partition(":")
        if not key:
            raise InvalidInput(f"remove[{i}]", "must be KEY or KEY:EFFECT")
        gone = [k for k in out if k[0] == key and effect in ("", k[1])]
        if not gone:
            raise InvalidInput(f"remove[{i}]", f"cluster {request.name!r} has no admin taint {spec[:300]!r}")
        for k in gone:
            del out[k]
    for i, msg in enumerate(request.add):
        taint = build(f"add[{i}]", Taint, key=msg.key, value=msg.value, effect=msg.effect or "NoSchedule")
        same = out.pop((taint.key, taint.effect), None)  # set again: it moves last, as before
        if taint.effect == "NoExecute":
            since = same.time_added if same is not None and same.value == taint.value else None
            taint = replace(taint, time_added=since if since is not None else now)
        out[(taint.key, taint.effect)] = taint
    if len(out) > limits.max_node_taints:
        raise InvalidInput("add", f"cluster {request.name!r} would have {len(out)} admin taints, over the limit "
                                  f"of {limits.max_node_taints}")
    return tuple(out.values())


class _Queues(Protocol):
    def all(self) -> builtins.list[Queue]: ...


class _Clusters(Protocol):
    def list(self, *, queues: Collection[str] | None = None) -> builtins.list[ClusterRecord]: ...
    def get(self, name: str, *, queues: Collection[str] | None = None) -> ClusterRecord: ...
    def set_admin_taints(self, name: str, taints: tuple[Taint, ...]) -> ClusterRecord: ...


class ClusterStore(Protocol):
    """What ``ClusterServicer`` needs from the store."""

    @property
    def clusters(self) -> _Clusters: ...
    @property
    def queues(self) -> _Queues: ...


class ClusterServicer(clusters_pb2_grpc.ClusterServiceServicer):
    def __init__(self, store: ClusterStore, auth: Authenticator, rounds: Trigger | None = None,
                 clock: Callable[[], float] = time.time, limits: Limits = DEFAULT_LIMITS) -> None:
        self._clock = clock
        self._limits = limits
        self._store = store
        self._auth = auth
        self._rounds = rounds

    async def TaintCluster(self, request: clusters_pb2.TaintClusterRequest, context: Context) -> clusters_pb2.Cluster:
        self._auth.require_admin(context)
        if not request.name:
            raise InvalidInput("name", "must not be empty")
        check_taint_request(request, self._limits)  # before the store is read
        record: ClusterRecord = await asyncio.to_thread(self._store.clusters.get, request.name)
        taints = taints_after(record.admin_taints, request, self._clock(), self._limits)
        updated: ClusterRecord = await asyncio.to_thread(self._store.clusters.set_admin_taints, request.name, taints)
        if self._rounds is not None:
            self._rounds.trigger("taint")
        return cluster_to_view(updated)

    async def ListClusters(self, request: clusters_pb2.ListClustersRequest,
                           context: Context) -> clusters_pb2.ListClustersResponse:
        who = self._auth.require_tenant(context)
        records: list[ClusterRecord] = await asyncio.to_thread(self._store.clusters.list,
                                                               queues=await self._usable_queues(who))
        return clusters_pb2.ListClustersResponse(clusters=[cluster_to_view(c) for c in records])

    async def GetCluster(self, request: clusters_pb2.GetClusterRequest, context: Context) -> clusters_pb2.Cluster:
        who = self._auth.require_tenant(context)
        if not request.name:
            raise InvalidInput("name", "must not be empty")
        record: ClusterRecord = await asyncio.to_thread(self._store.clusters.get, request.name,
                                                        queues=await self._usable_queues(who))
        return cluster_to_view(record)

    async def _usable_queues(self, who: Identity) -> list[str] | None:
        """None for admins (every job counts), else the queues ``who`` may use."""
        return None if who.admin else usable_queues(who, await asyncio.to_thread(self._store.queues.all))
