"""``LeaseStore`` (agents/leader.py) on a ``coordination.k8s.io/v1`` Lease.

Optimistic concurrency is the apiserver's: ``update`` replaces the Lease with the
resourceVersion it was read at, and a 409 means another replica wrote in between
(``LeaseConflict``); ``create`` answers 409 when another replica created it first.
Times are MicroTime (``2026-01-02T03:04:05.123456Z``).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from agents.k8s import api as k8s
from agents.k8s.api import ApiError, call
from agents.leader import LeaseConflict, LeaseRecord


def _micro(us: int) -> str | None:
    if not us:
        return None
    return datetime.fromtimestamp(us / 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_micro(value: object) -> int:
    if not isinstance(value, str) or not value:
        return 0
    stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return int(stamp.timestamp()) * 1_000_000 + stamp.microsecond


def lease_record(obj: dict[str, Any]) -> LeaseRecord:
    spec = obj.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        duration_seconds=float(spec.get("leaseDurationSeconds") or 0),
        acquire_time_us=_parse_micro(spec.get("acquireTime")),
        renew_time_us=_parse_micro(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
    )


class KubernetesLeaseStore:
    """The Lease ``namespace/name`` through the agent's own ApiClient."""

    def __init__(self, api_client: Any, namespace: str, name: str) -> None:
        self._api = k8s.coordination_api(api_client)
        self.namespace = namespace
        self.name = name

    def _body(self, record: LeaseRecord) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if record.version:
            meta["resourceVersion"] = record.version
        spec = {
            "holderIdentity": record.holder or None,
            "leaseDurationSeconds": math.ceil(record.duration_seconds),
            "acquireTime": _micro(record.acquire_time_us),
            "renewTime": _micro(record.renew_time_us),
            "leaseTransitions": record.transitions,
        }
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {k: v for k, v in spec.items() if v is not None}}

    async def get(self) -> LeaseRecord | None:
        try:
            return lease_record(await call(self._api.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT)))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        try:
            return lease_record(await call(self._api.create_namespaced_lease(
                self.namespace, self._body(record), _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT)))
        except ApiError as exc:
            if exc.status == 409:
                raise LeaseConflict(exc.message) from exc
            raise

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        try:
            return lease_record(await call(self._api.replace_namespaced_lease(
                self.name, self.namespace, self._body(record), _preload_content=False,
                _request_timeout=k8s.REQUEST_TIMEOUT)))
        except ApiError as exc:
            if exc.status in (404, 409):  # changed, or deleted, since we read it
                raise LeaseConflict(exc.message) from exc
            raise
