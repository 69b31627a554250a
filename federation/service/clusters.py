"""ClusterService: the member clusters as their agents last reported them (read only).

Agents write cluster state through the AgentService; submitters only read it, so any
authenticated tenant may list clusters (they need it to understand placements).
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any, Protocol

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.service.auth import Authenticator
from federation.service.views import cluster_to_view
from federation.store.records import ClusterRecord
from federation.v1 import clusters_pb2, clusters_pb2_grpc

Context = grpc.aio.ServicerContext[Any, Any]


class _Clusters(Protocol):
    def list(self) -> builtins.list[ClusterRecord]: ...
    def get(self, name: str) -> ClusterRecord: ...


class ClusterStore(Protocol):
    """What ``ClusterServicer`` needs from the store."""

    @property
    def clusters(self) -> _Clusters: ...


class ClusterServicer(clusters_pb2_grpc.ClusterServiceServicer):
    def __init__(self, store: ClusterStore, auth: Authenticator) -> None:
        self._store = store
        self._auth = auth

    async def ListClusters(self, request: clusters_pb2.ListClustersRequest,
                           context: Context) -> clusters_pb2.ListClustersResponse:
        self._auth.require_tenant(context)
        records: list[ClusterRecord] = await asyncio.to_thread(self._store.clusters.list)
        return clusters_pb2.ListClustersResponse(clusters=[cluster_to_view(c) for c in records])

    async def GetCluster(self, request: clusters_pb2.GetClusterRequest, context: Context) -> clusters_pb2.Cluster:
        self._auth.require_tenant(context)
        if not request.name:
            raise InvalidInput("name", "must not be empty")
        record: ClusterRecord = await asyncio.to_thread(self._store.clusters.get, request.name)
        return cluster_to_view(record)
