"""ObjectService: Karmada (Cluster)PropagationPolicies and PriorityClasses.

Admins write them (a policy steers every matching tenant's jobs; a class sets priorities
across queues); every tenant may read them. A policy arrives as its Karmada document
(JSON, at most ``wire.objects.DOCUMENT_LIMIT`` bytes, checked before it is decoded) and is validated
by the same parser the CLI uses, so a refusal names the same field either way. Applying
or deleting a policy triggers a round: pending jobs pick up the change at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import grpc.aio

from federation.domain.errors import InvalidInput
from federation.domain.policies import CLUSTER_WIDE, NAMESPACED, PriorityClass
from federation.service.auth import Authenticator, Identity, usable_queues
from federation.service.views import timestamp
from federation.store.objects import PolicyRecord, PriorityClassRecord
from federation.v1 import objects_pb2, objects_pb2_grpc
from federation.wire.objects import (
    policy_document,
    priority_class_from_proto,
    priority_class_to_proto,
)

T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]


class Trigger(Protocol):
    def trigger(self, reason: str) -> None: ...


def policy_ref(kind: str, namespace: str, name: str) -> str:
    """The ref of a policy key (a PropagationPolicy's empty namespace means ``default``)."""
    if kind == NAMESPACED:
        return f"propagationpolicy/{namespace or 'default'}/{name}"
    if kind == CLUSTER_WIDE:
        return f"clusterpropagationpolicy/{name}"
    raise InvalidInput("kind", f"{kind!r} not supported (PropagationPolicy or ClusterPropagationPolicy)")


def policy_to_view(record: PolicyRecord, jobs: list[str] | None = None) -> objects_pb2.Policy:
    return objects_pb2.Policy(kind=record.kind, namespace=record.namespace, name=record.name, priority=record.priority,
                              document_json=json.dumps(record.document, sort_keys=True), version=record.version,
                              updated=timestamp(record.updated_at), jobs=jobs or [])


def _class_view(record: PriorityClassRecord) -> objects_pb2.PriorityClass:
    out = priority_class_to_proto(record.priority_class)
    out.updated.CopyFrom(timestamp(record.updated_at))
    return out


class PriorityClassCache:
    """The applied PriorityClasses for at most ``ttl`` seconds: the submit hot path reads
    them for every job (a class name, or the global default), and they change rarely.
    This process's ObjectService invalidates it on every change; another replica's change
    is seen within ``ttl`` (the same trade as ``jobs.QueueCache``)."""

    def __init__(self, store: Any, ttl: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._ttl, self._clock = store, ttl, clock
        self._entry: tuple[float, Mapping[str, PriorityClass]] | None = None

    async def get(self) -> Mapping[str, PriorityClass]:
        now = self._clock()
        if self._entry is None or now - self._entry[0] >= self._ttl:
            records: list[PriorityClassRecord] = await asyncio.to_thread(self._store.priority_classes.list)
            self._entry = (now, {r.priority_class.name: r.priority_class for r in records})
        return self._entry[1]

    def invalidate(self) -> None:
        self._entry = None


class ObjectServicer(objects_pb2_grpc.ObjectServiceServicer):
    def __init__(self, store: Any, auth: Authenticator, rounds: Trigger | None = None,
                 on_classes_changed: Callable[[], None] | None = None) -> None:
        self._store = store
        self._auth = auth
        self._rounds = rounds
        self._classes_changed = on_classes_changed

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def _replan(self, reason: str) -> None:
        if self._rounds is not None:
            self._rounds.trigger(reason)

    async def ApplyPolicy(self, request: objects_pb2.ApplyPolicyRequest,
                          context: Context) -> objects_pb2.ApplyPolicyResponse:
        self._auth.require_admin(context)
        policy, doc = await self._call(policy_document, request.policy)
        if request.dry_run:
            return objects_pb2.ApplyPolicyResponse(outcome="unchanged")
        record, outcome = await self._call(self._store.policies.apply, policy, doc)
        if outcome != "unchanged":
            self._replan("policy")
        return objects_pb2.ApplyPolicyResponse(policy=policy_to_view(record), outcome=outcome)

    async def _usable_queues(self, who: Identity) -> list[str] | None:
        """None for admins, else the queues ``who`` may use: a policy is readable by every
        tenant, but the jobs it governs are listed only where the caller could list them."""
        return None if who.admin else usable_queues(who, await self._call(self._store.queues.all))

    async def GetPolicy(self, request: objects_pb2.PolicyKey, context: Context) -> objects_pb2.Policy:
        who = self._auth.require_tenant(context)
        ref = policy_ref(request.kind, request.namespace, request.name)
        record = await self._call(self._store.policies.get, ref)
        jobs = await asyncio.to_thread(self._store.policies.claimed_by, ref, queues=await self._usable_queues(who))
        return policy_to_view(record, jobs)

    async def ListPolicies(self, request: objects_pb2.ListPoliciesRequest,
                           context: Context) -> objects_pb2.ListPoliciesResponse:
        who = self._auth.require_tenant(context)
        records: list[PolicyRecord] = await self._call(self._store.policies.list)
        claims: dict[str, str] = await asyncio.to_thread(self._store.policies.claims, unfinished=True,
                                                         queues=await self._usable_queues(who))
        jobs: dict[str, list[str]] = {}
        for job, ref in sorted(claims.items()):
            jobs.setdefault(ref, []).append(job)
        return objects_pb2.ListPoliciesResponse(policies=[policy_to_view(r, jobs.get(r.ref)) for r in records])

    async def DeletePolicy(self, request: objects_pb2.PolicyKey, context: Context) -> objects_pb2.DeleteObjectResponse:
        self._auth.require_admin(context)
        await self._call(self._store.policies.delete, policy_ref(request.kind, request.namespace, request.name))
        self._replan("policy")
        return objects_pb2.DeleteObjectResponse()

    async def ApplyPriorityClass(self, request: objects_pb2.ApplyPriorityClassRequest,
                                 context: Context) -> objects_pb2.ApplyPriorityClassResponse:
        self._auth.require_admin(context)
        pc = priority_class_from_proto(request.priority_class)
        if request.dry_run:
            return objects_pb2.ApplyPriorityClassResponse(outcome="unchanged")
        record, outcome = await self._call(self._store.priority_classes.apply, pc)
        if self._classes_changed is not None:
            self._classes_changed()
        return objects_pb2.ApplyPriorityClassResponse(priority_class=_class_view(record), outcome=outcome)

    async def GetPriorityClass(self, request: objects_pb2.PriorityClassKey,
                               context: Context) -> objects_pb2.PriorityClass:
        self._auth.require_tenant(context)
        return _class_view(await self._call(self._store.priority_classes.get, request.name))

    async def ListPriorityClasses(self, request: objects_pb2.ListPriorityClassesRequest,
                                  context: Context) -> objects_pb2.ListPriorityClassesResponse:
        self._auth.require_tenant(context)
        records: list[PriorityClassRecord] = await self._call(self._store.priority_classes.list)
        return objects_pb2.ListPriorityClassesResponse(priority_classes=[_class_view(r) for r in records])

    async def DeletePriorityClass(self, request: objects_pb2.PriorityClassKey,
                                  context: Context) -> objects_pb2.DeleteObjectResponse:
        self._auth.require_admin(context)
        await self._call(self._store.priority_classes.delete, request.name)
        if self._classes_changed is not None:
            self._classes_changed()
        return objects_pb2.DeleteObjectResponse()
