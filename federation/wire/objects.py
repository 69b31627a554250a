"""Objects applied to the federation (Karmada policies, PriorityClasses): wire <-> domain.

A policy travels as its Karmada document (JSON, at most ``DOCUMENT_LIMIT`` bytes, checked
before it is decoded) and is validated by the same parser the CLI uses, so a refusal names
the same field on either side.
"""

from __future__ import annotations

import json
from typing import Any

from federation.domain.errors import InvalidInput
from federation.domain.manifests import POLICY_API
from federation.domain.manifests_fields import mapping
from federation.domain.manifests_karmada import parse_policy_object
from federation.domain.policies import CLUSTER_WIDE, NAMESPACED, PolicyObject, PriorityClass
from federation.v1 import objects_pb2

DOCUMENT_LIMIT = 256 * 1024


def policy_document(msg: objects_pb2.Policy, path: str = "policy") -> tuple[PolicyObject, dict[str, Any]]:
    """The wire policy into (domain policy, the document to store); refusals name the field."""
    raw = msg.document_json
    if len(raw.encode()) > DOCUMENT_LIMIT:
        raise InvalidInput(f"{path}.documentJson", f"over the {DOCUMENT_LIMIT}-byte limit")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{path}.documentJson", f"not JSON: {exc}") from None
    doc = dict(mapping(doc, f"{path}.documentJson"))
    if doc.get("apiVersion") != POLICY_API:
        raise InvalidInput(f"{path}.documentJson.apiVersion", f"must be {POLICY_API}")
    if doc.get("kind") not in (NAMESPACED, CLUSTER_WIDE):
        raise InvalidInput(f"{path}.documentJson.kind", f"{doc.get('kind')!r} not supported "
                           f"({NAMESPACED} or {CLUSTER_WIDE})")
    policy = parse_policy_object(doc, f"{path}.documentJson")
    for field, given, actual in (("kind", msg.kind, policy.kind), ("namespace", msg.namespace, policy.namespace),
                                 ("name", msg.name, policy.name)):
        if given and given != actual:
            raise InvalidInput(f"{path}.{field}", f"{given!r} differs from the document's {actual!r}")
    return policy, doc


def priority_class_from_proto(msg: objects_pb2.PriorityClass, path: str = "priorityClass") -> PriorityClass:
    try:
        return PriorityClass(msg.name, msg.value, msg.global_default, msg.description,
                             msg.preemption_policy or "PreemptLowerPriority")
    except InvalidInput as exc:
        raise InvalidInput(f"{path}.{exc.path.removeprefix('metadata.')}", exc.rule) from None


def priority_class_to_proto(pc: PriorityClass) -> objects_pb2.PriorityClass:
    return objects_pb2.PriorityClass(name=pc.name, value=pc.value, global_default=pc.global_default,
                                     description=pc.description, preemption_policy=pc.preemption_policy)
