"""The kinds ``fedctl apply`` knows out of the box: Volcano Job and Queue, Kubernetes
PriorityClass, Karmada PropagationPolicy and ClusterPropagationPolicy (more register
themselves from their own modules, see ``apply.KIND_MODULES``).

Queues, classes and policies are created, or updated when they exist ("configured",
kubectl's word); an update that changes nothing answers "unchanged", and each answer
carries its undo for ``--atomic``. A Job is submitted: the federation keeps a job's spec
once submitted, so a second apply of the same Job is "unchanged" and a different spec
under the same name is refused by the server. A Job's ``priorityClassName`` is resolved
by the server (applied PriorityClasses first) unless the Job sets its priority itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from federation.cli.apply import (
    ORDER_POLICIES,
    ORDER_PRIORITY_CLASSES,
    ORDER_QUEUES,
    ORDER_WORKLOADS,
    Applied,
    Kind,
    register,
)
from federation.client import FederationClient, ServiceError
from federation.domain.errors import InvalidInput
from federation.domain.manifests import JOB_API, POLICY_API, QUEUE_API
from federation.domain.manifests_k8s import PRIORITY_CLASS_API, parse_priority_class
from federation.domain.manifests_karmada import parse_policy_object
from federation.domain.manifests_volcano import explicit_priority, parse_job, parse_queue
from federation.domain.policies import CLUSTER_WIDE, NAMESPACED
from federation.v1 import objects_pb2, queues_pb2, types_pb2
from federation.wire.convert import job_to_proto, queue_to_proto
from federation.wire.objects import priority_class_to_proto


def job_spec(doc: Mapping[str, object], path: str) -> types_pb2.JobSpec:
    """A Volcano Job document as the JobSpec to submit (class resolved by the server)."""
    spec = job_to_proto(parse_job(doc, path, None))
    if not explicit_priority(doc):
        spec.ClearField("priority")
    return spec


async def _apply_job(client: FederationClient, spec: types_pb2.JobSpec) -> Applied:
    resp = await client.submit_job(spec)
    return Applied(f"job/{spec.name}", "created" if resp.created else "unchanged")


async def _check_job(client: FederationClient, spec: types_pb2.JobSpec) -> None:
    await client.submit_job(spec, dry_run=True)


def _spec(queue: queues_pb2.Queue) -> queues_pb2.Queue:
    out = queues_pb2.Queue()
    out.CopyFrom(queue)
    out.ClearField("status")
    return out


async def _apply_queue(client: FederationClient, queue: queues_pb2.Queue) -> Applied:
    ref = f"queue/{queue.name}"
    try:
        await client.create_queue(queue)
    except ServiceError as exc:
        if exc.code != grpc.StatusCode.ALREADY_EXISTS:
            raise
    else:
        async def delete() -> None:
            await client.delete_queue(queue.name)
        return Applied(ref, "created", delete)
    before = _spec(await client.get_queue(queue.name))
    after = _spec(await client.update_queue(queue))
    if after == before:
        return Applied(ref, "unchanged")

    async def restore() -> None:
        await client.update_queue(before)
    return Applied(ref, "configured", restore)


async def _previous_class(client: FederationClient, name: str) -> objects_pb2.PriorityClass | None:
    try:
        pc = await client.get_priority_class(name)
    except ServiceError as exc:
        if exc.code == grpc.StatusCode.NOT_FOUND:
            return None
        raise
    pc.ClearField("updated")
    return pc


async def _apply_class(client: FederationClient, pc: objects_pb2.PriorityClass) -> Applied:
    before = await _previous_class(client, pc.name)
    done = await client.apply_priority_class(pc)

    async def undo() -> None:
        if before is None:
            await client.delete_priority_class(pc.name)
        else:
            await client.apply_priority_class(before)
    return Applied(f"priorityclass/{pc.name}", done.outcome, undo)


async def _check_class(client: FederationClient, pc: objects_pb2.PriorityClass) -> None:
    await client.apply_priority_class(pc, dry_run=True)


@dataclass(frozen=True)
class PolicyDocument:
    """A policy to apply: its key and the Karmada document (validated locally first)."""

    kind: str
    namespace: str
    name: str
    document_json: str

    @property
    def ref(self) -> str:
        if self.kind == NAMESPACED:
            return f"propagationpolicy/{self.namespace}/{self.name}"
        return f"clusterpropagationpolicy/{self.name}"

    def message(self) -> objects_pb2.Policy:
        return objects_pb2.Policy(kind=self.kind, namespace=self.namespace, name=self.name,
                                  document_json=self.document_json)


def _parse_policy(doc: Mapping[str, object], path: str) -> PolicyDocument:
    policy = parse_policy_object(doc, path)
    return PolicyDocument(policy.kind, policy.namespace, policy.name,
                          json.dumps(doc, sort_keys=True, default=str))


async def _apply_policy(client: FederationClient, policy: PolicyDocument) -> Applied:
    before: objects_pb2.Policy | None
    try:
        before = await client.get_policy(policy.kind, policy.namespace, policy.name)
    except ServiceError as exc:
        if exc.code != grpc.StatusCode.NOT_FOUND:
            raise
        before = None
    done = await client.apply_policy(policy.message())

    async def undo() -> None:
        if before is None:
            await client.delete_policy(policy.kind, policy.namespace, policy.name)
        else:
            await client.apply_policy(objects_pb2.Policy(kind=before.kind, namespace=before.namespace,
                                                         name=before.name, document_json=before.document_json))
    return Applied(policy.ref, done.outcome, undo)


async def _check_policy(client: FederationClient, policy: PolicyDocument) -> None:
    await client.apply_policy(policy.message(), dry_run=True)


register(Kind("PriorityClass", (PRIORITY_CLASS_API,), ORDER_PRIORITY_CLASSES,
              lambda doc, path: priority_class_to_proto(parse_priority_class(doc, path)), _apply_class,
              lambda pc: f"priorityclass/{pc.name}", check=_check_class))
register(Kind("Queue", (QUEUE_API,), ORDER_QUEUES, lambda doc, path: queue_to_proto(parse_queue(doc, path)),
              _apply_queue, lambda q: f"queue/{q.name}"))
for _kind in (NAMESPACED, CLUSTER_WIDE):
    register(Kind(_kind, (POLICY_API,), ORDER_POLICIES, _parse_policy, _apply_policy, lambda p: p.ref,
                  check=_check_policy))
register(Kind("Job", (JOB_API,), ORDER_WORKLOADS, job_spec, _apply_job, lambda spec: f"job/{spec.name}",
              check=_check_job))


def _hypernode(doc: Mapping[str, object], path: str) -> None:
    raise InvalidInput(f"{path}.kind", "HyperNode not supported by fedctl apply: each member cluster's agent reads "
                       "its topology.volcano.sh HyperNodes (or discovers them from node labels); apply them in "
                       "that cluster")


async def _never(client: FederationClient, obj: object) -> Applied:
    raise AssertionError("a refused kind is never applied")


register(Kind("HyperNode", ("topology.volcano.sh/v1alpha1",), ORDER_PRIORITY_CLASSES, _hypernode, _never,
              lambda _: "hypernode"))
