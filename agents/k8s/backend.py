"""``KubernetesBackend``: the ``ClusterBackend`` Protocol (agents/backend.py) on a real
kube-apiserver, through one private ``kubernetes_asyncio`` ApiClient per cluster.

Reads come from informers (agents/k8s/informer.py: list, watch with bookmarks, relist on
410) over nodes, all pods (free room depends on every pod, not only ours), HyperNodes
(``topology.volcano.sh/v1alpha1``, cluster-scoped) and the Services, ConfigMaps and
NetworkPolicies that carry our job label. Their changes feed ``watch()``, which the runtime uses as triggers.
A job's pods and the room on each node are read off a ``PodIndex`` the pods informer keeps
up to date (agents/pod_index.py), not found by scanning every pod of the cluster.

Writes go to the apiserver and then into the cache (read-your-writes). How API answers
map to the Protocol's exceptions:

=========================================  =============================================
create, 409 and the object is ours with     success (idempotent: a pass that was cut off,
the same identity (work id + version, or     or ran before its own write was observed)
the same spec hash) and not terminating
create, 409 otherwise                       ``AlreadyExists``
bind, node unknown / NotReady / no room     ``BindingRejected`` (checked against the
(checked here: the apiserver does not)      cache, as the fake cluster does)
bind, 409 already bound to that node        success (idempotent)
bind, 409 bound elsewhere, other 4xx        ``BindingRejected``
bind, 404                                    ``NotFound``
delete, 404                                 ``False``
anything else (5xx, unreachable, 403 …)     ``BackendError`` with the apiserver's message
=========================================  =============================================

Pods are created with ``schedulerName: federation-scheduler`` and no ``nodeName``;
binding uses the Binding subresource with ``_preload_content=False`` (its ``Status``
answer cannot be deserialised into ``V1Binding``). Pods on a node that is gone or
NotReady are deleted with grace period 0: no kubelet will ever confirm their end, and
the gang's replacement waits for the name to be free.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agents.backend import AlreadyExists, BackendError, BindingRejected, NotFound
from agents.core.records import (
    ANNOTATION_SPEC_HASH,
    ANNOTATION_WORK_ID,
    LABEL_JOB,
    LABEL_WORK_VERSION,
    ChangeEvent,
    ConfigMapManifest,
    NetworkPolicyManifest,
    NodeRecord,
    PodManifest,
    PodRecord,
    ServiceManifest,
)
from agents.job_index import JobIndex, one_job
from agents.k8s import api as k8s
from agents.k8s.api import ApiError, call
from agents.k8s.convert import (
    HYPERNODE_GROUP,
    HYPERNODE_PLURAL,
    HYPERNODE_VERSION,
    binding_body,
    config_map_body,
    config_map_record,
    hypernode_spec,
    network_policy_body,
    network_policy_record,
    node_record,
    pod_body,
    pod_record,
    service_body,
    service_record,
)
from agents.k8s.informer import WATCH_SECONDS, Informer, Key
from agents.k8s.named import NamedObjects, fail
from agents.k8s.storage import StorageObjects
from agents.own_writes import OwnPodWrites, PodChange
from agents.pod_index import PodIndex
from federation.domain.topology import HyperNodeSpec

log = logging.getLogger(__name__)

_VIEW_KINDS = ("nodes", "pods", "hypernodes")  # what agents/core/view.py is built from: the revision
Landing = Callable[[str, str], contextlib.AbstractContextManager[None]]  # (namespace, name): KubernetesBackend._landing
_KIND_EVENT = {"nodes": "Node", "pods": "Pod", "hypernodes": "HyperNode", "services": "Service",
               "configmaps": "ConfigMap", "networkpolicies": "NetworkPolicy"}


def _matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class _Subscription:
    """An async iterator subscribed at creation, so no change after ``watch()`` is missed."""

    def __init__(self, backend: KubernetesBackend) -> None:
        self._backend = backend
        self._queue: asyncio.Queue[ChangeEvent] = asyncio.Queue()
        backend._subscribers.append(self._queue)

    def __aiter__(self) -> _Subscription:
        return self

    async def __anext__(self) -> ChangeEvent:
        if self._queue not in self._backend._subscribers and self._queue.empty():
            raise StopAsyncIteration
        await self._backend.start()
        return await self._queue.get()

    async def aclose(self) -> None:
        if self._queue in self._backend._subscribers:
            self._backend._subscribers.remove(self._queue)


class KubernetesBackend(NamedObjects, StorageObjects):
    """One member cluster through its kube-apiserver. Informers start on first use (or
    ``start()``), so a replica that is not the leader never lists or watches anything."""

    def __init__(self, api_client: Any, cluster: str, *, owns_client: bool = True,
                 watch_seconds: int = WATCH_SECONDS, sync_timeout: float = 60.0) -> None:
        self._api = api_client
        self._cluster = cluster
        self._owns_client = owns_client
        self._sync_timeout = sync_timeout
        self._core = k8s.core_api(api_client)
        self._apps = k8s.apps_api(api_client)
        self._scheduling = k8s.scheduling_api(api_client)
        self._networking = k8s.networking_api(api_client)
        custom = k8s.custom_api(api_client)
        self._subscribers: list[asyncio.Queue[ChangeEvent]] = []
        self._writes = 0
        self._own = OwnPodWrites()
        self._kind_changes = dict.fromkeys(_KIND_EVENT, 0)  # per informer kind: the revision, JobIndex
        self._services_by_job: JobIndex[ServiceManifest] = JobIndex()
        self._config_maps_by_job: JobIndex[ConfigMapManifest] = JobIndex()
        self._network_policies_by_job: JobIndex[NetworkPolicyManifest] = JobIndex()
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        self._start_lock = asyncio.Lock()
        ours = LABEL_JOB  # "has the job label" selector
        self.nodes: Informer[NodeRecord] = Informer(
            "nodes", self._core.list_node, node_record, self._notifier("nodes"), watch_seconds=watch_seconds)
        self.pod_index = PodIndex()  # room per node and pods per job, as the pods cache changes
        self.pods: Informer[PodRecord] = Informer(
            "pods", self._core.list_pod_for_all_namespaces, pod_record, self._notifier("pods"),
            watch_seconds=watch_seconds, index=self.pod_index)
        self.hypernodes: Informer[HyperNodeSpec] = Informer(
            "hypernodes",
            functools.partial(custom.list_cluster_custom_object, HYPERNODE_GROUP, HYPERNODE_VERSION, HYPERNODE_PLURAL),
            hypernode_spec, self._notifier("hypernodes"), watch_seconds=watch_seconds, missing_ok=True)
        self.services: Informer[ServiceManifest] = Informer(
            "services", self._core.list_service_for_all_namespaces, service_record, self._notifier("services"),
            label_selector=ours, watch_seconds=watch_seconds)
        self.config_maps: Informer[ConfigMapManifest] = Informer(
            "configmaps", self._core.list_config_map_for_all_namespaces, config_map_record,
            self._notifier("configmaps"), label_selector=ours, watch_seconds=watch_seconds)
        self.network_policies: Informer[NetworkPolicyManifest] = Informer(
            "networkpolicies", self._networking.list_network_policy_for_all_namespaces, network_policy_record,
            self._notifier("networkpolicies"), label_selector=ours, watch_seconds=watch_seconds)
        self._informers: tuple[Informer[Any], ...] = (
            self.nodes, self.pods, self.hypernodes, self.services, self.config_maps, self.network_policies)

    @classmethod
    async def from_kubeconfig(cls, path: str | None, cluster: str, *, context: str | None = None,
                              **kwargs: Any) -> KubernetesBackend:
        """A backend with its own ApiClient from ``path`` (None: in-cluster service account)."""
        return cls(await k8s.client_from_kubeconfig(path, context), cluster, **kwargs)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the informers and wait until each has listed once. Idempotent; raises
        ``BackendError`` (and stops them again) when the cache cannot sync in time."""
        if self._ready.is_set():
            return
        async with self._start_lock:
            if self._ready.is_set():
                return
            self._tasks = [asyncio.create_task(i.run(), name=f"informer-{self._cluster}-{i.kind}")
                           for i in self._informers]
            try:
                async with asyncio.timeout(self._sync_timeout):
                    await asyncio.gather(*(i.synced.wait() for i in self._informers))
            except TimeoutError:
                errors = "; ".join(i.error for i in self._informers if i.error) or "no answer"
                await self._stop_tasks()
                raise BackendError(f"cluster {self._cluster}: cache did not sync: {errors}") from None
            self._ready.set()

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    async def close(self) -> None:
        """Stop watching; close the ApiClient when this backend created it."""
        await self._stop_tasks()
        self._ready.clear()
        self._subscribers.clear()
        if self._owns_client:
            await self._api.close()

    async def __aenter__(self) -> KubernetesBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def health(self) -> list[str]:
        """Current list/watch failures (empty when every informer is healthy)."""
        return [i.error for i in self._informers if i.error]

    @property
    def api_client(self) -> Any:
        return self._api

    # ------------------------------------------------------------------ ClusterBackend: reads
    @property
    def cluster(self) -> str:
        return self._cluster

    @property
    def revision(self) -> int:
        return sum(self._kind_changes[kind] for kind in _VIEW_KINDS)

    @property
    def writes(self) -> int:
        return self._writes

    def own_pod_writes(self, since: int, until: int) -> Sequence[PodChange] | None:
        return self._own.between(since, until)

    async def list_nodes(self) -> list[NodeRecord]:
        await self.start()
        return sorted(self.nodes.records(), key=lambda n: n.name)

    async def list_hypernodes(self) -> list[HyperNodeSpec]:
        await self.start()
        errors = sorted(self.hypernodes.errors(), key=str)
        if errors:
            raise errors[0]
        return sorted(self.hypernodes.records(), key=lambda h: h.name)

    async def list_pods(self, selector: Mapping[str, str], *, ordered: bool = True) -> list[PodRecord]:
        await self.start()
        job = one_job(selector)
        if job is not None:  # a job's pass re-reading its pods: only them, never a scan of the cluster
            return self.pod_index.job_pods(job)
        matching = [p for p in self.pods.records() if not selector or _matches(p.labels, selector)]
        return sorted(matching, key=lambda p: (p.namespace, p.name)) if ordered else matching

    async def list_services(self, selector: Mapping[str, str]) -> list[ServiceManifest]:
        await self.start()
        job = one_job(selector)
        if job is not None:
            return self._services_by_job.of(job, self._kind_changes["services"], self.services.records)
        return sorted((s for s in self.services.records() if _matches(s.labels, selector)),
                      key=lambda s: (s.namespace, s.name))

    async def list_config_maps(self, selector: Mapping[str, str]) -> list[ConfigMapManifest]:
        await self.start()
        job = one_job(selector)
        if job is not None:
            return self._config_maps_by_job.of(job, self._kind_changes["configmaps"], self.config_maps.records)
        return sorted((c for c in self.config_maps.records() if _matches(c.labels, selector)),
                      key=lambda c: (c.namespace, c.name))

    async def list_network_policies(self, selector: Mapping[str, str]) -> list[NetworkPolicyManifest]:
        await self.start()
        job = one_job(selector)
        if job is not None:
            return self._network_policies_by_job.of(job, self._kind_changes["networkpolicies"],
                                                    self.network_policies.records)
        return sorted((n for n in self.network_policies.records() if _matches(n.labels, selector)),
                      key=lambda n: (n.namespace, n.name))

    # ------------------------------------------------------------------ ClusterBackend: pods
    async def create_pod(self, manifest: PodManifest) -> PodRecord:
        try:
            return await self._create_pod(manifest)
        finally:
            self._writes += 1

    async def _create_pod(self, manifest: PodManifest) -> PodRecord:
        await self.start()
        ns, name = manifest.namespace, manifest.name
        try:
            obj = await call(self._core.create_namespaced_pod(ns, pod_body(manifest), _preload_content=False,
                                                              _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status != 409:
                raise fail(f"create pod {ns}/{name}", exc) from exc
            existing = await self._read(self._core.read_namespaced_pod, ns, name)
            if existing is not None:
                record = pod_record(existing)
                same = (record.labels.get(LABEL_JOB) == manifest.labels.get(LABEL_JOB)
                        and record.labels.get(LABEL_WORK_VERSION) == manifest.labels.get(LABEL_WORK_VERSION)
                        and record.annotations.get(ANNOTATION_WORK_ID) == manifest.annotations.get(ANNOTATION_WORK_ID))
                if same and not record.deleting:
                    with self._landing(ns, name):
                        self.pods.upsert(existing)
                    return record
                with self._landing(ns, name):
                    self.pods.upsert(existing)
            terminating = existing is not None and pod_record(existing).deleting
            raise AlreadyExists(f"pod {ns}/{name} already exists" + (" (terminating)" if terminating else "")) from exc
        with self._landing(ns, name):
            self.pods.upsert(obj)
        return pod_record(obj)

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        try:
            await self._bind_pod(namespace, name, node)
        finally:
            self._writes += 1

    async def _bind_pod(self, namespace: str, name: str, node: str) -> None:
        await self.start()
        key = (namespace, name)
        pod = self.pods.get(key)
        if pod is not None:
            if pod.node == node:
                return
            if pod.node is not None:
                raise BindingRejected(f"pod {namespace}/{name} is already bound to {pod.node}")
        self._check_room(pod, name, node)
        try:
            await call(self._core.create_namespaced_pod_binding(
                name, namespace, binding_body(name, node), _preload_content=False,
                _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                raise NotFound(f"pod {namespace}/{name} not found") from exc
            if exc.status == 409 and f'already assigned to node "{node}"' in exc.message:
                with self._landing(namespace, name):
                    self.pods.update(key, lambda p: replace(p, node=node))
                return
            if exc.status == 409 or (400 <= exc.status < 500 and exc.status != 403):
                raise BindingRejected(f"bind pod {namespace}/{name} to {node}: {exc.message or exc.reason}") from exc
            raise fail(f"bind pod {namespace}/{name} to {node}", exc) from exc
        with self._landing(namespace, name):
            self.pods.update(key, lambda p: replace(p, node=node))

    def _check_room(self, pod: PodRecord | None, name: str, node: str) -> None:
        """The checks the apiserver does not do for a Binding: the node exists, is
        Ready, and has room for the pod's requests over every pod bound to it (the
        pods cache's ``PodIndex`` keeps that sum, agents/pod_index.py)."""
        target = self.nodes.get(("", node))
        if target is None:
            raise BindingRejected(f"node {node} does not exist")
        if not target.ready:
            raise BindingRejected(f"node {node} is not ready")
        if pod is None:
            return
        free = (target.allocatable - self.pod_index.used(node)).clamp_min_zero()
        if not pod.requests.fits_in(free):
            raise BindingRejected(f"node {node} has no room for {name} (free {free.to_quantities()})")

    async def delete_pod(self, namespace: str, name: str) -> bool:
        try:
            return await self._delete_pod(namespace, name)
        finally:
            self._writes += 1

    async def _delete_pod(self, namespace: str, name: str) -> bool:
        await self.start()
        pod = self.pods.get((namespace, name))
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if pod is not None and pod.node is not None:
            host = self.nodes.get(("", pod.node))
            if host is None or not host.ready:
                body["gracePeriodSeconds"] = 0  # no kubelet will confirm; free the name now
        return await self._delete(self.pods, self._core.delete_namespaced_pod, namespace, name, body,
                                  landing=self._landing)

    # ------------------------------------------------------------------ services and config maps
    async def create_service(self, manifest: ServiceManifest) -> None:
        await self.start()
        await self._create_labelled(self.services, self._core.create_namespaced_service,
                                    self._core.read_namespaced_service, "service", manifest.namespace,
                                    manifest.name, service_body(manifest), manifest.annotations)

    async def delete_service(self, namespace: str, name: str) -> bool:
        await self.start()
        return await self._delete(self.services, self._core.delete_namespaced_service, namespace, name,
                                  {"propagationPolicy": "Background"})

    async def annotate_service(self, namespace: str, name: str, key: str, value: str) -> None:
        """A JSON patch that first tests the job label, so the write lands only on job
        ``name``'s own Service (a user's Service of that name answers 422, not ours)."""
        await self.start()
        patch = [{"op": "test", "path": f"/metadata/labels/{_pointer(LABEL_JOB)}", "value": name},
                 {"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value}]
        try:
            obj = await call(self._core.patch_namespaced_service(
                name, namespace, patch, _content_type="application/json-patch+json", _preload_content=False,
                _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                raise NotFound(f"service {namespace}/{name} not found") from exc
            raise fail(f"annotate service {namespace}/{name}", exc) from exc
        self.services.upsert(obj)

    async def create_config_map(self, manifest: ConfigMapManifest) -> None:
        await self.start()
        await self._create_labelled(self.config_maps, self._core.create_namespaced_config_map,
                                    self._core.read_namespaced_config_map, "configmap", manifest.namespace,
                                    manifest.name, config_map_body(manifest), manifest.annotations)

    async def delete_config_map(self, namespace: str, name: str) -> bool:
        await self.start()
        return await self._delete(self.config_maps, self._core.delete_namespaced_config_map, namespace, name,
                                  {"propagationPolicy": "Background"})

    async def create_network_policy(self, manifest: NetworkPolicyManifest) -> None:
        await self.start()
        await self._create_labelled(self.network_policies, self._networking.create_namespaced_network_policy,
                                    self._networking.read_namespaced_network_policy, "networkpolicy",
                                    manifest.namespace, manifest.name, network_policy_body(manifest),
                                    manifest.annotations)

    async def delete_network_policy(self, namespace: str, name: str) -> bool:
        """Only one the informer holds: it lists only policies labelled with a job."""
        await self.start()
        if self.network_policies.get((namespace, name)) is None:
            return False
        return await self._delete(self.network_policies, self._networking.delete_namespaced_network_policy,
                                  namespace, name, {"propagationPolicy": "Background"})

    def watch(self) -> AsyncIterator[ChangeEvent]:
        return _Subscription(self)

    # ------------------------------------------------------------------ internals
    def _notifier(self, kind: str) -> Any:
        event_kind = _KIND_EVENT[kind]

        def notify(type_: str, key: Key, value: Any) -> None:
            self._kind_changes[kind] += 1
            obj = key[1] if event_kind == "HyperNode" or isinstance(value, Exception) else value
            event = ChangeEvent(event_kind, type_, obj)
            for queue in self._subscribers:
                queue.put_nowait(event)

        return notify

    async def _read(self, read: Any, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await call(read(name, namespace, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise fail(f"read {namespace}/{name}", exc) from exc

    async def _create_labelled(self, cache: Informer[Any], create: Any, read: Any, what: str, namespace: str,
                               name: str, body: dict[str, Any], annotations: Mapping[str, str]) -> None:
        try:
            obj = await call(create(namespace, body, _preload_content=False, _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status != 409:
                raise fail(f"create {what} {namespace}/{name}", exc) from exc
            existing = await self._read(read, namespace, name)
            theirs = ((existing or {}).get("metadata") or {}).get("annotations") or {}
            if existing is not None and theirs.get(ANNOTATION_SPEC_HASH) == annotations.get(ANNOTATION_SPEC_HASH):
                if ((existing.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB):
                    cache.upsert(existing)
                return
            raise AlreadyExists(f"{what} {namespace}/{name} already exists") from exc
        cache.upsert(obj)

    async def _delete(self, cache: Informer[Any], delete: Any, namespace: str, name: str,
                      body: dict[str, Any], *, landing: Landing | None = None) -> bool:
        """``landing`` wraps the cache update of an own pod write (``_landing``)."""
        landing = landing or _untracked
        try:
            obj = await call(delete(name, namespace, body=body, _preload_content=False,
                                    _request_timeout=k8s.REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                with landing(namespace, name):
                    cache.remove((namespace, name))
                return False
            raise fail(f"delete {namespace}/{name}", exc) from exc
        meta = obj.get("metadata") or {}
        still_there = (obj.get("kind") == cache_kind(cache) and meta.get("deletionTimestamp")
                       and (meta.get("finalizers") or (obj.get("spec") or {}).get("nodeName")))
        with landing(namespace, name):
            if still_there:
                cache.upsert(obj)  # terminating: the watch's DELETED event removes it
            else:
                cache.remove((namespace, name), str(meta.get("resourceVersion") or ""))
        return True

    def _landing(self, namespace: str, name: str) -> contextlib.AbstractContextManager[None]:
        """Around the cache update of an own pod write, never around an ``await``: what it
        changes is recorded for the shared view (agents/own_writes.py)."""
        return self._own.landing(lambda: self.revision, lambda: self.pods.get((namespace, name)))


def _untracked(namespace: str, name: str) -> contextlib.AbstractContextManager[None]:
    """The ``Landing`` of a write that is not an own pod write: nothing is recorded."""
    return contextlib.nullcontext()


def _pointer(key: str) -> str:
    """``key`` as one JSON-pointer segment (RFC 6901: ``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def cache_kind(cache: Informer[Any]) -> str:
    return {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap",
            "networkpolicies": "NetworkPolicy"}.get(cache.kind, "")
