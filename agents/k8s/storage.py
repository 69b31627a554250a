"""PersistentVolumeClaims, PersistentVolumes and StorageClasses, read one by name.

What the agent needs of them to bind a pod as kube-scheduler's VolumeBinding plugin would
(agents/core/volumes.py): never listed or watched (the agent's role may only get them,
patch claims, and create and delete the claims of a job's ``spec.volumes``,
deploy/chart/federation-agent/templates/rbac.yaml). Whatever a cluster
holds is hostile input: each object is read into its record with types checked and
sizes bounded (names, and a PV's node affinity and a class's allowedTopologies within
domain/scheduling.py's bounds), or refused with ``InvalidInput`` naming the field, which
holds the gang back with that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.backend import AlreadyExists, BackendError, NotFound
from agents.core.records import (
    ANNOTATION_BIND_COMPLETED,
    ANNOTATION_SELECTED_NODE,
    BINDING_IMMEDIATE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    LABEL_JOB,
    ClaimManifest,
    ClaimRecord,
    StorageClassRecord,
    VolumeRecord,
)
from agents.k8s import api as k8s
from agents.k8s.api import ApiError, call
from agents.k8s.named import fail
from federation.domain.errors import InvalidInput
from federation.domain.resources import format_quantity
from federation.domain.scheduling import MAX_EXPRESSIONS, MAX_TERMS, MAX_VALUES, node_selector_terms

MAX_NAME = 253  # a DNS subdomain: every name and label key read here fits
MAX_OWNER_REFERENCES = 64  # a claim's owners: its pod, or a job's or a user's few
# The beta annotation still wins over spec.storageClassName (GetPersistentVolumeClaimClass).
ANNOTATION_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(path, "must be a mapping")
    return value


def _name(value: object, path: str, *, empty: bool = True) -> str:
    if value is None and empty:
        return ""
    if not isinstance(value, str) or len(value) > MAX_NAME or (not value and not empty):
        raise InvalidInput(path, f"must be a string of at most {MAX_NAME} characters")
    return value


def _list(value: object, path: str, limit: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > limit:
        raise InvalidInput(path, f"must be a list of at most {limit} entries")
    return value


def claim_record(obj: Mapping[str, Any]) -> ClaimRecord:
    meta, spec = _mapping(obj.get("metadata"), "metadata"), _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    annotations = _mapping(meta.get("annotations"), "metadata.annotations")
    labels = _mapping(meta.get("labels"), "metadata.labels")
    name = _name(meta.get("name"), "metadata.name", empty=False)
    where = f"persistentvolumeclaim {name}"
    try:
        job = _name(labels.get(LABEL_JOB), f"metadata.labels.{LABEL_JOB}")
        cls = (_name(annotations[ANNOTATION_BETA_CLASS], f"metadata.annotations.{ANNOTATION_BETA_CLASS}")
               if ANNOTATION_BETA_CLASS in annotations
               else _name(spec.get("storageClassName"), "spec.storageClassName"))
        volume = _name(spec.get("volumeName"), "spec.volumeName")
        selected = _name(annotations.get(ANNOTATION_SELECTED_NODE), f"metadata.annotations.{ANNOTATION_SELECTED_NODE}")
        controller = _controller(meta.get("ownerReferences"))
    except InvalidInput as exc:
        raise exc.under(where) from None
    return ClaimRecord(
        name=name, namespace=str(meta.get("namespace") or "default"), storage_class=cls, volume=volume,
        bound=bool(volume) and ANNOTATION_BIND_COMPLETED in annotations, lost=status.get("phase") == "Lost",
        deleting=bool(meta.get("deletionTimestamp")), selected_node=selected,
        resource_version=str(meta.get("resourceVersion") or ""), job=job, controller=controller,
    )


def _controller(value: object) -> str:
    """The uid of the owner reference marked ``controller: true`` (apimachinery's
    ``GetControllerOf``: the apiserver admits at most one), "" when there is none."""
    for i, raw in enumerate(_list(value, "metadata.ownerReferences", MAX_OWNER_REFERENCES)):
        ref = _mapping(raw, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            return _name(ref.get("uid"), f"metadata.ownerReferences[{i}].uid", empty=False)
    return ""


def claim_body(m: ClaimManifest) -> dict[str, Any]:
    """The claim a job's ``volumeClaim`` describes: only the fields the federation accepted
    (domain/job_volumes.py); an unset class is left out so the cluster's default applies."""
    spec: dict[str, Any] = {"accessModes": list(m.spec.access_modes),
                            "resources": {"requests": {"storage": format_quantity("storage", m.spec.storage_bytes)}}}
    if m.spec.storage_class is not None:
        spec["storageClassName"] = m.spec.storage_class
    if m.spec.volume_mode is not None:
        spec["volumeMode"] = m.spec.volume_mode
    if m.spec.data_source is not None:
        source = m.spec.data_source
        spec["dataSource"] = {"kind": source.kind, "name": source.name, **({"apiGroup": source.api_group}
                                                                           if source.api_group else {})}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": m.name, "namespace": m.namespace, "labels": dict(m.labels)}, "spec": spec}


def volume_record(obj: Mapping[str, Any]) -> VolumeRecord:
    meta, spec = _mapping(obj.get("metadata"), "metadata"), _mapping(obj.get("spec"), "spec")
    name = _name(meta.get("name"), "metadata.name", empty=False)
    try:
        affinity = _mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
        required = affinity.get("required")
        terms = node_selector_terms(required, "spec.nodeAffinity.required") if required is not None else None
    except InvalidInput as exc:
        raise exc.under(f"persistentvolume {name}") from None
    return VolumeRecord(name, terms)


def storage_class_record(obj: Mapping[str, Any]) -> StorageClassRecord:
    meta = _mapping(obj.get("metadata"), "metadata")
    name = _name(meta.get("name"), "metadata.name", empty=False)
    try:
        mode = obj.get("volumeBindingMode") or BINDING_IMMEDIATE
        if mode not in (BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER):
            raise InvalidInput("volumeBindingMode", f"must be {BINDING_IMMEDIATE} or {BINDING_WAIT_FOR_FIRST_CONSUMER}")
        terms = []
        for i, raw in enumerate(_list(obj.get("allowedTopologies"), "allowedTopologies", MAX_TERMS)):
            path = f"allowedTopologies[{i}].matchLabelExpressions"
            exprs = _list(_mapping(raw, f"allowedTopologies[{i}]").get("matchLabelExpressions"), path, MAX_EXPRESSIONS)
            term = []
            for j, expr in enumerate(exprs):
                item = _mapping(expr, f"{path}[{j}]")
                values = _list(item.get("values"), f"{path}[{j}].values", MAX_VALUES)
                term.append((_name(item.get("key"), f"{path}[{j}].key", empty=False),
                             tuple(_name(v, f"{path}[{j}].values[{k}]") for k, v in enumerate(values))))
            terms.append(tuple(term))
        provisioner = _name(obj.get("provisioner"), "provisioner")
    except InvalidInput as exc:
        raise exc.under(f"storageclass {name}") from None
    return StorageClassRecord(name, str(mode), provisioner, tuple(terms))


class StorageObjects:
    """The storage half of ``KubernetesBackend`` (which sets ``_api``)."""

    _api: Any

    async def _read_storage(self, what: str, request: Any) -> dict[str, Any] | None:
        try:
            return await call(request)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise fail(f"read {what}", exc) from exc

    async def read_claim(self, namespace: str, name: str) -> ClaimRecord | None:
        read = k8s.core_api(self._api).read_namespaced_persistent_volume_claim
        obj = await self._read_storage(f"persistentvolumeclaim {namespace}/{name}", read(
            name, namespace, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        return claim_record(obj) if obj is not None else None

    async def read_volume(self, name: str) -> VolumeRecord | None:
        core = k8s.core_api(self._api)
        obj = await self._read_storage(f"persistentvolume {name}", core.read_persistent_volume(
            name, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        return volume_record(obj) if obj is not None else None

    async def read_storage_class(self, name: str) -> StorageClassRecord | None:
        storage = k8s.storage_api(self._api)
        obj = await self._read_storage(f"storageclass {name}", storage.read_storage_class(
            name, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        return storage_class_record(obj) if obj is not None else None

    async def select_claim_node(self, namespace: str, name: str, node: str, resource_version: str) -> None:
        """A merge patch carrying the resourceVersion read: the apiserver applies it only
        to that version of the claim (409 otherwise), so a node another scheduler or a
        provisioner wrote meanwhile is never overwritten."""
        core = k8s.core_api(self._api)
        patch = {"metadata": {"resourceVersion": resource_version, "annotations": {ANNOTATION_SELECTED_NODE: node}}}
        try:
            await call(core.patch_namespaced_persistent_volume_claim(
                name, namespace, patch, _content_type="application/merge-patch+json",
                _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                raise NotFound(f"persistentvolumeclaim {namespace}/{name} not found") from exc
            if exc.status == 409:
                raise BackendError(f"persistentvolumeclaim {namespace}/{name} changed since it was read; "
                                   "read again on the next pass") from exc
            raise fail(f"annotate persistentvolumeclaim {namespace}/{name}", exc) from exc

    async def create_claim(self, manifest: ClaimManifest) -> None:
        """A 409 is success only when the claim there is labelled with the same job (made
        by this agent before, or by a previous leader); a user's claim is never replaced."""
        core = k8s.core_api(self._api)
        where = f"persistentvolumeclaim {manifest.namespace}/{manifest.name}"
        try:
            await call(core.create_namespaced_persistent_volume_claim(
                manifest.namespace, claim_body(manifest), _preload_content=False,
                _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status != 409:
                raise fail(f"create {where}", exc) from exc
            try:
                existing = await self.read_claim(manifest.namespace, manifest.name)
            except InvalidInput as unreadable:  # not a claim this agent made, whatever it holds
                raise AlreadyExists(f"{where} already exists and cannot be read: {unreadable}") from exc
            if existing is None or existing.job != manifest.labels.get(LABEL_JOB):
                raise AlreadyExists(f"{where} already exists and is not this job's") from exc

    async def delete_claim(self, namespace: str, name: str, job: str) -> bool:
        """Only a claim labelled with ``job``, and only the one read (a uid precondition):
        one a user made under that name meanwhile is left alone."""
        core = k8s.core_api(self._api)
        where = f"persistentvolumeclaim {namespace}/{name}"
        obj = await self._read_storage(where, core.read_namespaced_persistent_volume_claim(
            name, namespace, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        if obj is None:
            return False
        try:
            meta = _mapping(obj.get("metadata"), "metadata")
            labels = _mapping(meta.get("labels"), "metadata.labels")
        except InvalidInput:  # not the shape of a claim this agent made: not its to delete
            return False
        if labels.get(LABEL_JOB) != job:
            return False
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        uid = meta.get("uid")
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await call(core.delete_namespaced_persistent_volume_claim(
                name, namespace, body=body, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status in (404, 409):  # gone, or replaced by another claim of that name
                return False
            raise fail(f"delete {where}", exc) from exc
        return True
