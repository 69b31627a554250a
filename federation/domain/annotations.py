"""Annotations in Volcano's and Kubernetes' scheduling families: honoured or refused, never dropped.

Volcano configures much of its scheduler through annotations (``volcano.sh/preemptable``
for the tdm plugin, ``volcano.sh/sla-waiting-time`` for sla,
``volcano.sh/numa-topology-policy`` for numa-aware, ``scheduling.k8s.io/group-name`` that
ties a pod to its PodGroup, …; volcano-sh/apis ``pkg/apis/scheduling/v1beta1/labels.go``
and ``pkg/apis/batch/v1alpha1/labels.go``). Our pods go to the federation's scheduler, not
Volcano's, so such an annotation would be carried to the member cluster and read by
nobody: a silently dropped field. Every key of those families (any domain ending in
``volcano.sh``, and ``scheduling.k8s.io``) is therefore refused naming the key and saying
"not supported", unless the object's parser lists it as honoured (a Deployment's
``scheduling.volcano.sh/group-min-member``, say). Where a field says the same thing the
reason points at the field.

Every other annotation is the user's: a Job's are copied onto its pods (under the pod
template's own, which win), as the pod template's are; see ``pod_annotations``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from federation.domain.errors import InvalidInput

# volcano.sh/…, scheduling.volcano.sh/…, batch.volcano.sh/…, topology.volcano.sh/…, and
# Kubernetes' scheduling.k8s.io/… (where Volcano's PodGroup keys live).
_FAMILY = re.compile(r"^(?:[a-z0-9.-]+\.)?volcano\.sh/|^scheduling\.k8s\.io/")

# Known keys, with why each is not supported here (the rest get the generic reason).
_REASONS: Mapping[str, str] = {
    "volcano.sh/preemptable": "who may be preempted follows priorities, queues and the PriorityClass's "
                              "preemptionPolicy; Volcano's per-job preemptable flag (tdm/preempt) is not implemented",
    "volcano.sh/sla-waiting-time": "Volcano's sla plugin is not implemented",
    "volcano.sh/numa-topology-policy": "Volcano's numa-aware plugin is not implemented",
    "volcano.sh/resource-strategy-scoring-type": "Volcano's resource-strategy-fit plugin is not implemented",
    "volcano.sh/resource-strategy-weight": "Volcano's resource-strategy-fit plugin is not implemented",
    "volcano.sh/revocable-zone": "revocable zones (Volcano's tdm plugin) are not implemented",
    "volcano.sh/jdb-min-available": "Volcano's job disruption budget is not implemented",
    "volcano.sh/jdb-max-unavailable": "Volcano's job disruption budget is not implemented",
    "volcano.sh/hierarchy": "express the hierarchy with spec.parent and each queue's spec.weight "
                            "(Volcano's hierarchical queues)",
    "volcano.sh/hierarchy-weights": "express the hierarchy with spec.parent and each queue's spec.weight "
                                    "(Volcano's hierarchical queues)",
    "scheduling.k8s.io/group-name": "the federation forms the gang itself (no PodGroup object)",
    "scheduling.volcano.sh/queue-name": "on a Volcano Job the queue is spec.queue",
    "scheduling.volcano.sh/group-min-member": "on a Volcano Job the gang is spec.minAvailable",
    "volcano.sh/network-topology-mode": "on a Volcano Job use spec.networkTopology.mode",
    "volcano.sh/network-topology-highest-tier": "on a Volcano Job use spec.networkTopology.highestTierAllowed",
}
_GENERIC = "the federation's scheduler does not read this Volcano/scheduling annotation"

# Describes the object as kubectl applied it, not the pod: never copied onto pods.
_NOT_COPIED = ("kubectl.kubernetes.io/last-applied-configuration",)
_OURS = "federation.io/"


def in_family(key: str) -> bool:
    """``key`` belongs to Volcano's or Kubernetes' scheduling annotations."""
    return _FAMILY.match(key) is not None


def check_annotations(annotations: Mapping[str, str], path: str, honoured: Collection[str] = ()) -> None:
    """Refuse the first Volcano/scheduling annotation not in ``honoured``, naming it
    (``path`` is where the annotations sit, e.g. ``documents[0].metadata.annotations``)."""
    for key in sorted(annotations):
        if in_family(key) and key not in honoured:
            supported = f" (honoured here: {', '.join(sorted(honoured))})" if honoured else ""
            raise InvalidInput(f"{path}[{key}]", f"not supported: {_REASONS.get(key, _GENERIC)}{supported}")


def pod_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """A Job's annotations its pods carry: all but ours (``federation.io/``, read by the
    federation), kubectl's last-applied record, and the scheduling family (refused before)."""
    return {k: v for k, v in annotations.items()
            if not k.startswith(_OURS) and k not in _NOT_COPIED and not in_family(k)}
