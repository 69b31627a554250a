"""An in-memory member cluster implementing ``ClusterBackend`` (agents/backend.py).

Used by unit tests and by the demo, where many of them run on one simulated clock. It is
strict where a real cluster would hurt us: binding is validated (node exists and is
ready, room left, pod not already bound), names are unique per namespace, and every
mutation emits a change event. Time is injected: pods become Running when bound and
Succeeded after ``runtime(manifest)`` seconds of that clock, applied by ``tick()`` (or
``advance(seconds)`` when the clock is a ``ManualClock``). Faults are explicit calls:
``fail_pod``, ``evict_pod``, ``set_node_ready``, ``remove_node``, ``occupy``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from agents.backend import AlreadyExists, BackendError, BindingRejected, NotFound
from agents.core.records import (
    LABEL_JOB,
    ChangeEvent,
    ClaimManifest,
    ClaimRecord,
    ConfigMapManifest,
    NetworkPolicyManifest,
    NodeRecord,
    ObjectRecord,
    PodManifest,
    PodRecord,
    SecretManifest,
    ServiceManifest,
    StorageClassRecord,
    VolumeRecord,
    WorkloadManifest,
)
from agents.fake.clock import ManualClock
from agents.job_index import JobIndex, one_job
from agents.own_writes import OwnPodWrites, PodChange
from agents.pod_index import PodIndex
from federation.domain.errors import InvalidInput
from federation.domain.resources import Resources
from federation.domain.states import PodPhase
from federation.domain.topology import HyperNodeSpec

Key = tuple[str, str]  # (namespace, name)
_M = TypeVar("_M", ServiceManifest, ConfigMapManifest, SecretManifest, NetworkPolicyManifest)


@dataclass
class _Pod:
    record: PodRecord
    manifest: PodManifest | None
    finish_at: float | None = None


_VIEW_KINDS = ("Pod", "Node", "HyperNode")  # what agents/core/view.py is built from: the revision


def _matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class _Watch:
    """An async iterator subscribed at creation, so no event after ``watch()`` is missed."""

    def __init__(self, subscribers: list[asyncio.Queue[ChangeEvent]]) -> None:
        self._subscribers = subscribers
        self._queue: asyncio.Queue[ChangeEvent] = asyncio.Queue()
        subscribers.append(self._queue)

    def __aiter__(self) -> _Watch:
        return self

    async def __anext__(self) -> ChangeEvent:
        if self._queue not in self._subscribers and self._queue.empty():
            raise StopAsyncIteration
        return await self._queue.get()

    async def aclose(self) -> None:
        if self._queue in self._subscribers:
            self._subscribers.remove(self._queue)


class FakeCluster:
    """In-memory ``ClusterBackend`` with controllable time and faults."""

    def __init__(
        self,
        name: str,
        nodes: Iterable[NodeRecord] = (),
        hypernodes: Iterable[HyperNodeSpec] = (),
        *,
        clock: Callable[[], float] | None = None,
        runtime: Callable[[PodManifest], float | None] | None = None,
    ) -> None:
        self._name = name
        self.clock: Callable[[], float] = clock if clock is not None else ManualClock()
        self.runtime = runtime or (lambda _m: None)
        self._nodes: dict[str, NodeRecord] = {n.name: n for n in nodes}
        self._hypernodes: list[HyperNodeSpec] = list(hypernodes)
        self._hypernode_error: str | None = None
        self._pods: dict[Key, _Pod] = {}
        self.pod_index = PodIndex()  # room per node and pods per job, as ``_pods`` changes (``_put_pod``)
        self._services: dict[Key, ServiceManifest] = {}
        self._config_maps: dict[Key, ConfigMapManifest] = {}
        self._secrets: dict[Key, SecretManifest] = {}
        self._network_policies: dict[Key, NetworkPolicyManifest] = {}
        self.priority_classes: dict[str, int] = {}  # name -> value; tests may pre-set the cluster's own
        # Storage, set by tests (``put_claim``...): the fake runs no PV controller or provisioner.
        self.claims: dict[Key, ClaimRecord] = {}
        self.volumes: dict[str, VolumeRecord] = {}
        self.storage_classes: dict[str, StorageClassRecord] = {}
        self.storage_reads = 0  # read_claim, read_volume and read_storage_class calls
        self.made_claims: dict[Key, ClaimManifest] = {}  # the claims create_claim made, as asked for
        self._workloads: dict[tuple[str, str, str], WorkloadManifest] = {}
        self._subscribers: list[asyncio.Queue[ChangeEvent]] = []
        self._writes = 0
        self._own = OwnPodWrites()
        self._kind_changes: dict[str, int] = {}  # per kind of object: the revision, JobIndex
        self._services_by_job: JobIndex[ServiceManifest] = JobIndex()
        self._config_maps_by_job: JobIndex[ConfigMapManifest] = JobIndex()
        self._network_policies_by_job: JobIndex[NetworkPolicyManifest] = JobIndex()
        self.calls: list[tuple[str, str]] = []  # (method, object) for every mutating call
        self.bind_count = 0

    # ------------------------------------------------------------------ ClusterBackend
    @property
    def cluster(self) -> str:
        return self._name

    @property
    def revision(self) -> int:
        return sum(self._kind_changes.get(kind, 0) for kind in _VIEW_KINDS)

    @property
    def writes(self) -> int:
        return self._writes

    def own_pod_writes(self, since: int, until: int) -> Sequence[PodChange] | None:
        return self._own.between(since, until)

    async def list_nodes(self) -> list[NodeRecord]:
        return sorted(self._nodes.values(), key=lambda n: n.name)

    async def list_hypernodes(self) -> list[HyperNodeSpec]:
        if self._hypernode_error is not None:
            raise InvalidInput("hyperNodes", self._hypernode_error)
        return list(self._hypernodes)

    async def list_pods(self, selector: Mapping[str, str], *, ordered: bool = True) -> list[PodRecord]:
        if not ordered and one_job(selector) is None:
            return [p.record for p in self._pods.values() if not selector or _matches(p.record.labels, selector)]
        return self.pods(selector)

    async def list_services(self, selector: Mapping[str, str]) -> list[ServiceManifest]:
        job = one_job(selector)
        if job is not None:
            return self._services_by_job.of(job, self._kind_changes.get("Service", 0), self._services.values)
        return [s for _, s in sorted(self._services.items()) if _matches(s.labels, selector)]

    async def list_config_maps(self, selector: Mapping[str, str]) -> list[ConfigMapManifest]:
        job = one_job(selector)
        if job is not None:
            return self._config_maps_by_job.of(job, self._kind_changes.get("ConfigMap", 0), self._config_maps.values)
        return [c for _, c in sorted(self._config_maps.items()) if _matches(c.labels, selector)]

    async def list_network_policies(self, selector: Mapping[str, str]) -> list[NetworkPolicyManifest]:
        job = one_job(selector)
        if job is not None:
            return self._network_policies_by_job.of(job, self._kind_changes.get("NetworkPolicy", 0),
                                                    self._network_policies.values)
        return [n for _, n in sorted(self._network_policies.items()) if _matches(n.labels, selector)]

    async def create_pod(self, manifest: PodManifest) -> PodRecord:
        try:
            with self._landing(manifest.namespace, manifest.name):
                return self._create_pod(manifest)
        finally:
            self._writes += 1

    def _create_pod(self, manifest: PodManifest) -> PodRecord:
        key = (manifest.namespace, manifest.name)
        self.calls.append(("create_pod", manifest.name))
        if key in self._pods:
            raise AlreadyExists(f"pod {manifest.namespace}/{manifest.name} already exists")
        record = PodRecord(
            name=manifest.name, namespace=manifest.namespace, labels=dict(manifest.labels),
            annotations=dict(manifest.annotations), requests=manifest.requests, phase=PodPhase.PENDING,
            phase_since=self.clock(), uid=f"uid-{manifest.name}-{self._writes}",  # a pod made again is another
        )
        self._put_pod(key, _Pod(record, manifest))
        self._emit("Pod", "ADDED", record)
        return record

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        try:
            with self._landing(namespace, name):
                self._bind_pod(namespace, name, node)
        finally:
            self._writes += 1

    def _bind_pod(self, namespace: str, name: str, node: str) -> None:
        self.calls.append(("bind_pod", f"{name}->{node}"))
        pod = self._pods.get((namespace, name))
        if pod is None:
            raise NotFound(f"pod {namespace}/{name} not found")
        if pod.record.node is not None:
            raise BindingRejected(f"pod {namespace}/{name} is already bound to {pod.record.node}")
        target = self._nodes.get(node)
        if target is None:
            raise BindingRejected(f"node {node} does not exist")
        if not target.ready:
            raise BindingRejected(f"node {node} is not ready")
        free = self.free(node)
        if not pod.record.requests.fits_in(free):
            raise BindingRejected(f"node {node} has no room for {name} (free {free.to_quantities()})")
        now = self.clock()
        runtime = self.runtime(pod.manifest) if pod.manifest is not None else None
        pod.finish_at = None if runtime is None else now + runtime
        self.bind_count += 1
        self._update(pod, node=node, phase=PodPhase.RUNNING, phase_since=now)

    async def delete_pod(self, namespace: str, name: str) -> bool:
        try:
            with self._landing(namespace, name):
                return self._delete_pod(namespace, name)
        finally:
            self._writes += 1

    def _delete_pod(self, namespace: str, name: str) -> bool:
        self.calls.append(("delete_pod", name))
        pod = self._pods.get((namespace, name))
        if pod is not None:
            self._put_pod((namespace, name), None)
            self._emit("Pod", "DELETED", pod.record)
        return pod is not None

    async def create_service(self, manifest: ServiceManifest) -> None:
        self.calls.append(("create_service", manifest.name))
        self._create(self._services, manifest, "Service")

    async def delete_service(self, namespace: str, name: str) -> bool:
        self.calls.append(("delete_service", name))
        return self._delete(self._services, namespace, name, "Service")

    async def annotate_service(self, namespace: str, name: str, key: str, value: str) -> None:
        self.calls.append(("annotate_service", name))
        service = self._services.get((namespace, name))
        if service is None:
            raise NotFound(f"service {namespace}/{name} not found")
        if service.labels.get(LABEL_JOB) != name:
            raise BackendError(f"service {namespace}/{name} is not job {name}'s")
        self._services[(namespace, name)] = replace(service, annotations={**service.annotations, key: value})
        self._emit("Service", "MODIFIED", self._services[(namespace, name)])

    async def create_config_map(self, manifest: ConfigMapManifest) -> None:
        self.calls.append(("create_config_map", manifest.name))
        self._create(self._config_maps, manifest, "ConfigMap")

    async def delete_config_map(self, namespace: str, name: str) -> bool:
        self.calls.append(("delete_config_map", name))
        return self._delete(self._config_maps, namespace, name, "ConfigMap")

    async def read_priority_class(self, name: str) -> int | None:
        return self.priority_classes.get(name)

    async def create_priority_class(self, name: str, value: int, description: str) -> None:
        self.calls.append(("create_priority_class", name))
        if name in self.priority_classes:
            raise AlreadyExists(f"PriorityClass {name} already exists")
        self.priority_classes[name] = value

    async def read_secret(self, namespace: str, name: str) -> SecretManifest | None:
        secret = self._secrets.get((namespace, name))
        return replace(secret, data={}, key_pair=False) if secret is not None else None

    async def create_secret(self, manifest: SecretManifest) -> None:
        self.calls.append(("create_secret", manifest.name))
        self._create(self._secrets, manifest, "Secret")

    async def delete_secret(self, namespace: str, name: str) -> bool:
        """Deletes it only when it carries our job label, as the real backend does."""
        self.calls.append(("delete_secret", name))
        secret = self._secrets.get((namespace, name))
        if secret is None or not secret.labels.get(LABEL_JOB):
            return False
        return self._delete(self._secrets, namespace, name, "Secret")

    async def create_network_policy(self, manifest: NetworkPolicyManifest) -> None:
        self.calls.append(("create_network_policy", manifest.name))
        self._create(self._network_policies, manifest, "NetworkPolicy")

    async def delete_network_policy(self, namespace: str, name: str) -> bool:
        """Deletes it only when it carries our job label, as the real backend does."""
        self.calls.append(("delete_network_policy", name))
        policy = self._network_policies.get((namespace, name))
        if policy is None or not policy.labels.get(LABEL_JOB):
            return False
        return self._delete(self._network_policies, namespace, name, "NetworkPolicy")

    async def read_workload(self, kind: str, namespace: str, name: str) -> WorkloadManifest | None:
        workload = self._workloads.get((kind, namespace, name))
        return replace(workload, body_json="") if workload is not None else None

    async def create_workload(self, manifest: WorkloadManifest) -> None:
        """Stores the workload; the fake runs no controllers (tests create its pods)."""
        self.calls.append(("create_workload", manifest.name))
        key = (manifest.kind, manifest.namespace, manifest.name)
        if key in self._workloads:
            raise AlreadyExists(f"{manifest.kind} {manifest.namespace}/{manifest.name} already exists")
        self._workloads[key] = manifest
        self._emit(manifest.kind, "ADDED", manifest.name)

    async def delete_workload(self, kind: str, namespace: str, name: str) -> bool:
        self.calls.append(("delete_workload", name))
        gone = self._workloads.pop((kind, namespace, name), None)
        if gone is not None:
            self._emit(kind, "DELETED", name)
        return gone is not None

    async def read_claim(self, namespace: str, name: str) -> ClaimRecord | None:
        self.storage_reads += 1
        return self.claims.get((namespace, name))

    async def read_volume(self, name: str) -> VolumeRecord | None:
        self.storage_reads += 1
        return self.volumes.get(name)

    async def read_storage_class(self, name: str) -> StorageClassRecord | None:
        self.storage_reads += 1
        return self.storage_classes.get(name)

    async def select_claim_node(self, namespace: str, name: str, node: str, resource_version: str) -> None:
        self.calls.append(("select_claim_node", f"{name}->{node}"))
        claim = self.claims.get((namespace, name))
        if claim is None:
            raise NotFound(f"persistentvolumeclaim {namespace}/{name} not found")
        if claim.resource_version != resource_version:
            raise BackendError(f"persistentvolumeclaim {namespace}/{name} changed since it was read")
        self.put_claim(replace(claim, selected_node=node))

    def put_claim(self, claim: ClaimRecord) -> None:
        """Create or replace a claim; its resourceVersion moves on, as the apiserver's does."""
        version = int(self.claims[(claim.namespace, claim.name)].resource_version or 0) + 1 \
            if (claim.namespace, claim.name) in self.claims else 1
        self.claims[(claim.namespace, claim.name)] = replace(claim, resource_version=str(version))

    async def create_claim(self, manifest: ClaimManifest) -> None:
        """Kept as made in ``made_claims``; as a record, an unbound claim of its class."""
        self.calls.append(("create_claim", manifest.name))
        existing = self.claims.get((manifest.namespace, manifest.name))
        if existing is not None:
            if existing.job != manifest.labels.get(LABEL_JOB):
                raise AlreadyExists(f"persistentvolumeclaim {manifest.namespace}/{manifest.name} already exists")
            return
        self.made_claims[(manifest.namespace, manifest.name)] = manifest
        self.put_claim(ClaimRecord(manifest.name, manifest.namespace, storage_class=manifest.spec.storage_class or "",
                                   job=manifest.labels.get(LABEL_JOB, "")))

    async def delete_claim(self, namespace: str, name: str, job: str) -> bool:
        """Deletes it only while it carries ``job``'s label, as the real backend does."""
        self.calls.append(("delete_claim", name))
        claim = self.claims.get((namespace, name))
        if claim is None or claim.job != job:
            return False
        del self.claims[(namespace, name)]
        self.made_claims.pop((namespace, name), None)
        return True

    def workloads(self) -> list[WorkloadManifest]:
        return list(self._workloads.values())

    def watch(self) -> AsyncIterator[ChangeEvent]:
        return _Watch(self._subscribers)

    # ------------------------------------------------------------------ inspection
    def pods(self, selector: Mapping[str, str] | None = None) -> list[PodRecord]:
        """By (namespace, name); only the matching pods are sorted (a job's few, not the cluster's),
        and a job's are read off the index, not found by a scan."""
        job = one_job(selector or {})
        if job is not None:
            return self.pod_index.job_pods(job)
        matching = [(key, p.record) for key, p in self._pods.items() if _matches(p.record.labels, selector or {})]
        return [record for _, record in sorted(matching, key=lambda kv: kv[0])]

    def pod(self, name: str, namespace: str = "default") -> PodRecord | None:
        pod = self._pods.get((namespace, name))
        return pod.record if pod is not None else None

    def manifest(self, name: str, namespace: str = "default") -> PodManifest | None:
        pod = self._pods.get((namespace, name))
        return pod.manifest if pod is not None else None

    def node(self, name: str) -> NodeRecord | None:
        return self._nodes.get(name)

    def services(self) -> list[ServiceManifest]:
        return list(self._services.values())

    def config_maps(self) -> list[ConfigMapManifest]:
        return list(self._config_maps.values())

    def secrets(self) -> list[SecretManifest]:
        """Secrets as created, key material included (``read_secret`` omits the data)."""
        return list(self._secrets.values())

    def network_policies(self) -> list[NetworkPolicyManifest]:
        return list(self._network_policies.values())

    def add_network_policy(self, policy: NetworkPolicyManifest) -> None:
        """A NetworkPolicy someone else made (a test's user object, labelled or not)."""
        self._create(self._network_policies, policy, "NetworkPolicy")

    def free(self, node: str) -> Resources:
        """Allocatable minus the requests of non-terminal pods bound to ``node`` (their sum is
        kept by ``pod_index``, agents/pod_index.py)."""
        target = self._nodes.get(node)
        if target is None:
            return Resources()
        return (target.allocatable - self.pod_index.used(node)).clamp_min_zero()

    # ------------------------------------------------------------------ time
    def tick(self) -> list[PodRecord]:
        """Apply time-based transitions due at ``clock()``; returns the pods that finished."""
        now = self.clock()
        finished = []
        for pod in self._pods.values():
            if pod.finish_at is not None and pod.finish_at <= now and pod.record.phase == PodPhase.RUNNING:
                pod.finish_at = None
                self._update(pod, phase=PodPhase.SUCCEEDED, phase_since=now, exit_code=0, reason="Completed")
                finished.append(pod.record)
        return finished

    def advance(self, seconds: float) -> list[PodRecord]:
        if not isinstance(self.clock, ManualClock):
            raise TypeError("advance() needs a ManualClock; advance the shared clock and call tick()")
        self.clock.advance(seconds)
        return self.tick()

    # ------------------------------------------------------------------ faults and setup
    def add_node(self, node: NodeRecord) -> None:
        kind = "MODIFIED" if node.name in self._nodes else "ADDED"
        self._nodes[node.name] = node
        self._emit("Node", kind, node)

    def set_node_ready(self, name: str, ready: bool) -> None:
        self._set_node(name, ready=ready)

    def cordon(self, name: str, unschedulable: bool = True) -> None:
        self._set_node(name, unschedulable=unschedulable)

    def remove_node(self, name: str) -> None:
        """The node object disappears; its live pods turn Unknown (reason NodeLost) and stay
        bound to the missing node until someone deletes them."""
        node = self._nodes.pop(name)
        self._emit("Node", "DELETED", node)
        for pod in self._pods.values():
            if pod.record.node == name and not pod.record.terminal:
                pod.finish_at = None
                self._update(pod, phase=PodPhase.UNKNOWN, reason="NodeLost", phase_since=self.clock())

    def set_hypernodes(self, specs: Iterable[HyperNodeSpec]) -> None:
        self._hypernodes = list(specs)
        self._hypernode_error = None
        self._emit("HyperNode", "MODIFIED", "*")

    def set_hypernode_error(self, reason: str | None) -> None:
        """Make ``list_hypernodes`` fail as if a HyperNode object were unreadable."""
        self._hypernode_error = reason
        self._emit("HyperNode", "MODIFIED", "*")

    def fail_pod(self, name: str, exit_code: int = 1, reason: str = "Error", namespace: str = "default") -> None:
        pod = self._live(namespace, name)
        pod.finish_at = None
        self._update(pod, phase=PodPhase.FAILED, exit_code=exit_code, reason=reason, phase_since=self.clock())

    def evict_pod(self, name: str, namespace: str = "default") -> None:
        pod = self._live(namespace, name)
        pod.finish_at = None
        self._update(pod, phase=PodPhase.FAILED, reason="Evicted", exit_code=None, phase_since=self.clock())

    def restart_container(self, name: str, namespace: str = "default") -> None:
        """The kubelet restarted one of the pod's containers (restartPolicy OnFailure or
        Always): the pod keeps its phase, its restart count grows."""
        pod = self._live(namespace, name)
        self._update(pod, restarts=pod.record.restarts + 1)

    def succeed_pod(self, name: str, namespace: str = "default") -> None:
        pod = self._live(namespace, name)
        pod.finish_at = None
        self._update(pod, phase=PodPhase.SUCCEEDED, exit_code=0, reason="Completed", phase_since=self.clock())

    def occupy(self, name: str, node: str, requests: Resources, namespace: str = "other") -> None:
        """A pod of another scheduler, already bound: takes room without our labels."""
        record = PodRecord(name=name, namespace=namespace, node=node, phase=PodPhase.RUNNING, requests=requests,
                           phase_since=self.clock())
        self._put_pod((namespace, name), _Pod(record, None))
        self._emit("Pod", "ADDED", record)

    # ------------------------------------------------------------------ internals
    def _landing(self, namespace: str, name: str) -> contextlib.AbstractContextManager[None]:
        """Around an own pod write (synchronous here): recorded for the shared view."""
        return self._own.landing(lambda: self.revision, lambda: self.pod(name, namespace))

    def _live(self, namespace: str, name: str) -> _Pod:
        """A pod that has run: an unbound pod never reached a kubelet, so it cannot fail or finish."""
        pod = self._pods.get((namespace, name))
        if pod is None:
            raise KeyError(f"pod {namespace}/{name} not found")
        if pod.record.node is None:
            raise ValueError(f"pod {namespace}/{name} is not bound: it never ran")
        return pod

    def _set_node(self, name: str, **changes: bool) -> None:
        node = replace(self._nodes[name], **changes)  # type: ignore[arg-type]  # field names checked by replace
        self._nodes[name] = node
        self._emit("Node", "MODIFIED", node)

    def _update(self, pod: _Pod, **changes: object) -> None:
        pod.record = replace(pod.record, **changes)  # type: ignore[arg-type]  # field names checked by replace
        self.pod_index.put((pod.record.namespace, pod.record.name), pod.record)
        self._emit("Pod", "MODIFIED", pod.record)

    def _put_pod(self, key: Key, pod: _Pod | None) -> None:
        """Every change of the pods goes through here (or ``_update``), so the index follows it."""
        if pod is None:
            self._pods.pop(key, None)
        else:
            self._pods[key] = pod
        self.pod_index.put(key, pod.record if pod is not None else None)

    def _create(self, store: dict[Key, _M], obj: _M, kind: str) -> None:
        key = (obj.namespace, obj.name)
        if key in store:
            raise AlreadyExists(f"{kind} {obj.namespace}/{obj.name} already exists")
        store[key] = obj
        self._emit(kind, "ADDED", obj)

    def _delete(self, store: dict[Key, _M], namespace: str, name: str, kind: str) -> bool:
        obj = store.pop((namespace, name), None)
        if obj is not None:
            self._emit(kind, "DELETED", obj)
        return obj is not None

    def _emit(self, kind: str, type_: str, obj: ObjectRecord) -> None:
        self._kind_changes[kind] = self._kind_changes.get(kind, 0) + 1
        event = ChangeEvent(kind, type_, obj)
        for queue in self._subscribers:
            queue.put_nowait(event)
