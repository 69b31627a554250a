"""The operations reconcile asks for, as plain values.

Decisions return lists of these; only ``agents/core/apply.py`` performs them against a
``ClusterBackend``. Keeping the plan of operations as data is what makes the reconcile
loop testable (compare op lists) and restart-safe (a half-applied list is simply
re-derived on the next pass).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.core.records import (
    ClaimManifest,
    ConfigMapManifest,
    NetworkPolicyManifest,
    PodManifest,
    SecretManifest,
    ServiceManifest,
    WorkloadManifest,
)


@dataclass(frozen=True)
class CreateService:
    manifest: ServiceManifest

    def describe(self) -> str:
        return f"create service {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class DeleteService:
    namespace: str
    name: str

    def describe(self) -> str:
        return f"delete service {self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreateConfigMap:
    manifest: ConfigMapManifest

    def describe(self) -> str:
        return f"create configmap {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class DeleteConfigMap:
    namespace: str
    name: str

    def describe(self) -> str:
        return f"delete configmap {self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreateSecret:
    manifest: SecretManifest

    def describe(self) -> str:
        return f"create secret {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class DeleteSecret:
    namespace: str
    name: str

    def describe(self) -> str:
        return f"delete secret {self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreateNetworkPolicy:
    manifest: NetworkPolicyManifest

    def describe(self) -> str:
        return f"create networkpolicy {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class DeleteNetworkPolicy:
    namespace: str
    name: str

    def describe(self) -> str:
        return f"delete networkpolicy {self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreateClaim:
    manifest: ClaimManifest

    def describe(self) -> str:
        return f"create persistentvolumeclaim {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class DeleteClaim:
    """Deletes the claim only while it carries ``job``'s label: a user's claim of that name is never touched."""

    namespace: str
    name: str
    job: str

    def describe(self) -> str:
        return f"delete persistentvolumeclaim {self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreateWorkload:
    manifest: WorkloadManifest

    def describe(self) -> str:
        return f"create {self.manifest.kind.lower()} {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class DeleteWorkload:
    kind: str
    namespace: str
    name: str

    def describe(self) -> str:
        return f"delete {self.kind.lower()} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class CreatePod:
    manifest: PodManifest

    def describe(self) -> str:
        return f"create pod {self.manifest.namespace}/{self.manifest.name}"


@dataclass(frozen=True)
class BindPod:
    namespace: str
    name: str
    node: str

    def describe(self) -> str:
        return f"bind pod {self.namespace}/{self.name} to {self.node}"


@dataclass(frozen=True)
class SelectClaimNode:
    """Write ``volume.kubernetes.io/selected-node: <node>`` on a WaitForFirstConsumer claim
    before binding its pod there (kube-scheduler's PreBind, agents/core/volumes.py), only
    if the claim is still as read (``resource_version``)."""

    namespace: str
    claim: str
    node: str
    resource_version: str

    def describe(self) -> str:
        return f"select node {self.node} for persistentvolumeclaim {self.namespace}/{self.claim}"


@dataclass(frozen=True)
class DeletePod:
    namespace: str
    name: str
    reason: str = ""

    def describe(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"delete pod {self.namespace}/{self.name}{why}"


Op = (CreateService | DeleteService | CreateConfigMap | DeleteConfigMap | CreateSecret | DeleteSecret
      | CreateNetworkPolicy | DeleteNetworkPolicy | CreateClaim | DeleteClaim | CreateWorkload | DeleteWorkload
      | CreatePod | SelectClaimNode | BindPod | DeletePod)
