"""Volcano ``batch.volcano.sh/v1alpha1`` Job and ``scheduling.volcano.sh/v1beta1`` Queue
documents into domain objects.

Field meanings follow volcano-sh/volcano ``pkg/apis/batch/v1alpha1/job.go`` and
``pkg/apis/scheduling/v1beta1/types.go``. A pod's requests are what the kube-scheduler
would count: per container ``requests`` (a resource given only under ``limits`` defaults
its request to the limit, as Kubernetes does), summed over containers and sidecars, and at
least the init phase's peak (``resources.pod_request``). Job priority: an explicit integer annotation
``federation.io/priority`` wins; otherwise ``priorityClassName`` is looked up in
``PRIORITY_CLASSES`` (a federation has no single cluster's PriorityClass objects to read),
and an unknown class name is refused rather than silently treated as 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from federation.domain.annotations import check_annotations, pod_annotations
from federation.domain.errors import InvalidInput
from federation.domain.job_volumes import parse_volumes
from federation.domain.jobs import (
    DEFAULT_MAX_RETRY,
    RESTART_ACTIONS,
    RESTART_EVENTS,
    Job,
    LifecyclePolicy,
    NetworkTopology,
    PartitionPolicy,
    Task,
)
from federation.domain.manifests_fields import (
    boolean,
    check_keys,
    duration_seconds,
    integer,
    job_namespace,
    mapping,
    sequence,
    string,
    string_map,
    strings,
)
from federation.domain.nodes import Toleration
from federation.domain.pod_requests import pod_requests
from federation.domain.policies import PriorityClass
from federation.domain.propagation import PropagationPolicy
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.domain.workloads import HONOURED_ANNOTATIONS, WORKLOAD_TASK, read_workload

PRIORITY_ANNOTATION = "federation.io/priority"
OWNERS_ANNOTATION = "federation.io/owners"
# Where a queue's pods may go (docs/design/limits.md): Volcano's Queue has no such fields.
NAMESPACES_ANNOTATION = "federation.io/namespaces"
DEFAULT_NAMESPACE_ANNOTATION = "federation.io/default-namespace"
POD_SECURITY_ANNOTATION = "federation.io/pod-security"
SYSTEM_NAMESPACES_ANNOTATION = "federation.io/allow-system-namespaces"
TOPOLOGY_WAIT_ANNOTATION = "federation.io/topology-wait"  # opt-in hold for a lower tier (placement/intent.py)

# priorityClassName -> priority. No class means 0, as in Kubernetes without a globalDefault.
PRIORITY_CLASSES: Mapping[str, int] = {
    "": 0,
    "low": 100,
    "low-priority": 100,
    "normal": 1000,
    "normal-priority": 1000,
    "medium": 1000,
    "high": 10000,
    "high-priority": 10000,
    "critical": 100000,
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}

_JOB_SPEC_KEYS = ("queue", "minAvailable", "minSuccess", "priorityClassName", "maxRetry", "tasks", "policies",
                  "plugins", "networkTopology", "schedulerName", "ttlSecondsAfterFinished", "volumes")
# Refused with their own reasons first (_check_job_fields), then these generic ones.
_JOB_SPEC_UNSUPPORTED = ("runningEstimate",)
_TASK_KEYS = ("name", "replicas", "minAvailable", "template", "policies", "maxRetry", "dependsOn", "partitionPolicy")
_TASK_UNSUPPORTED = ("topologyPolicy",)
# Volcano accepts these in a policy (pkg/webhooks/admission/jobs/validate/util.go); we do not.
_UNSUPPORTED_POLICY_TERMS = {
    "JobUpdated": "a Job here is immutable once submitted (resubmit it), so it is never updated",
    "RestartPartition": "restarting one partition of tasks[].partitionPolicy alone is not implemented",
    "ResumeJob": "a policy cannot resume a job this agent ended",
}
_QUEUE_SPEC_KEYS = ("weight", "priority", "capability", "guarantee", "deserved", "reclaimable", "parent")
_QUEUE_SPEC_UNSUPPORTED = ("affinity", "type", "extendClusters", "dequeueStrategy")


def resolve_priority_class(priority_class: str, applied: Mapping[str, PriorityClass] | None = None) -> tuple[int, str]:
    """(priority, class name) for a job's ``priorityClassName`` (path-less error; callers root it).

    Classes applied to the federation (``fedctl apply`` of scheduling.k8s.io/v1 PriorityClass)
    come first, then the built-in ``PRIORITY_CLASSES``; no class means the applied
    ``globalDefault`` class if there is one (as Kubernetes admission does), else 0.
    """
    applied = applied or {}
    if not priority_class:
        default = next((pc for pc in applied.values() if pc.global_default), None)
        return (default.value, default.name) if default is not None else (0, "")
    if priority_class in applied:
        return applied[priority_class].value, priority_class
    if priority_class in PRIORITY_CLASSES:
        return PRIORITY_CLASSES[priority_class], priority_class
    known = ", ".join(sorted({*applied, *(k for k in PRIORITY_CLASSES if k)}))
    raise InvalidInput("", f"priority class {priority_class!r} not found: apply a PriorityClass "
                           f"(scheduling.k8s.io/v1) first, or use one of {known}")


def explicit_priority(doc: Mapping[str, object]) -> bool:
    """The Job sets its priority itself (the annotation); otherwise the server resolves its class."""
    meta = doc.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return isinstance(annotations, Mapping) and PRIORITY_ANNOTATION in annotations


def _rooted(path: str, exc: InvalidInput) -> InvalidInput:
    return exc.under(path)


# ---------------------------------------------------------------- pods


def _pod_requests(spec: Mapping[str, object], path: str) -> Resources:
    """A manifest pod's requests (``domain/pod_requests.py``, the rule ``Task`` checks), with a container."""
    if not sequence(spec.get("containers"), f"{path}.containers"):
        raise InvalidInput(f"{path}.containers", "at least one container is required")
    return pod_requests(spec, path)


def _tolerations(spec: Mapping[str, object], path: str) -> tuple[Toleration, ...]:
    out: list[Toleration] = []
    for i, raw in enumerate(sequence(spec.get("tolerations"), path)):
        item = mapping(raw, f"{path}[{i}]")
        try:
            out.append(Toleration(
                key=string(item.get("key", ""), f"{path}[{i}].key"),
                # An empty operator is Equal, as in Kubernetes (core/v1 Toleration) and the gRPC path.
                operator=string(item.get("operator", ""), f"{path}[{i}].operator") or "Equal",
                value=string(item.get("value", ""), f"{path}[{i}].value"),
                effect=string(item.get("effect", ""), f"{path}[{i}].effect"),
            ))
        except InvalidInput as exc:
            raise exc if exc.path.startswith(path) else _rooted(f"{path}[{i}]", exc) from None
    return tuple(out)


def parse_tolerations(value: object, path: str) -> tuple[Toleration, ...]:
    """Karmada clusterTolerations (against cluster taints), with ``tolerationSeconds``: how
    long a job stays on a cluster once a NoExecute taint it tolerates is put on
    (propagation/taints.py). Pod tolerations in a task's template are passed to the member
    cluster whole, where Kubernetes honours them."""
    tolerations = _tolerations({"tolerations": value}, path)
    out: list[Toleration] = []
    for i, raw in enumerate(sequence(value, path)):
        item = mapping(raw, f"{path}[{i}]")
        check_keys(item, f"{path}[{i}]", ("key", "operator", "value", "effect", "tolerationSeconds"))
        if "tolerationSeconds" not in item:
            out.append(tolerations[i])
            continue
        seconds = integer(item["tolerationSeconds"], f"{path}[{i}].tolerationSeconds", wire=None)  # Toleration: 10y
        try:
            out.append(replace(tolerations[i], seconds=seconds))
        except InvalidInput as exc:
            raise exc.under(f"{path}[{i}]") from None
    return tuple(out)


# ---------------------------------------------------------------- policies


def _policy(raw: object, path: str) -> LifecyclePolicy:
    item = mapping(raw, path)
    check_keys(item, path, ("event", "events", "action", "exitCode", "timeout"))
    events: list[str] = []
    named = [(f"{path}.event", item["event"])] if "event" in item else []
    named += [(f"{path}.events[{k}]", e) for k, e in enumerate(sequence(item.get("events"), f"{path}.events"))]
    for where, value in named:
        event = string(value, where)
        if event in _UNSUPPORTED_POLICY_TERMS:
            raise InvalidInput(where, f"{event} not supported: {_UNSUPPORTED_POLICY_TERMS[event]}")
        if event not in RESTART_EVENTS:
            raise InvalidInput(where, f"unknown event {event!r} (one of {', '.join(RESTART_EVENTS)})")
        if event not in events:
            events.append(event)
    if "action" not in item:
        raise InvalidInput(f"{path}.action", "is required")
    action = string(item["action"], f"{path}.action")
    if action in _UNSUPPORTED_POLICY_TERMS:
        raise InvalidInput(f"{path}.action", f"{action} not supported: {_UNSUPPORTED_POLICY_TERMS[action]}")
    if action not in RESTART_ACTIONS:
        raise InvalidInput(f"{path}.action", f"unknown action {action!r} (one of {', '.join(RESTART_ACTIONS)})")
    exit_code = integer(item["exitCode"], f"{path}.exitCode") if "exitCode" in item else None
    timeout = duration_seconds(item["timeout"], f"{path}.timeout") if "timeout" in item else None
    try:
        return LifecyclePolicy(action=action, events=tuple(events), exit_code=exit_code, timeout_seconds=timeout)
    except InvalidInput as exc:
        raise _rooted(path, exc) from None


def _policies(value: object, path: str) -> tuple[LifecyclePolicy, ...]:
    return tuple(_policy(raw, f"{path}[{i}]") for i, raw in enumerate(sequence(value, path)))


# ---------------------------------------------------------------- tasks and jobs


def _task(raw: object, path: str, carried: Mapping[str, str] | None = None,
          honoured: tuple[str, ...] = ()) -> tuple[Task, tuple[Toleration, ...]]:
    """One task; ``carried`` are the Job's annotations its pods carry (under the template's
    own), ``honoured`` the scheduling-family annotations the caller reads from the template."""
    item = mapping(raw, path)
    if "networkTopology" in item:  # Volcano's CRD has none here: its API server prunes it unseen
        raise InvalidInput(f"{path}.networkTopology", "not supported: a Volcano task has no networkTopology (its "
                           "API server drops the field); a partition's goes under partitionPolicy.networkTopology")
    check_keys(item, path, _TASK_KEYS, _TASK_UNSUPPORTED)
    for key in ("name", "replicas", "template"):
        if key not in item:
            raise InvalidInput(f"{path}.{key}", "is required")
    template = mapping(item["template"], f"{path}.template")
    tmeta = mapping(template.get("metadata"), f"{path}.template.metadata")
    own = string_map(tmeta.get("annotations"), f"{path}.template.metadata.annotations")
    check_annotations(own, f"{path}.template.metadata.annotations", honoured)
    if carried:
        template = {**template, "metadata": {**tmeta, "annotations": {**carried, **own}}}
    pod_spec = mapping(template.get("spec"), f"{path}.template.spec")
    resources = _pod_requests(pod_spec, f"{path}.template.spec")
    tolerations = _tolerations(pod_spec, f"{path}.template.spec.tolerations")
    depends_on, depends_on_any = _depends_on(item.get("dependsOn"), f"{path}.dependsOn")
    partitions = (_partition_policy(item["partitionPolicy"], f"{path}.partitionPolicy")
                  if item.get("partitionPolicy") is not None else None)
    try:
        task = Task(
            name=string(item["name"], f"{path}.name"),
            replicas=integer(item["replicas"], f"{path}.replicas"),
            resources=resources,
            min_available=integer(item["minAvailable"], f"{path}.minAvailable") if "minAvailable" in item else None,
            policies=_policies(item.get("policies"), f"{path}.policies"),
            max_retry=integer(item["maxRetry"], f"{path}.maxRetry") if "maxRetry" in item else None,
            template_json=json.dumps(template, sort_keys=True, separators=(",", ":"), default=str),
            depends_on=depends_on,
            depends_on_any=depends_on_any,
            partition_policy=partitions,
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else _rooted(path, exc) from None
    return task, tolerations


def _partition_policy(value: object, path: str) -> PartitionPolicy:
    """Volcano ``partitionPolicy`` (totalPartitions and partitionSize required, as its CRD says)."""
    item = mapping(value, path)
    check_keys(item, path, ("totalPartitions", "partitionSize", "minPartitions", "networkTopology"))
    for key in ("totalPartitions", "partitionSize"):
        if key not in item:
            raise InvalidInput(f"{path}.{key}", "is required")
    topology = (_network_topology(item["networkTopology"], f"{path}.networkTopology")
                if item.get("networkTopology") is not None else None)
    try:
        return PartitionPolicy(
            total_partitions=integer(item["totalPartitions"], f"{path}.totalPartitions"),
            partition_size=integer(item["partitionSize"], f"{path}.partitionSize"),
            min_partitions=integer(item.get("minPartitions", 0), f"{path}.minPartitions"),
            network_topology=topology,
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else _rooted(path, exc) from None


def _depends_on(value: object, path: str) -> tuple[tuple[str, ...], bool]:
    """Volcano ``dependsOn: {name: [tasks], iteration: any|all}`` (all by default)."""
    if value is None:
        return (), False
    item = mapping(value, path)
    check_keys(item, path, ("name", "iteration"))
    names = strings(item.get("name"), f"{path}.name")
    if not names:
        raise InvalidInput(f"{path}.name", "at least one task is required")
    iteration = string(item.get("iteration", "all"), f"{path}.iteration")
    if iteration not in ("any", "all"):
        raise InvalidInput(f"{path}.iteration", "must be any or all")
    return names, iteration == "any"
def _check_job_fields(meta: Mapping[str, object], spec: Mapping[str, object], path: str) -> None:
    """Job fields accepted only where their meaning holds here (docs/design/compatibility.md)."""
    if "name" not in meta:
        hint = (" (generateName not supported: a job is addressed by a stable name, as kubectl apply requires)"
                if "generateName" in meta else "")
        raise InvalidInput(f"{path}.metadata.name", f"is required{hint}")
    scheduler = spec.get("schedulerName", "volcano")
    if scheduler != "volcano":
        raise InvalidInput(f"{path}.spec.schedulerName", f"{scheduler!r} not supported: only volcano, whose gang "
                           "placement and binding the federation performs itself")
    if "runningEstimate" in spec:
        raise InvalidInput(f"{path}.spec.runningEstimate", "not supported: the planner does not use run-time "
                           "estimates")


def _max_retry(spec: Mapping[str, object], path: str) -> int:
    """``spec.maxRetry``, where 0 (or none) means 3: Volcano's job admission writes 3 over
    a zero (pkg/webhooks/admission/jobs/mutate ``patchDefaultMaxRetry``), so a Volcano job
    saying ``maxRetry: 0`` is restarted like one saying nothing."""
    value = integer(spec["maxRetry"], f"{path}.spec.maxRetry") if "maxRetry" in spec else 0
    return value or DEFAULT_MAX_RETRY


def _min_available(spec: Mapping[str, object], path: str) -> int | None:
    """``spec.minAvailable``, where 0 means absent: Volcano's job admission fills a zero in
    as it fills in an absent one (``Job.gang_size`` says with what)."""
    value = integer(spec["minAvailable"], f"{path}.spec.minAvailable") if "minAvailable" in spec else 0
    return value or None


def _named(raw: object, index: int) -> object:
    """A task without a name is named ``default<index>``, as Volcano's job admission webhook
    does (volcano-sh/volcano pkg/webhooks/admission/jobs/mutate ``mutateSpec``:
    ``DefaultTaskSpec + strconv.Itoa(index)``, DefaultTaskSpec = "default")."""
    if isinstance(raw, Mapping) and not raw.get("name"):
        return {**raw, "name": f"default{index}"}
    return raw


def _network_topology(value: object, path: str) -> NetworkTopology:
    item = mapping(value, path)
    check_keys(item, path, ("mode", "highestTierAllowed", "highestTierName"))
    try:
        return NetworkTopology(
            mode=string(item.get("mode", "hard"), f"{path}.mode"),
            highest_tier_allowed=integer(item["highestTierAllowed"], f"{path}.highestTierAllowed")
            if "highestTierAllowed" in item else None,
            highest_tier_name=string(item["highestTierName"], f"{path}.highestTierName")
            if "highestTierName" in item else None,
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else _rooted(path, exc) from None


def _plugins(value: object, path: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    raw = mapping(value, path)
    return tuple((name, strings(raw[name], f"{path}.{name}")) for name in sorted(raw))


def _priority(annotations: Mapping[str, str], priority_class: str, path: str) -> int:
    if PRIORITY_ANNOTATION in annotations:
        text, where = annotations[PRIORITY_ANNOTATION].strip(), f"{path}.metadata.annotations[{PRIORITY_ANNOTATION}]"
        try:
            number = int(text)
        except ValueError:
            raise InvalidInput(where, f"must be an integer, got {text!r}") from None
        return integer(number, where)  # an int32 on the wire
    # Built-in classes resolve here; any other is resolved by the server against the
    # PriorityClasses applied to the federation (0 is a placeholder, never sent).
    return PRIORITY_CLASSES.get(priority_class, 0)


def _topology_wait(annotations: Mapping[str, str], path: str) -> float | None:
    if TOPOLOGY_WAIT_ANNOTATION not in annotations:
        return None
    return duration_seconds(annotations[TOPOLOGY_WAIT_ANNOTATION],
                            f"{path}.metadata.annotations[{TOPOLOGY_WAIT_ANNOTATION}]")


def _common_tolerations(per_task: list[tuple[Toleration, ...]]) -> tuple[Toleration, ...]:
    """Tolerations every task's pods carry: the job-level set the planner may rely on."""
    if not per_task:
        return ()
    return tuple(t for t in per_task[0] if all(t in other for other in per_task[1:]))


def parse_job(doc: Mapping[str, object], path: str, propagation: PropagationPolicy | None) -> Job:
    """One Volcano Job document (``path`` is ``documents[i]``) into a domain Job."""
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    spec = mapping(doc.get("spec"), f"{path}.spec")
    _check_job_fields(meta, spec, path)
    check_keys(spec, f"{path}.spec", _JOB_SPEC_KEYS, _JOB_SPEC_UNSUPPORTED)
    annotations = string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    check_annotations(annotations, f"{path}.metadata.annotations")
    carried = pod_annotations(annotations)
    priority_class = string(spec.get("priorityClassName", ""), f"{path}.spec.priorityClassName")
    parsed = [_task(_named(raw, i), f"{path}.spec.tasks[{i}]", carried)
              for i, raw in enumerate(sequence(spec.get("tasks"), f"{path}.spec.tasks"))]
    topology = spec.get("networkTopology")
    try:
        return Job(
            name=string(meta["name"], f"{path}.metadata.name"),
            namespace=job_namespace(meta, path),
            labels=tuple(string_map(meta.get("labels"), f"{path}.metadata.labels").items()),
            queue=string(spec.get("queue", "default"), f"{path}.spec.queue"),
            tasks=tuple(task for task, _ in parsed),
            min_available=_min_available(spec, path),
            priority=_priority(annotations, priority_class, path),
            priority_class=priority_class,
            network_topology=_network_topology(topology, f"{path}.spec.networkTopology")
            if topology is not None else None,
            policies=_policies(spec.get("policies"), f"{path}.spec.policies"),
            plugins=_plugins(spec.get("plugins"), f"{path}.spec.plugins"),
            max_retry=_max_retry(spec, path),
            propagation=propagation,
            tolerations=_common_tolerations([tols for _, tols in parsed]),
            topology_wait_seconds=_topology_wait(annotations, path),
            min_success=integer(spec["minSuccess"], f"{path}.spec.minSuccess") if "minSuccess" in spec else None,
            ttl_seconds_after_finished=integer(spec["ttlSecondsAfterFinished"], f"{path}.spec.ttlSecondsAfterFinished",
                                               wire=None) if "ttlSecondsAfterFinished" in spec else None,
            volumes=parse_volumes(spec.get("volumes"), f"{path}.spec.volumes"),
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else _rooted(path, exc) from None


def parse_workload(doc: Mapping[str, object], path: str, propagation: PropagationPolicy | None) -> Job:
    """An ``apps/v1`` Deployment or StatefulSet with Volcano's gang and topology
    annotations as a one-task job carrying the workload (federation/domain/workloads.py)."""
    fields = read_workload(doc, path)
    task, tolerations = _task({"name": WORKLOAD_TASK, "replicas": fields.replicas, "template": fields.template},
                              f"{path}.spec", honoured=HONOURED_ANNOTATIONS)
    pod_spec = mapping(fields.template.get("spec"), f"{path}.spec.template.spec")
    priority_class = string(pod_spec.get("priorityClassName", ""), f"{path}.spec.template.spec.priorityClassName")
    annotations = string_map(mapping(doc.get("metadata"), f"{path}.metadata").get("annotations"),
                             f"{path}.metadata.annotations")
    try:
        priority = _priority(annotations, priority_class, path)
    except InvalidInput as exc:  # the class of a workload sits in its pod template
        raise InvalidInput(exc.path.replace(f"{path}.spec.", f"{path}.spec.template.spec."), exc.rule) from None
    topology = None
    if fields.topology_mode is not None or fields.topology_tier is not None:
        topology = NetworkTopology(mode=fields.topology_mode or "hard", highest_tier_allowed=fields.topology_tier)
    try:
        return Job(
            name=fields.name, namespace=fields.namespace, labels=tuple(fields.labels.items()), queue=fields.queue,
            tasks=(task,), min_available=fields.min_member,
            priority=priority,
            priority_class=priority_class, network_topology=topology, propagation=propagation,
            tolerations=tolerations, workload=fields.workload,
        )
    except InvalidInput as exc:
        raise exc if exc.path.startswith(path) else _rooted(path, exc) from None


# ---------------------------------------------------------------- queues


def parse_queue(doc: Mapping[str, object], path: str) -> Queue:
    """One Volcano Queue document; tenants come from the ``federation.io/owners`` annotation."""
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    spec = mapping(doc.get("spec"), f"{path}.spec")
    check_keys(spec, f"{path}.spec", _QUEUE_SPEC_KEYS, _QUEUE_SPEC_UNSUPPORTED)
    if "name" not in meta:
        raise InvalidInput(f"{path}.metadata.name", "is required")
    annotations = string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    check_annotations(annotations, f"{path}.metadata.annotations")
    owners = tuple(o.strip() for o in annotations.get(OWNERS_ANNOTATION, "").split(",") if o.strip())
    guarantee = mapping(spec.get("guarantee"), f"{path}.spec.guarantee")
    check_keys(guarantee, f"{path}.spec.guarantee", ("resource",))
    sp = f"{path}.spec"

    def vector(key: str) -> Resources | None:
        return Resources.parse(mapping(spec[key], f"{sp}.{key}"), f"{sp}.{key}") if key in spec else None

    try:
        return Queue(
            name=string(meta["name"], f"{path}.metadata.name"),
            weight=integer(spec.get("weight", 1), f"{sp}.weight"),
            priority=integer(spec.get("priority", 0), f"{sp}.priority"),
            capability=vector("capability"),
            guarantee=Resources.parse(mapping(guarantee.get("resource"), f"{sp}.guarantee.resource"),
                                      f"{sp}.guarantee.resource"),
            deserved=vector("deserved"),
            reclaimable=boolean(spec.get("reclaimable", True), f"{sp}.reclaimable"),
            parent=string(spec["parent"], f"{sp}.parent") if spec.get("parent") else None,
            owners=owners,
            **_pod_rules(annotations, f"{path}.metadata.annotations"),
            topology_wait_seconds=_topology_wait(annotations, path),
        )
    except InvalidInput as exc:
        if exc.path.startswith(path):
            raise
        if exc.path == "name":
            raise InvalidInput(f"{path}.metadata.name", exc.rule) from None
        if exc.path == "topologyWaitSeconds":
            raise InvalidInput(f"{path}.metadata.annotations[{TOPOLOGY_WAIT_ANNOTATION}]", exc.rule) from None
        raise exc.under(sp) from None


def _pod_rules(annotations: Mapping[str, str], path: str) -> dict[str, Any]:
    """A queue's namespaces, default namespace, Pod Security level and system-namespace opt-in."""
    out: dict[str, Any] = {}
    namespaces = tuple(n.strip() for n in annotations.get(NAMESPACES_ANNOTATION, "").split(",") if n.strip())
    if namespaces:
        out["namespaces"] = namespaces
    if DEFAULT_NAMESPACE_ANNOTATION in annotations:
        out["default_namespace"] = annotations[DEFAULT_NAMESPACE_ANNOTATION].strip()
    elif namespaces:
        out["default_namespace"] = namespaces[0]
    if POD_SECURITY_ANNOTATION in annotations:
        out["pod_security"] = annotations[POD_SECURITY_ANNOTATION].strip()
    if SYSTEM_NAMESPACES_ANNOTATION in annotations:
        value = annotations[SYSTEM_NAMESPACES_ANNOTATION].strip().lower()
        if value not in ("true", "false"):
            raise InvalidInput(f"{path}[{SYSTEM_NAMESPACES_ANNOTATION!r}]", "must be \"true\" or \"false\"")
        out["allow_system_namespaces"] = value == "true"
    return out
