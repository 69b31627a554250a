"""``TaintCluster`` is bounded before any work (over real gRPC, SQLite and PostgreSQL;
docs/design/limits.md).

The reviewer's reproduction: applying a request's taints took time quadratic in their
number, on the event loop: 8,000 taints (a 167 KB request) held every RPC and every
agent's heartbeat for 4.4 s, and a 4 MiB request would have held them for most of an hour,
long enough for every cluster to be declared lost. Admin taints are stored with the
cluster and listed to every tenant, so they are now held to the cap cluster taints have
in snapshots (``--max-node-taints``), per request and in total.
"""

from __future__ import annotations

import time

import grpc
import pytest
from servicekit import ADMIN, client, running, secured

from federation.client import ServiceError
from federation.store import Store
from federation.v1 import types_pb2
from federation.wire.limits import Limits


def _taints(n: int, prefix: str = "k") -> list[types_pb2.Taint]:
    return [types_pb2.Taint(key=f"{prefix}{i}", effect="NoSchedule") for i in range(n)]


async def test_a_request_with_too_many_taints_is_refused_at_once_and_stores_nothing(store: Store) -> None:
    store.clusters.register("east", 1)
    async with running(store, secured()) as srv, client(srv, ADMIN) as admin:
        started = time.monotonic()
        with pytest.raises(ServiceError) as err:
            await admin.taint_cluster("east", _taints(8_000), [])
        assert time.monotonic() - started < 2.0
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.message.startswith("add: 8000 is over the limit of 128"), err.value.message
        with pytest.raises(ServiceError) as err:
            await admin.taint_cluster("east", [], [f"k{i}" for i in range(129)])
        assert err.value.message.startswith("remove: 129 is over the limit of 128"), err.value.message
    assert store.clusters.get("east").admin_taints == ()


async def test_the_cap_holds_across_requests(store: Store) -> None:
    store.clusters.register("east", 1)
    async with running(store, secured(), limits=Limits(max_node_taints=3)) as srv, client(srv, ADMIN) as admin:
        await admin.taint_cluster("east", _taints(2), [])
        await admin.taint_cluster("east", _taints(2), [])  # the same taints again: still two
        with pytest.raises(ServiceError) as err:
            await admin.taint_cluster("east", _taints(2, "x"), [])
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.message.startswith("add: cluster 'east' would have 4 admin taints"), \
            err.value.message
        await admin.taint_cluster("east", _taints(1, "x"), ["k0"])  # one out, one in
    assert [t.key for t in store.clusters.get("east").admin_taints] == ["k1", "x0"]
