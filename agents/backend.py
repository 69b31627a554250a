"""The small Protocol the agent runtime uses to talk to ONE member cluster.

Defined here, where it is consumed, so that ``agents/core`` stays pure and the two
implementations stay interchangeable: ``agents/k8s`` (kubernetes_asyncio against a real
kube-apiserver) and ``agents/fake`` (in memory, injected clock, for unit tests and the
demo). Every method is async because the real one does network I/O; the fake never
waits.

Contract details both implementations honour (the unit tests pin them on the fake):

- ``list_*`` return what ``create_*`` was given, field for field (labels, annotations,
  requests, env …), plus the observed status fields of ``PodRecord``.
- ``create_*`` raise ``AlreadyExists`` when the name is taken (including by a pod that is
  still terminating); ``delete_*`` are idempotent and return False when nothing was there.
- ``bind_pod`` raises ``BindingRejected`` when the node does not exist, is not ready,
  lacks room, or the pod is already bound (a pod is never bound twice) and ``NotFound``
  when the pod is gone.
- ``list_hypernodes`` raises ``InvalidInput`` (federation.domain.errors) when a
  HyperNode object cannot be read as a spec; tree-level checks (cycles, two parents,
  tiers) are done by the snapshot builder so that a bad tree is refused as a whole.
- Secrets are read one by name (``read_secret``) and never listed: the agent is not
  allowed to list Secrets, and a Secret is read back without its ``data``. Secrets,
  NetworkPolicies and workloads are deleted only when they carry our job label: a user's
  object of the same name is not the agent's to delete.
- PersistentVolumeClaims, PersistentVolumes and StorageClasses are read one by name and
  never listed or watched (agents/core/volumes.py); ``read_*`` raise ``InvalidInput``
  for an object that cannot be read as its record. ``select_claim_node`` writes only on
  the claim as it was read (its resourceVersion), else ``BackendError``. The claims the
  agent makes for a job's ``spec.volumes`` are created and deleted by name, deleted only
  while labelled with that job.
- ``watch`` yields ``ChangeEvent`` for every mutation until cancelled; the runtime uses
  events only as triggers to re-list and reconcile.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from agents.core.records import (
    ChangeEvent,
    ClaimManifest,
    ClaimRecord,
    ConfigMapManifest,
    NetworkPolicyManifest,
    NodeRecord,
    PodManifest,
    PodRecord,
    SecretManifest,
    ServiceManifest,
    StorageClassRecord,
    VolumeRecord,
    WorkloadManifest,
)
from agents.own_writes import PodChange
from federation.domain.topology import HyperNodeSpec


class BackendError(Exception):
    """A cluster refused an operation; ``reason`` is safe to show to users."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class AlreadyExists(BackendError):
    pass


class NotFound(BackendError):
    pass


class BindingRejected(BackendError):
    pass


@runtime_checkable
class ClusterBackend(Protocol):
    """One member cluster, as the agent runtime sees it."""

    @property
    def cluster(self) -> str:
        """The member cluster's name."""
        ...

    @property
    def revision(self) -> int:
        """Moves on whenever a node, pod or HyperNode may have changed (a watch event or
        this agent's own write), so what was computed from them at one revision can be
        reused until the next (agents/core/view.py). Other kinds leave it alone."""
        ...

    @property
    def writes(self) -> int:
        """How many pod writes (create, bind, delete) this agent has made through this
        backend, counted once each has returned or failed: the room a view built before
        them does not show (agents/core/view.py)."""
        ...

    def own_pod_writes(self, since: int, until: int) -> Sequence[PodChange] | None:
        """What this agent's own pod writes changed in what ``list_pods`` returns while the
        revision went from ``since`` to ``until`` (at most now), oldest first, when nothing
        else moved it in between; None when something else did, or when the backend no
        longer remembers that far back (agents/own_writes.py)."""
        ...

    async def list_nodes(self) -> list[NodeRecord]: ...

    async def list_hypernodes(self) -> list[HyperNodeSpec]: ...

    async def list_pods(self, selector: Mapping[str, str], *, ordered: bool = True) -> list[PodRecord]:
        """Pods in every namespace whose labels include all of ``selector``, by (namespace,
        name); in no set order when not ``ordered`` (for a caller that sorts them off the
        event loop: 80,000 pods take a quarter of a second)."""
        ...

    async def list_services(self, selector: Mapping[str, str]) -> list[ServiceManifest]: ...

    async def list_config_maps(self, selector: Mapping[str, str]) -> list[ConfigMapManifest]: ...

    async def list_network_policies(self, selector: Mapping[str, str]) -> list[NetworkPolicyManifest]:
        """The NetworkPolicies labelled with a job whose labels include all of ``selector``."""
        ...

    async def create_pod(self, manifest: PodManifest) -> PodRecord: ...

    async def bind_pod(self, namespace: str, name: str, node: str) -> None: ...

    async def delete_pod(self, namespace: str, name: str) -> bool: ...

    async def create_service(self, manifest: ServiceManifest) -> None: ...

    async def delete_service(self, namespace: str, name: str) -> bool: ...

    async def annotate_service(self, namespace: str, name: str, key: str, value: str) -> None:
        """Set one annotation on the Service ``name``, only when it is labelled as job
        ``name``'s (``NotFound`` when absent, ``BackendError`` when not ours)."""
        ...

    async def create_config_map(self, manifest: ConfigMapManifest) -> None: ...

    async def delete_config_map(self, namespace: str, name: str) -> bool: ...

    async def read_secret(self, namespace: str, name: str) -> SecretManifest | None:
        """One Secret by name, without its data (None when absent)."""
        ...

    async def create_secret(self, manifest: SecretManifest) -> None: ...

    async def delete_secret(self, namespace: str, name: str) -> bool:
        """Deletes it only when it carries our job label (a user's own Secret is left alone)."""
        ...

    async def create_network_policy(self, manifest: NetworkPolicyManifest) -> None: ...

    async def delete_network_policy(self, namespace: str, name: str) -> bool:
        """Deletes it only when it carries our job label (a user's own policy is left alone)."""
        ...

    async def read_priority_class(self, name: str) -> int | None:
        """The value of the cluster's PriorityClass ``name`` (None when absent)."""
        ...

    async def create_priority_class(self, name: str, value: int, description: str) -> None:
        """Create a PriorityClass (``AlreadyExists`` when the name is taken)."""
        ...

    async def read_workload(self, kind: str, namespace: str, name: str) -> WorkloadManifest | None:
        """A Deployment or StatefulSet by name, metadata only (None when absent)."""
        ...

    async def create_workload(self, manifest: WorkloadManifest) -> None: ...

    async def delete_workload(self, kind: str, namespace: str, name: str) -> bool:
        """Deletes it only when it carries our job label (a user's own object is left alone)."""
        ...

    async def read_claim(self, namespace: str, name: str) -> ClaimRecord | None:
        """A PersistentVolumeClaim by name (None when absent)."""
        ...

    async def read_volume(self, name: str) -> VolumeRecord | None:
        """A PersistentVolume by name (None when absent)."""
        ...

    async def read_storage_class(self, name: str) -> StorageClassRecord | None:
        """A StorageClass by name (None when absent)."""
        ...

    async def select_claim_node(self, namespace: str, name: str, node: str, resource_version: str) -> None:
        """Annotate the claim ``volume.kubernetes.io/selected-node: <node>`` if it is still
        at ``resource_version`` (``NotFound`` when absent, ``BackendError`` when changed)."""
        ...

    async def create_claim(self, manifest: ClaimManifest) -> None:
        """Create a job's claim; one of that name already made for the same job is success,
        any other (a user's) is ``AlreadyExists`` and is left as it is."""
        ...

    async def delete_claim(self, namespace: str, name: str, job: str) -> bool:
        """Deletes the claim only when it carries ``job``'s label (a user's claim is left alone)."""
        ...

    def watch(self) -> AsyncIterator[ChangeEvent]:
        """Change events from now on, until the iterator is closed."""
        ...
