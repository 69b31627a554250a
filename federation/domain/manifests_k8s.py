"""Kubernetes ``scheduling.k8s.io/v1`` PriorityClass documents.

Fields as in k8s.io/api ``scheduling/v1`` PriorityClass: ``value`` (required), ``globalDefault``
(the class of pods, here jobs, that name none), ``description``, ``preemptionPolicy``.
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.domain.errors import InvalidInput
from federation.domain.manifests_fields import boolean, check_keys, integer, mapping, string
from federation.domain.policies import PriorityClass

PRIORITY_CLASS_API = "scheduling.k8s.io/v1"
_KEYS = ("apiVersion", "kind", "metadata", "value", "globalDefault", "description", "preemptionPolicy")


def parse_priority_class(doc: Mapping[str, object], path: str) -> PriorityClass:
    """One PriorityClass document (``path`` is ``documents[i]``)."""
    check_keys(doc, path, _KEYS)
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    if "value" not in doc:
        raise InvalidInput(f"{path}.value", "is required")
    try:
        return PriorityClass(
            name=string(meta.get("name", ""), f"{path}.metadata.name"),
            value=integer(doc["value"], f"{path}.value"),
            global_default=boolean(doc.get("globalDefault", False), f"{path}.globalDefault"),
            description=string(doc.get("description", ""), f"{path}.description"),
            preemption_policy=string(doc.get("preemptionPolicy", "PreemptLowerPriority"), f"{path}.preemptionPolicy"),
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else exc.under(path) from None
