"""Translate between Kubernetes JSON objects and the agent's plain records.

Pure functions over the JSON the apiserver sends (dicts, never the generated model
classes: building those is slow and they are not needed), so they are unit-tested with
literals. The direction that matters most is ``pod_body``: a ``PodManifest`` merged
into the user's pod template, with our scheduler name and never a ``nodeName``, so that
the pod waits unbound until the agent binds the whole gang.

Read-back symmetry (agents/backend.py): a pod created from a manifest is read back with
the manifest's labels, annotations and requests; services and config maps likewise.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agents.core.records import (
    SSH_CONFIG,
    SSH_PRIVATE_KEY,
    SSH_PUBLIC_KEY,
    SSH_SUBPATH,
    ConfigMapManifest,
    NetworkPolicyManifest,
    NodeRecord,
    PodManifest,
    PodRecord,
    SecretManifest,
    ServiceManifest,
    SshMount,
    WorkloadManifest,
)
from federation.domain.errors import InvalidInput
from federation.domain.nodes import TAINT_EFFECTS, Taint, Toleration
from federation.domain.resources import Resources, format_quantity, pod_request
from federation.domain.states import TERMINAL_POD_PHASES, PodPhase
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector

JSON = dict[str, Any]

HYPERNODE_GROUP, HYPERNODE_VERSION, HYPERNODE_PLURAL = "topology.volcano.sh", "v1alpha1", "hypernodes"
# The image used when a Work carries no pod template (tests, synthetic work).
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
# Resources Kubernetes lets a container request without an equal limit; every other
# resource (extended resources such as nvidia.com/gpu, hugepages) needs limit == request.
_OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name); namespace is "" for cluster-scoped objects."""
    meta = _meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def resource_version(obj: Mapping[str, Any]) -> int:
    """The object's resourceVersion as an integer (0 when absent or opaque).

    Resource versions are formally opaque; every apiserver backed by etcd uses the etcd
    revision, which is what lets the cache order its own writes against watch events.
    """
    try:
        return int(str(_meta(obj).get("resourceVersion") or "0"))
    except ValueError:
        return 0


def timestamp(value: object) -> float:
    """RFC 3339 (``2026-01-02T03:04:05Z``, with or without fractions) to epoch seconds."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _resources(values: object) -> Resources:
    """Parse a quantity map leniently: the apiserver validated it, and a resource we
    cannot parse (none known) must not make a whole node or pod unreadable."""
    out: dict[str, int] = {}
    for name, raw in _strings(values).items():
        try:
            out[name] = Resources.parse({name: raw}).get(name)
        except InvalidInput:
            continue
    return Resources(out)


# ------------------------------------------------------------------ nodes


def node_record(obj: Mapping[str, Any]) -> NodeRecord:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = tuple(
        Taint(key=str(t["key"]), value=str(t.get("value") or ""), effect=str(t.get("effect")))
        for t in spec.get("taints") or []
        if t.get("key") and t.get("effect") in TAINT_EFFECTS
    )
    return NodeRecord(
        name=str(meta.get("name")),
        allocatable=_resources(status.get("allocatable")),
        labels=_strings(meta.get("labels")),
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


# ------------------------------------------------------------------ pods


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What the scheduler accounts for a pod (``resources.pod_request``: containers and
    sidecars, raised to the init phase's peak) plus the pod overhead."""
    containers = [_resources((c.get("resources") or {}).get("requests")) for c in spec.get("containers") or []]
    inits = [(_resources((c.get("resources") or {}).get("requests")), c.get("restartPolicy") == "Always")
             for c in spec.get("initContainers") or []]
    return pod_request(containers, inits) + _resources(spec.get("overhead"))


def _container_statuses(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _phase_since(obj: Mapping[str, Any], phase: str) -> float:
    """When the pod entered ``phase``, from fields that do not change while it stays
    there (so a pod read twice gives the same value: recovery keys events on it)."""
    status = obj.get("status") or {}
    statuses = _container_statuses(status)
    if phase in TERMINAL_POD_PHASES:
        finished = [timestamp((s.get("state") or {}).get("terminated", {}).get("finishedAt")) for s in statuses]
        if any(finished):
            return max(finished)
        stamps = [timestamp(c.get("lastTransitionTime")) for c in status.get("conditions") or []]
        if any(stamps):
            return max(stamps)
    elif phase == PodPhase.RUNNING:
        started = [timestamp((s.get("state") or {}).get("running", {}).get("startedAt")) for s in statuses]
        if any(started):
            return max(started)
        if status.get("startTime"):
            return timestamp(status.get("startTime"))
    return timestamp(_meta(obj).get("creationTimestamp"))


def _exit_code(status: Mapping[str, Any]) -> int | None:
    for s in _container_statuses(status):
        terminated = (s.get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping) and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def _reason(status: Mapping[str, Any]) -> str:
    """The pod-level reason (Evicted, Preempting, NodeLost …), else the first
    terminated container's reason (Error, OOMKilled, Completed)."""
    if status.get("reason"):
        return str(status["reason"])
    for s in _container_statuses(status):
        terminated = (s.get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping) and terminated.get("reason"):
            return str(terminated["reason"])
    return ""


def pod_record(obj: Mapping[str, Any]) -> PodRecord:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    phase = str(status.get("phase") or PodPhase.PENDING)
    return PodRecord(
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace") or "default"),
        labels=_strings(meta.get("labels")),
        annotations=_strings(meta.get("annotations")),
        node=str(spec["nodeName"]) if spec.get("nodeName") else None,
        phase=phase,
        reason=_reason(status),
        restarts=sum(int(s.get("restartCount") or 0) for s in status.get("containerStatuses") or []),
        requests=pod_requests(spec),
        deleting=bool(meta.get("deletionTimestamp")),
        exit_code=_exit_code(status),
        phase_since=_phase_since(obj, phase),
        message=str(status.get("message") or ""),
        uid=str(meta.get("uid") or ""),
    )


def _toleration(t: Toleration) -> JSON:
    out: JSON = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    return out


def _with_limits(resources: Mapping[str, Any]) -> JSON:
    """Give every request that Kubernetes refuses without a limit (GPUs, hugepages) an
    equal limit, as device plugins require; the user's explicit limits stay."""
    out = {k: dict(v) for k, v in resources.items() if isinstance(v, Mapping)}
    requests, limits = out.get("requests", {}), out.setdefault("limits", {})
    for name, amount in requests.items():
        if name not in _OVERCOMMITTABLE and name not in limits:
            limits[name] = amount
    if not limits:
        out.pop("limits")
    return out


def _ssh_volume(ssh: SshMount) -> JSON:
    """Volcano's ssh volume: the key pair, the public key again as ``authorized_keys``
    and the config, under ``.ssh/`` (mounted with that subPath) with the plugin's mode."""
    items = [(SSH_PRIVATE_KEY, SSH_PRIVATE_KEY), (SSH_PUBLIC_KEY, SSH_PUBLIC_KEY),
             (SSH_PUBLIC_KEY, "authorized_keys"), (SSH_CONFIG, SSH_CONFIG)]
    return {"name": ssh.secret, "secret": {
        "secretName": ssh.secret, "defaultMode": ssh.mode,
        "items": [{"key": key, "path": f"{SSH_SUBPATH}/{path}"} for key, path in items]}}


def _open_ports(current: Sequence[Mapping[str, Any]], ours: Sequence[tuple[str, int]]) -> list[JSON]:
    """The container's ports plus each plugin port it does not already open (Volcano's
    openContainerPort: a port already listed, under any name, is left alone)."""
    ports = [dict(p) for p in current]
    for name, number in ours:
        if not any(p.get("containerPort") == number for p in ports):
            ports.append({"name": name, "containerPort": number})
    return ports


def _merge_env(current: Sequence[Mapping[str, Any]], ours: Sequence[tuple[str, str]]) -> list[JSON]:
    names = {name for name, _ in ours}
    return [dict(e) for e in current if e.get("name") not in names] + [{"name": n, "value": v} for n, v in ours]


def pod_body(m: PodManifest) -> JSON:
    """The pod to create: the user's template (``template_json``) with our labels,
    annotations, scheduler name, hostname/subdomain, tolerations, node selector, the
    plugins' environment on every container, the host files mounted and the job's
    ``spec.volumes`` claims mounted in every container (not init containers: Volcano's
    ``createJobPod`` mounts them in ``containers`` only).

    ``nodeName`` is removed on purpose: binding is a separate all-or-nothing step. A
    template without containers (synthetic Work) gets one pause container carrying the
    requests; a template whose containers request nothing gets the requests on its first
    container, so the cluster accounts the room the planner counted. ``restartPolicy``
    defaults to ``Never``: restarts are the agent's decision under the job's policies.
    """
    template: JSON = json.loads(m.template_json) if m.template_json else {}
    tmeta = template.get("metadata") or {}
    spec: JSON = copy.deepcopy(template.get("spec") or {})
    spec.pop("nodeName", None)
    spec["schedulerName"] = m.scheduler_name
    spec.setdefault("restartPolicy", "Never")
    if m.hostname:
        spec["hostname"] = m.hostname
    if m.subdomain:
        spec["subdomain"] = m.subdomain
    if m.node_selector:
        spec["nodeSelector"] = {**_strings(spec.get("nodeSelector")), **m.node_selector}
    tolerations = list(spec.get("tolerations") or [])
    for t in (_toleration(t) for t in m.tolerations):
        if t not in tolerations:
            tolerations.append(t)
    if tolerations:
        spec["tolerations"] = tolerations
    if spec.get("priorityClassName"):  # the task's own class, which the cluster has (agents/core/priority.py)
        spec.pop("priority", None)  # admission sets it from the class
    elif m.priority_class_name:  # the job's, as the member cluster holds it
        spec["priorityClassName"] = m.priority_class_name
        if m.priority is not None:
            spec["priority"] = m.priority
        else:
            spec.pop("priority", None)

    requests = {k: format_quantity(k, v) for k, v in m.requests}
    containers = [dict(c) for c in spec.get("containers") or []]
    if not containers:
        containers = [{"name": "main", "image": DEFAULT_IMAGE}]
    if requests and not any((c.get("resources") or {}).get("requests") for c in containers):
        containers[0]["resources"] = {**(containers[0].get("resources") or {}), "requests": requests}
    volumes = [dict(v) for v in spec.get("volumes") or []]
    mounts: list[JSON] = []
    for i, (config_map, path) in enumerate(m.config_map_mounts):
        volume = f"federation-hosts-{i}"
        volumes = [v for v in volumes if v.get("name") != volume]
        volumes.append({"name": volume, "configMap": {"name": config_map}})
        mounts.append({"name": volume, "mountPath": path, "readOnly": True})
    if m.ssh is not None:
        volumes = [v for v in volumes if v.get("name") != m.ssh.secret] + [_ssh_volume(m.ssh)]
        mounts.append({"name": m.ssh.secret, "mountPath": m.ssh.path, "subPath": SSH_SUBPATH})
    for volume, claim, path in m.claim_mounts:  # the job's spec.volumes (paths checked unique at submission)
        volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": volume, "mountPath": path})
    for c in containers:
        if c.get("resources"):
            c["resources"] = _with_limits(c["resources"])
        if m.env:
            c["env"] = _merge_env(c.get("env") or [], m.env)
        if mounts:
            paths = {mt["mountPath"] for mt in mounts}
            c["volumeMounts"] = [mt for mt in c.get("volumeMounts") or [] if mt.get("mountPath") not in paths] + mounts
        if m.ports:
            c["ports"] = _open_ports(c.get("ports") or [], m.ports)
    spec["containers"] = containers
    for c in spec.get("initContainers") or []:
        if c.get("resources"):
            c["resources"] = _with_limits(c["resources"])
    if volumes:
        spec["volumes"] = volumes
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": m.name,
            "namespace": m.namespace,
            "labels": {**_strings(tmeta.get("labels")), **m.labels},
            "annotations": {**_strings(tmeta.get("annotations")), **m.annotations},
        },
        "spec": spec,
    }


def workload_body(m: WorkloadManifest) -> JSON:
    """The Deployment/StatefulSet to create: the rendered object, with every container
    request Kubernetes refuses without a limit (GPUs) given an equal limit, as for pods."""
    body: JSON = json.loads(m.body_json)
    pod_spec = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
    for c in [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]:
        if c.get("resources"):
            c["resources"] = _with_limits(c["resources"])
    return body


def binding_body(name: str, node: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


# ------------------------------------------------------------------ services and config maps


def service_body(m: ServiceManifest) -> JSON:
    """A headless Service (``clusterIP: None``): DNS records per pod, no virtual IP."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": m.name, "namespace": m.namespace, "labels": dict(m.labels),
                     "annotations": dict(m.annotations)},
        "spec": {"clusterIP": "None", "selector": dict(m.selector),
                 "publishNotReadyAddresses": m.publish_not_ready_addresses},
    }


def service_record(obj: Mapping[str, Any]) -> ServiceManifest:
    meta, spec = _meta(obj), obj.get("spec") or {}
    return ServiceManifest(
        name=str(meta.get("name")), namespace=str(meta.get("namespace") or "default"),
        labels=_strings(meta.get("labels")), annotations=_strings(meta.get("annotations")),
        selector=_strings(spec.get("selector")),
        publish_not_ready_addresses=bool(spec.get("publishNotReadyAddresses")),
    )


def config_map_body(m: ConfigMapManifest) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": m.name, "namespace": m.namespace, "labels": dict(m.labels),
                     "annotations": dict(m.annotations)},
        "data": dict(m.data),
    }


def config_map_record(obj: Mapping[str, Any]) -> ConfigMapManifest:
    meta = _meta(obj)
    return ConfigMapManifest(
        name=str(meta.get("name")), namespace=str(meta.get("namespace") or "default"),
        labels=_strings(meta.get("labels")), annotations=_strings(meta.get("annotations")),
        data=_strings(obj.get("data")),
    )


def secret_body(m: SecretManifest) -> JSON:
    """An Opaque Secret; ``data`` base64-encoded as the API wants it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": m.name, "namespace": m.namespace, "labels": dict(m.labels),
                     "annotations": dict(m.annotations)},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in m.data.items()},
    }


def secret_record(obj: Mapping[str, Any]) -> SecretManifest:
    """Metadata only: the agent never reads key material back."""
    meta = _meta(obj)
    return SecretManifest(
        name=str(meta.get("name")), namespace=str(meta.get("namespace") or "default"),
        labels=_strings(meta.get("labels")), annotations=_strings(meta.get("annotations")),
    )


def network_policy_body(m: NetworkPolicyManifest) -> JSON:
    """Ingress to the selected pods only from pods the same selector picks (in the
    policy's namespace: a peer without a namespaceSelector is in it)."""
    pods = {"matchLabels": dict(m.selector)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": m.name, "namespace": m.namespace, "labels": dict(m.labels),
                     "annotations": dict(m.annotations)},
        "spec": {"podSelector": pods, "ingress": [{"from": [{"podSelector": pods}]}], "policyTypes": ["Ingress"]},
    }


def network_policy_record(obj: Mapping[str, Any]) -> NetworkPolicyManifest:
    """What the agent compares: metadata and the target selector (the rest is checked
    through the spec hash annotation, as for the other objects of a job)."""
    meta, spec = _meta(obj), obj.get("spec") or {}
    return NetworkPolicyManifest(
        name=str(meta.get("name")), namespace=str(meta.get("namespace") or "default"),
        labels=_strings(meta.get("labels")), annotations=_strings(meta.get("annotations")),
        selector=_strings((spec.get("podSelector") or {}).get("matchLabels")),
    )


# ------------------------------------------------------------------ HyperNodes


def _selector(raw: object, path: str) -> MemberSelector:
    if not isinstance(raw, Mapping):
        raise InvalidInput(path, "a selector is required")
    chosen = [k for k in ("exactMatch", "regexMatch", "labelMatch") if raw.get(k) is not None]
    if len(chosen) != 1:
        raise InvalidInput(path, "exactly one of exactMatch, regexMatch, labelMatch is required")
    which, body = chosen[0], raw[chosen[0]]
    if not isinstance(body, Mapping):
        raise InvalidInput(f"{path}.{which}", "must be an object")
    if which == "exactMatch":
        return MemberSelector(exact_name=str(body.get("name") or ""))
    if which == "regexMatch":
        try:
            return MemberSelector(regex=str(body.get("pattern") or ""))
        except InvalidInput as exc:
            raise InvalidInput(f"{path}.regexMatch.pattern", exc.rule) from exc
    if body.get("matchExpressions"):
        raise InvalidInput(f"{path}.labelMatch.matchExpressions", "not supported; use matchLabels")
    return MemberSelector(labels=_strings(body.get("matchLabels")))


def hypernode_spec(obj: Mapping[str, Any]) -> HyperNodeSpec:
    """One ``topology.volcano.sh/v1alpha1`` HyperNode as a spec; raises ``InvalidInput``
    (path rooted at ``hyperNodes[<name>]``) when it cannot be read. Tree-level checks are
    the snapshot builder's, over all HyperNodes at once."""
    name = str(_meta(obj).get("name") or "")
    root = f"hyperNodes[{name}]"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidInput(f"{root}.spec", "is required")
    tier = spec.get("tier")
    if not isinstance(tier, int) or isinstance(tier, bool):
        raise InvalidInput(f"{root}.spec.tier", "must be an integer")
    members = []
    for j, raw in enumerate(spec.get("members") or []):
        path = f"{root}.spec.members[{j}]"
        if not isinstance(raw, Mapping):
            raise InvalidInput(path, "must be an object")
        try:
            selector = _selector(raw.get("selector"), f"{path}.selector")
            members.append(HyperNodeMember(str(raw.get("type") or ""), selector))
        except InvalidInput as exc:
            raise exc if exc.path.startswith(path) else exc.under(path) from None
    try:
        return HyperNodeSpec(name=name, tier=tier, members=tuple(members), tier_name=str(spec.get("tierName") or ""))
    except InvalidInput as exc:
        raise exc.under(root) from None
