"""Kubernetes Deployments and StatefulSets placed as a gang, realised as themselves.

Volcano schedules a Deployment or StatefulSet as a gang when its pods carry
``scheduling.volcano.sh/group-min-member`` (the PodGroup's minMember) and keeps it in
one HyperNode with ``volcano.sh/network-topology-mode`` (hard|soft) and
``volcano.sh/network-topology-highest-tier`` (volcano-sh/volcano
``docs/user-guide/how_to_use_network_topology_aware_scheduling.md``; the keys are
``staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/labels.go``). The annotations
are read from the pod template (where Volcano's PodGroup controller reads them) or, when
absent there, from the workload's own metadata; ``scheduling.volcano.sh/queue-name``
picks the queue.

The federation places such a workload as a one-task job (task ``pod``, ``replicas``
pods) and the agent creates the workload itself in the member cluster, its pods going to
our scheduler: the cluster's own controllers (ReplicaSet, StatefulSet) create and
recreate the pods, and the agent binds them inside the chosen HyperNode. Every other
field of the workload is passed to the member cluster unchanged, so the cluster honours
it, except that the agent narrows ``spec.selector`` to the job's own pods
(``agents/core/workloads.own_selector``). Refused, naming the field:
``spec.template.spec.nodeName`` (binding is ours) and ``schedulerName`` other than
``volcano`` or ours (as in every job's pod template, ``domain/scheduling.py``), and a
StatefulSet gang without ``podManagementPolicy: Parallel`` (OrderedReady creates pod N+1 only once pod N runs,
so an all-or-nothing gang of more than one pod would never start).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from federation.domain.annotations import check_annotations
from federation.domain.errors import InvalidInput
from federation.domain.manifests_fields import integer, job_namespace, mapping, string, string_map
from federation.domain.pod_security import TEMPLATE_MAX_DEPTH, parse_template
from federation.domain.scheduling import template_constraints

WORKLOAD_API = "apps/v1"
WORKLOAD_KINDS = ("Deployment", "StatefulSet")
WORKLOAD_TASK = "pod"
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
# The Volcano annotations a workload may carry; any other of that family is refused (domain/annotations.py).
HONOURED_ANNOTATIONS = (MIN_MEMBER, TOPOLOGY_MODE, TOPOLOGY_TIER, QUEUE_NAME)


@dataclass(frozen=True)
class Workload:
    """The user's Deployment or StatefulSet (canonical JSON of apiVersion, kind, metadata
    labels/annotations and spec) that the agent creates in the member cluster."""

    kind: str
    body_json: str

    def __post_init__(self) -> None:
        if self.kind not in WORKLOAD_KINDS:
            raise InvalidInput("kind", f"workload kind {self.kind!r} not supported "
                                       f"(one of {', '.join(WORKLOAD_KINDS)})")
        # Bounded like a pod template: a deeply nested body is refused, never a RecursionError.
        body = parse_template(self.body_json, "bodyJson", TEMPLATE_MAX_DEPTH, what=f"a {self.kind}")
        if body.get("kind") != self.kind or not isinstance(body.get("spec"), dict):
            raise InvalidInput("bodyJson", f"must be a {self.kind} object with a spec")
        # The same rules as a manifest's (read_workload), whichever way the body came in.
        object.__setattr__(self, "_read", read_spec(mapping(body.get("metadata"), "bodyJson.metadata"),
                                                    body["spec"], "bodyJson"))

    @property
    def read(self) -> WorkloadSpec:
        """What the federation reads from the body (its replicas, gang, topology and queue
        annotations); the job must say the same (``Job._check_workload``)."""
        found = self.__dict__.get("_read")
        if found is None:  # decoded as stored (store/codec.py, trusted): read it now
            found = read_spec(mapping(self.body.get("metadata"), "bodyJson.metadata"), self.body["spec"], "bodyJson")
            object.__setattr__(self, "_read", found)
        return found

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body_json)
        return parsed

    @cached_property
    def template_json(self) -> str:
        """The pod template (``spec.template``) as canonical JSON, "" if absent: the job's one
        task must carry this very template (``Job``), so that the planner, the Pod Security
        check and the pods the member cluster creates all read the same pods."""
        spec = self.body["spec"]
        return canonical_json(spec["template"]) if "template" in spec else ""

    @cached_property
    def parallel(self) -> bool:
        """A StatefulSet that creates its pods all at once (``podManagementPolicy: Parallel``)."""
        return self.kind != "StatefulSet" or self.body["spec"].get("podManagementPolicy") == "Parallel"


def canonical_json(value: object) -> str:
    """The one JSON text of a template or body (sorted keys, no spaces), as tasks carry it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class WorkloadFields:
    """What the federation reads from a workload document to place it."""

    workload: Workload
    name: str
    namespace: str
    labels: Mapping[str, str]
    replicas: int
    min_member: int | None
    topology_mode: str | None
    topology_tier: int | None
    queue: str
    template: Mapping[str, object]


def _annotation(template_ann: Mapping[str, str], own_ann: Mapping[str, str], key: str) -> tuple[str | None, str]:
    if key in template_ann:
        return template_ann[key], f"spec.template.metadata.annotations[{key}]"
    if key in own_ann:
        return own_ann[key], f"metadata.annotations[{key}]"
    return None, ""


def _int_annotation(value: str | None, where: str, path: str, minimum: int) -> int | None:
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidInput(f"{path}.{where}", f"must be an integer, got {value!r}") from None
    integer(number, f"{path}.{where}")  # an int32 on the wire (min_available)
    if number < minimum:
        raise InvalidInput(f"{path}.{where}", f"must be >= {minimum}")
    return number


@dataclass(frozen=True)
class WorkloadSpec:
    """What the federation reads from a workload's metadata and spec (checked by ``read_spec``)."""

    replicas: int
    min_member: int | None
    topology_mode: str | None
    topology_tier: int | None
    queue: str | None
    template: Mapping[str, object]


def read_spec(meta: Mapping[str, object], spec: Mapping[str, object], path: str) -> WorkloadSpec:
    """The checks of a workload, one rule for a manifest (``read_workload``, ``path`` =
    ``documents[i]``) and a wire body (``Workload``, ``path`` = ``bodyJson``): annotations of
    Volcano's family not honoured here, the gang and topology annotations, and the pod
    template's scheduling fields (``nodeName``, ``schedulerName``: ``domain/scheduling.py``)."""
    template = mapping(spec.get("template"), f"{path}.spec.template")
    tmeta = mapping(template.get("metadata"), f"{path}.spec.template.metadata")
    mapping(template.get("spec"), f"{path}.spec.template.spec")
    own_ann = string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    tmpl_ann = string_map(tmeta.get("annotations"), f"{path}.spec.template.metadata.annotations")
    check_annotations(own_ann, f"{path}.metadata.annotations", HONOURED_ANNOTATIONS)
    check_annotations(tmpl_ann, f"{path}.spec.template.metadata.annotations", HONOURED_ANNOTATIONS)
    replicas = integer(spec.get("replicas", 1), f"{path}.spec.replicas")
    if replicas < 1:
        raise InvalidInput(f"{path}.spec.replicas", "must be >= 1 (a workload scaled to zero has nothing to place)")
    raw, where = _annotation(tmpl_ann, own_ann, MIN_MEMBER)
    min_member = _int_annotation(raw, where, path, 1)
    if min_member is not None and min_member > replicas:
        raise InvalidInput(f"{path}.{where}", f"must not exceed spec.replicas ({replicas})")
    mode, where = _annotation(tmpl_ann, own_ann, TOPOLOGY_MODE)
    if mode is not None and mode not in ("hard", "soft"):
        raise InvalidInput(f"{path}.{where}", f"must be hard or soft, got {mode!r}")
    raw, where = _annotation(tmpl_ann, own_ann, TOPOLOGY_TIER)
    tier = _int_annotation(raw, where, path, 1)
    queue, _ = _annotation(tmpl_ann, own_ann, QUEUE_NAME)
    try:
        template_constraints(canonical_json(template) if "template" in spec else "")
    except InvalidInput as exc:
        raise exc.under(f"{path}.spec.template") from None
    return WorkloadSpec(replicas, min_member, mode, tier, queue, template)


def read_workload(doc: Mapping[str, object], path: str) -> WorkloadFields:
    """One ``apps/v1`` Deployment or StatefulSet document (``path`` = ``documents[i]``).

    A StatefulSet gang without ``podManagementPolicy: Parallel`` is refused by ``Job``
    (the gang is the job's, whichever way it came in)."""
    kind = string(doc.get("kind"), f"{path}.kind")
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    if "name" not in meta:
        raise InvalidInput(f"{path}.metadata.name", "is required")
    spec = mapping(doc.get("spec"), f"{path}.spec")
    read = read_spec(meta, spec, path)
    body = {"apiVersion": WORKLOAD_API, "kind": kind,
            "metadata": {k: meta[k] for k in ("labels", "annotations") if k in meta}, "spec": dict(spec)}
    return WorkloadFields(
        workload=Workload(kind, canonical_json(body)),
        name=string(meta["name"], f"{path}.metadata.name"),
        namespace=job_namespace(meta, path),
        labels=string_map(meta.get("labels"), f"{path}.metadata.labels"),
        replicas=read.replicas, min_member=read.min_member, topology_mode=read.topology_mode,
        topology_tier=read.topology_tier, queue=read.queue or "default", template=read.template,
    )
