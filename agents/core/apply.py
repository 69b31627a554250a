"""The thin edge between pure decisions and one cluster: read state, perform operations.

The only async code in ``agents/core``; it talks to the cluster solely through the
``ClusterBackend`` Protocol. Operations are applied in order and the first failure stops
the pass: reconcile emits every create before any bind, so stopping early can leave pods
unbound but never a gang half-bound by this pass, and the next pass re-derives what is
left from the cluster itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agents.backend import BackendError, ClusterBackend
from agents.core.operations import (
    BindPod,
    CreateClaim,
    CreateConfigMap,
    CreateNetworkPolicy,
    CreatePod,
    CreateSecret,
    CreateService,
    CreateWorkload,
    DeleteClaim,
    DeleteConfigMap,
    DeleteNetworkPolicy,
    DeletePod,
    DeleteSecret,
    DeleteService,
    DeleteWorkload,
    Op,
    SelectClaimNode,
)
from agents.core.reconcile import Observed
from agents.core.records import LABEL_JOB, ClaimRecord, PodRecord, StorageClassRecord, VolumeRecord
from agents.core.snapshot import SnapshotResult, build_snapshot
from agents.core.ssh_keys import with_key_pair
from agents.core.view import ClusterViews, read_view
from agents.core.volumes import JobClaims, Volumes
from federation.domain.errors import InvalidInput
from federation.domain.topology import HyperNodeTree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Applied:
    done: tuple[Op, ...]
    failed: Op | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.failed is None


async def apply_ops(backend: ClusterBackend, ops: Sequence[Op]) -> Applied:
    """Perform ``ops`` in order; stop at the first the cluster refuses."""
    done: list[Op] = []
    for op in ops:
        try:
            await _apply_one(backend, op)
        except BackendError as exc:
            return Applied(tuple(done), op, f"{op.describe()}: {exc.reason}")
        log.debug("%s", op.describe())
        done.append(op)
    return Applied(tuple(done))


async def _apply_one(backend: ClusterBackend, op: Op) -> None:
    match op:
        case CreateService(manifest):
            await backend.create_service(manifest)
        case DeleteService(namespace, name):
            await backend.delete_service(namespace, name)
        case CreateConfigMap(manifest):
            await backend.create_config_map(manifest)
        case DeleteConfigMap(namespace, name):
            await backend.delete_config_map(namespace, name)
        case CreateSecret(manifest):
            # Key generation is CPU-bound: off the event loop.
            await backend.create_secret(await asyncio.to_thread(with_key_pair, manifest))
        case DeleteSecret(namespace, name):
            await backend.delete_secret(namespace, name)
        case CreateNetworkPolicy(manifest):
            await backend.create_network_policy(manifest)
        case DeleteNetworkPolicy(namespace, name):
            await backend.delete_network_policy(namespace, name)
        case CreateClaim(manifest):
            await backend.create_claim(manifest)
        case DeleteClaim(namespace, name, job_name):
            await backend.delete_claim(namespace, name, job_name)
        case CreateWorkload(manifest):
            await backend.create_workload(manifest)
        case DeleteWorkload(kind, namespace, name):
            await backend.delete_workload(kind, namespace, name)
        case CreatePod(manifest):
            await backend.create_pod(manifest)
        case SelectClaimNode(namespace, claim, node, resource_version):
            await backend.select_claim_node(namespace, claim, node, resource_version)
        case BindPod(namespace, name, node):
            await backend.bind_pod(namespace, name, node)
        case DeletePod(namespace, name, _):
            await backend.delete_pod(namespace, name)


async def read_snapshot(backend: ClusterBackend, *, label_keys: Sequence[str] = (), now: float = 0.0) -> SnapshotResult:
    """Everything the cluster holds, as a domain snapshot (or the topology error)."""
    nodes = await backend.list_nodes()
    pods = await backend.list_pods({})
    try:
        hypernodes = await backend.list_hypernodes()
    except InvalidInput as exc:  # a HyperNode object could not be read
        return SnapshotResult(None, f"invalid HyperNode tree: {exc}")
    return build_snapshot(backend.cluster, nodes, pods, hypernodes, label_keys=label_keys, now=now)


async def observe_job(
    backend: ClusterBackend, job: str, *, tree: HyperNodeTree | None, label_keys: Sequence[str] = (),
    secrets: Sequence[tuple[str, str]] = (), workloads: Sequence[tuple[str, str, str]] = (),
    views: ClusterViews | None = None, namespace: str = "default", claims: JobClaims | None = None,
    pod_count: int = 0, made_claims: Sequence[str] = (),
) -> Observed:
    """The job's objects plus the nodes (free computed over ALL pods) and the tree to bind in.

    ``tree`` is the last valid tree the runtime holds; it is replaced by the current one
    when the cluster's HyperNodes are valid now, and kept when they are not. ``secrets``
    are the (namespace, name) of the job's Secrets, read one by one: the agent may not
    list Secrets; ``workloads`` likewise for the (kind, namespace, name) of a workload job.
    ``views`` shares one read of the whole cluster between the jobs of a pass (view.py);
    without it the cluster is read afresh. ``claims`` are the PersistentVolumeClaims the
    job's ``pod_count`` pods name in its ``namespace`` (agents/core/volumes.py): read, with their PVs and
    classes, only while some pod is still to be bound, so a running job costs no reads
    (the ephemeral volumes' claims of the pods still to be bound only).
    ``made_claims`` are the claims the agent makes for the job's ``spec.volumes``: read by
    name on every pass, as the ssh Secret is, to make, keep or withdraw them.
    """
    selector = {LABEL_JOB: job}
    view = await views.get(backend, label_keys) if views is not None else await read_view(backend, label_keys)
    pods = view.job_pods(job)
    made: tuple[ClaimRecord, ...] = ()
    made_error = ""  # an unreadable claim holds the job's pods back, naming it
    try:
        made = tuple(c for c in [await backend.read_claim(namespace, name) for name in made_claims] if c is not None)
    except BackendError as exc:
        made_error = f"read the job's claims: {exc.reason}"
    except InvalidInput as exc:
        made_error = f"read the job's claims: {exc}"
    return Observed(
        pods=pods,
        services=tuple(await backend.list_services(selector)),
        config_maps=tuple(await backend.list_config_maps(selector)),
        network_policies=tuple(await backend.list_network_policies(selector)),
        # Only a Secret labelled with this job is the job's: one of the same name that a user
        # made is never replaced or withdrawn (its create then fails: the name is taken).
        secrets=tuple(s for s in [await backend.read_secret(ns, name) for ns, name in secrets]
                      if s is not None and s.labels.get(LABEL_JOB) == job),
        workloads=tuple(w for w in [await backend.read_workload(*ref) for ref in workloads] if w is not None),
        nodes=view.nodes,
        ready=view.ready,
        tree=view.tree if view.tree is not None else tree,
        volumes=await read_volumes(backend, namespace, claims, pods, {c.name: c for c in made})
        if claims is not None and claims.count and binding_ahead(pods, pod_count) else None,
        claims=made,
        claims_error=made_error,
    )


def binding_ahead(pods: Sequence[PodRecord], pod_count: int) -> bool:
    """Whether a pass may bind a pod: one of the job's pods is unbound and not finished,
    or fewer than ``pod_count`` are live (the missing ones are created and bound)."""
    live = [p for p in pods if not p.terminal and not p.deleting]
    return len(live) < pod_count or any(p.node is None for p in live)


async def read_volumes(backend: ClusterBackend, namespace: str, claims: JobClaims, pods: Sequence[PodRecord],
                       known: Mapping[str, ClaimRecord] | None = None) -> Volumes:
    """The claims (by name, in ``namespace``; the ephemeral volumes' of ``pods``), the PVs of
    the bound ones and the classes of the unbound ones, each read once by name (``known``
    claims were read this pass already), none when there are too many; what the cluster
    holds is hostile input: a refusal or an object the backend could not read
    (``InvalidInput``) becomes the ``error`` that holds the gang back, naming it."""
    names = claims.names(namespace, pods)
    over = claims.over_limit(len(names))
    if over:
        return Volumes(error=over)
    found: dict[str, ClaimRecord] = {}
    volumes: dict[str, VolumeRecord] = {}
    classes: dict[str, StorageClassRecord] = {}
    try:
        for name in names:
            claim = (known or {}).get(name) or await backend.read_claim(namespace, name)
            if claim is None:
                continue
            found[name] = claim
            if claim.bound and claim.volume not in volumes:
                pv = await backend.read_volume(claim.volume)
                if pv is not None:
                    volumes[claim.volume] = pv
            elif not claim.bound and claim.storage_class and claim.storage_class not in classes:
                cls = await backend.read_storage_class(claim.storage_class)
                if cls is not None:
                    classes[claim.storage_class] = cls
    except BackendError as exc:
        return Volumes(error=f"read volumes: {exc.reason}")
    except InvalidInput as exc:
        return Volumes(error=f"read volumes: {exc}")
    return Volumes(found, volumes, classes)
