"""Objects the agent reads by name and never lists or caches: the ssh plugin's Secret and
a workload job's Deployment or StatefulSet.

Secrets are never listed: the agent's role may get, create and delete a Secret but not
list or watch them (deploy/rbac.yaml), so no agent can read a cluster's Secrets in bulk.
Workloads are read by name for the same reason of least privilege. Both are deleted only
when they carry our job label (and are still the object read, by its uid): a user's own
Secret or Deployment of the same name is never touched.
Both are read once per pass of the job that owns them.
"""

from __future__ import annotations

from typing import Any

from agents.backend import AlreadyExists, BackendError
from agents.core.records import ANNOTATION_SPEC_HASH, LABEL_JOB, LABEL_MANAGED, SecretManifest, WorkloadManifest
from agents.k8s import api as k8s
from agents.k8s.api import ApiError, call
from agents.k8s.convert import secret_body, secret_record, workload_body


def fail(what: str, exc: ApiError) -> BackendError:
    """An apiserver answer as the Protocol's ``BackendError``, with the server's message."""
    detail = exc.message or exc.reason or "no detail"
    if exc.status == 0:
        return BackendError(f"{what}: apiserver unreachable ({detail})")
    return BackendError(f"{what}: HTTP {exc.status} {exc.reason}: {detail}")


def _workload_record(kind: str, obj: dict[str, Any]) -> WorkloadManifest:
    meta = obj.get("metadata") or {}
    return WorkloadManifest(kind, str(meta.get("name")), str(meta.get("namespace") or "default"),
                            labels=dict(meta.get("labels") or {}), annotations=dict(meta.get("annotations") or {}))


class NamedObjects:
    """The by-name half of ``KubernetesBackend`` (which sets ``_core`` and ``_apps``)."""

    _core: Any
    _apps: Any
    _scheduling: Any

    async def _get(self, read: Any, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await call(read(name, namespace, _preload_content=False,
                                                  _request_timeout=k8s.REQUEST_TIMEOUT))
            return obj
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise fail(f"read {namespace}/{name}", exc) from exc

    async def _create(self, create: Any, read: Any, what: str, namespace: str, name: str,
                      body: dict[str, Any]) -> None:
        """Create; a 409 on an object with the same spec hash is success (idempotent)."""
        try:
            await call(create(namespace, body, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status != 409:
                raise fail(f"create {what} {namespace}/{name}", exc) from exc
            existing = await self._get(read, namespace, name)
            theirs = ((existing or {}).get("metadata") or {}).get("annotations") or {}
            if existing is None or theirs.get(ANNOTATION_SPEC_HASH) != body["metadata"]["annotations"].get(
                    ANNOTATION_SPEC_HASH):
                raise AlreadyExists(f"{what} {namespace}/{name} already exists") from exc

    async def _remove(self, delete: Any, what: str, namespace: str, name: str, read: dict[str, Any]) -> bool:
        """Delete the object as it was ``read`` (a precondition on its uid): one made under
        the same name meanwhile, by a user, is not ours to delete."""
        uid = (read.get("metadata") or {}).get("uid")
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await call(delete(name, namespace, body=body, _preload_content=False,
                              _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status in (404, 409):  # gone, or replaced by another object of that name
                return False
            raise fail(f"delete {what} {namespace}/{name}", exc) from exc
        return True

    # ------------------------------------------------------------------ secrets
    async def read_secret(self, namespace: str, name: str) -> SecretManifest | None:
        obj = await self._get(self._core.read_namespaced_secret, namespace, name)
        return secret_record(obj) if obj is not None else None

    async def create_secret(self, manifest: SecretManifest) -> None:
        await self._create(self._core.create_namespaced_secret, self._core.read_namespaced_secret, "secret",
                           manifest.namespace, manifest.name, secret_body(manifest))

    async def delete_secret(self, namespace: str, name: str) -> bool:
        existing = await self._get(self._core.read_namespaced_secret, namespace, name)
        if existing is None or not _ours(existing):
            return False
        return await self._remove(self._core.delete_namespaced_secret, "secret", namespace, name, existing)

    # ------------------------------------------------------------------ priority classes
    async def read_priority_class(self, name: str) -> int | None:
        try:
            obj = await call(self._scheduling.read_priority_class(name, _preload_content=False,
                                                                 _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise fail(f"read priorityclass {name}", exc) from exc
        return int(obj.get("value") or 0)

    async def create_priority_class(self, name: str, value: int, description: str) -> None:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name, "labels": {LABEL_MANAGED: "true"}},
                "value": value, "description": description}
        try:
            await call(self._scheduling.create_priority_class(body, _preload_content=False,
                                                              _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 409:
                raise AlreadyExists(f"priorityclass {name} already exists") from exc
            raise fail(f"create priorityclass {name}", exc) from exc

    # ------------------------------------------------------------------ workloads
    def _calls(self, kind: str) -> tuple[Any, Any, Any]:
        noun = {"Deployment": "deployment", "StatefulSet": "stateful_set"}[kind]
        return (getattr(self._apps, f"read_namespaced_{noun}"), getattr(self._apps, f"create_namespaced_{noun}"),
                getattr(self._apps, f"delete_namespaced_{noun}"))

    async def read_workload(self, kind: str, namespace: str, name: str) -> WorkloadManifest | None:
        read, _, _ = self._calls(kind)
        obj = await self._get(read, namespace, name)
        return _workload_record(kind, obj) if obj is not None else None

    async def create_workload(self, manifest: WorkloadManifest) -> None:
        read, create, _ = self._calls(manifest.kind)
        await self._create(create, read, manifest.kind.lower(), manifest.namespace, manifest.name,
                           workload_body(manifest))

    async def delete_workload(self, kind: str, namespace: str, name: str) -> bool:
        read, _, delete = self._calls(kind)
        existing = await self._get(read, namespace, name)
        if existing is None or not _ours(existing):
            return False
        return await self._remove(delete, kind.lower(), namespace, name, existing)


def _ours(obj: dict[str, Any]) -> bool:
    """The object carries our job label: the agent made it (a user's object of the same name is left alone)."""
    return bool(((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB))
