"""The persistent volumes of a gang's pods, checked as kube-scheduler checks them.

The agent binds pods itself (Binding subresource), so what kube-scheduler's VolumeBinding
plugin does between choosing a node and binding a pod is the agent's to do, or a pod
naming a claim hangs on a real cluster. Modelled on kubernetes/kubernetes
pkg/scheduler/framework/plugins/volumebinding (volume_binding.go: PreFilter, Filter,
PreBind; binder.go: GetPodVolumeClaims, FindPodVolumes, checkBoundClaims,
checkVolumeProvisions, AssumePodVolumes, BindPodVolumes) and on the annotations the
PersistentVolume controller reads (pkg/controller/volume/persistentvolume,
k8s.io/component-helpers/storage/volume):

1. **Claims that make a pod wait.** A claim that does not exist, is being deleted, is
   Lost, is bound to a PV that does not exist, or is unbound and not WaitForFirstConsumer
   ("pod has unbound immediate PersistentVolumeClaims": its class is Immediate, absent or
   unknown, or the claim is pre-bound to a PV the PV controller has not bound yet) makes
   the pod unschedulable for now. The agent then binds no pod of the gang (all or
   nothing) and says why; the next pass (a watch event or the periodic resync) looks
   again, as kube-scheduler re-queues the pod on a claim, PV or class event.
2. **Bound claims narrow the nodes.** A claim bound ("fully bound": ``spec.volumeName``
   and the ``pv.kubernetes.io/bind-completed`` annotation) to a PV with
   ``spec.nodeAffinity.required`` allows only nodes whose LABELS match it
   (``CheckNodeAffinity`` builds a node of labels only, so a ``matchFields`` term on
   ``metadata.name`` is matched against an empty name, as there, and the kubelet mounts
   nothing kube-scheduler would not place).
3. **WaitForFirstConsumer claims get a node.** An unbound claim of such a class already
   carrying ``volume.kubernetes.io/selected-node`` allows only that node. One without
   it allows the nodes its class's ``allowedTopologies`` match and, once the gang's pod
   is placed, gets that annotation naming the pod's node BEFORE the pod is bound (the
   PreBind write that starts provisioning; without it the claim stays Pending for ever).
   Every pod of the gang naming the same such claim goes to that one node, or the gang
   is not bound (kube-scheduler's second pod would find the claim pinned to the first
   pod's node). A class without a provisioner (``kubernetes.io/no-provisioner``) needs a
   pre-created PV chosen for the node, which kube-scheduler picks from every PV of the
   class; the agent lists no PVs, so such a claim waits (rule 1) until it is pre-bound.
4. **Generic ephemeral volumes are claims named after their pod.** A template volume
   ``ephemeral.volumeClaimTemplate`` becomes, once the pod exists, the claim
   ``<pod>-<volume>`` that kube-controller-manager's ephemeral volume controller makes
   and controls through an owner reference to the pod (pkg/controller/volume/ephemeral;
   k8s.io/component-helpers/storage/ephemeral: ``VolumeClaimName``, ``VolumeIsForPod``).
   kube-scheduler's ``podHasPVCs`` then reads it as any other claim, with two rules of its
   own: not there yet, the pod waits "for the ephemeral volume controller to create" it
   (normal right after the pod is made, so the gang waits a pass); there but not
   controlled by this pod (by its uid: a claim of that name a user made, or one left by an
   earlier pod of the same name), the pod must not use it and is not scheduled. Otherwise
   rules 1-3 apply, so a WaitForFirstConsumer class gets the pod's node written before the
   Binding (without it the claim is never provisioned and the pod never starts). The
   claims are read only for the pods that exist and are still to be bound, and count per
   pod toward ``MAX_JOB_CLAIMS`` (replicas x ephemeral volumes, whether or not the pods
   exist yet).

Left out, and said so in docs/design/agent.md: kube-scheduler's static binding of
unbound claims to existing PVs, CSI storage capacity, and waiting in PreBind until the
claim is bound before binding the pod (the agent binds at once; the kubelet waits for the
volume). Claims are read by name in the job's namespace, never listed, and at most
``MAX_JOB_CLAIMS`` per job. Pure: the records are read by agents/core/apply.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agents.core.records import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    ClaimRecord,
    PodRecord,
    StorageClassRecord,
    VolumeRecord,
    pod_name,
)
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.scheduling import Term

PodKey = tuple[str, int]  # (task name, index within the task), as agents/core/binding.py
MAX_JOB_CLAIMS = 64  # distinct claims one job's pods may name: each is a GET per pass that binds
NO_PROVISIONER = "kubernetes.io/no-provisioner"  # component-helpers' NotSupportedProvisioner
Topology = tuple[tuple[str, tuple[str, ...]], ...]  # one allowedTopologies term: (label, values) ANDed


@lru_cache(maxsize=4096)
def template_claims(template_json: str) -> tuple[tuple[str, str], ...]:
    """(volume name, claim name) of each ``persistentVolumeClaim`` volume of a pod template.

    The template was bounded and checked at submission; a claimName that is not a string
    is left out here because the member apiserver refuses such a pod anyway."""
    if not template_json:
        return ()
    spec = json.loads(template_json).get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    out: list[tuple[str, str]] = []
    for volume in volumes if isinstance(volumes, list) else ():
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        claim = source.get("claimName") if isinstance(source, dict) else None
        if isinstance(claim, str) and claim:
            out.append((str(volume.get("name", "")), claim))
    return tuple(out)


@lru_cache(maxsize=4096)
def template_ephemeral(template_json: str) -> tuple[str, ...]:
    """The names of a pod template's generic ephemeral volumes (``volumes[].ephemeral``)."""
    if not template_json:
        return ()
    spec = json.loads(template_json).get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    return tuple(str(v.get("name", "")) for v in (volumes if isinstance(volumes, list) else ())
                 if isinstance(v, dict) and isinstance(v.get("ephemeral"), dict))


def ephemeral_claim(pod: str, volume: str) -> str:
    """The claim the ephemeral volume controller makes for a pod's ephemeral volume
    (``VolumeClaimName``): deterministic, so it is read by name like any other."""
    return f"{pod}-{volume}"


def _claim_templates(job: Job) -> tuple[str, ...]:
    """A StatefulSet's ``volumeClaimTemplates`` names: its controller makes claim
    ``<template>-<set>-<ordinal>`` for each pod and mounts it in place of a template
    volume of the same name (pkg/controller/statefulset, updateStorage)."""
    if job.workload is None or job.workload.kind != "StatefulSet":
        return ()
    templates: Any = job.workload.body["spec"].get("volumeClaimTemplates")
    names = [((t.get("metadata") or {}).get("name")) for t in templates or () if isinstance(t, dict)]
    return tuple(n for n in names if isinstance(n, str) and n)


def pod_claims(job: Job) -> dict[PodKey, tuple[str, ...]]:
    """The claims each pod of ``job`` names, by (task, index); pods naming none are absent.
    A Volcano job's ``spec.volumes`` claims are in every pod (agents/core/render.py)."""
    per_set = _claim_templates(job)
    every_pod = [claim for claim, _ in job.claims]
    out: dict[PodKey, tuple[str, ...]] = {}
    for task in job.tasks:
        shared = [c for v, c in template_claims(task.template_json) if v not in per_set]
        if not shared and not per_set and not every_pod:
            continue  # no pod of the task names a claim: nothing to walk per replica on this hot path
        for index in range(task.replicas):
            claims = [*shared, *(f"{t}-{job.name}-{index}" for t in per_set), *every_pod]
            out[(task.name, index)] = tuple(dict.fromkeys(claims))
    return out


def claim_names(job: Job) -> tuple[str, ...]:
    """Every claim the job's pods name, once each, sorted: the names that follow from the
    job alone (ephemeral volumes' claims follow from the pods, ``JobClaims``)."""
    return tuple(sorted({c for claims in pod_claims(job).values() for c in claims}))


def ephemeral_volumes(job: Job) -> dict[str, tuple[str, ...]]:
    """Task -> the generic ephemeral volumes of its pods; tasks with none are absent. A
    StatefulSet's claim template replaces a template volume of its name, ephemeral or not."""
    per_set = set(_claim_templates(job))
    out = {t.name: tuple(v for v in template_ephemeral(t.template_json) if v not in per_set) for t in job.tasks}
    return {task: volumes for task, volumes in out.items() if volumes}


@dataclass(frozen=True)
class JobClaims:
    """The claims of one job the agent reads on a pass that may bind: ``named`` (they
    follow from the job) and, per task, the ephemeral volumes whose claims are named after
    each pod. ``count`` is every claim the job's pods name, an ephemeral volume once per
    pod of its task, and is held to ``MAX_JOB_CLAIMS`` before any read."""

    named: tuple[str, ...] = ()
    ephemeral: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    count: int = 0

    def names(self, namespace: str, pods: Iterable[PodRecord]) -> tuple[str, ...]:
        """The claims to read now: the named ones and those of the ephemeral volumes of
        ``pods`` that exist in ``namespace`` and are still to be bound."""
        made = {ephemeral_claim(p.name, v) for p in pods
                if p.namespace == namespace and p.node is None and not p.terminal and not p.deleting
                for v in self.ephemeral.get(p.task, ())}
        return tuple(sorted(made.union(self.named)))

    def over_limit(self, read: int) -> str:
        """Why the claims are not read ("" when within the limit); ``read``: how many
        ``names`` gave (more than ``count`` while pods of an older version linger)."""
        count = max(self.count, read)
        if count <= MAX_JOB_CLAIMS:
            return ""
        per_pod = " (each pod's generic ephemeral volumes counted for every pod)" if self.ephemeral else ""
        return (f"the job's pods name {count} PersistentVolumeClaims{per_pod}, over the limit of "
                f"{MAX_JOB_CLAIMS} the agent reads for a job")


def job_claims(job: Job) -> JobClaims:
    """What the agent reads of ``job``'s claims (``JobClaims``), worked out from the job alone."""
    named = claim_names(job)
    ephemeral = ephemeral_volumes(job)
    count = len(named) + sum(t.replicas * len(ephemeral.get(t.name, ())) for t in job.tasks)
    return JobClaims(named, ephemeral, count)


@dataclass(frozen=True)
class Volumes:
    """The claims a job's pods name as read now, the PVs the bound ones are bound to and
    the classes of the unbound ones, each by name (absent: not found). ``error``: they
    could not be read or one could not be used (too many, malformed): no pod is bound."""

    claims: Mapping[str, ClaimRecord] = field(default_factory=dict)
    volumes: Mapping[str, VolumeRecord] = field(default_factory=dict)
    classes: Mapping[str, StorageClassRecord] = field(default_factory=dict)
    error: str = ""


def _labels_match(term: Term, labels: Mapping[str, str]) -> bool:
    """A PV node selector term against a node of labels only (``CheckNodeAffinity``)."""
    if not term.expressions and not term.fields:
        return False
    return (all(r.matches(labels) for r in term.expressions)
            and all(r.matches({"metadata.name": ""}) for r in term.fields))


def _topology_match(terms: tuple[Topology, ...], labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms allow every node; else any term whose
    every label is present with one of its values."""
    return not terms or any(all(labels.get(k) in vs for k, vs in term) for term in terms)


@dataclass(frozen=True)
class PodVolumeRules:
    """What one pod's claims require of its node, and which claims get the node chosen."""

    affinity: tuple[tuple[str, tuple[Term, ...]], ...] = ()  # (PV, its required terms ORed), all must hold
    pinned: tuple[tuple[str, str], ...] = ()  # (claim, selected node) already written
    topologies: tuple[tuple[str, tuple[Topology, ...]], ...] = ()  # (class, allowedTopologies) to provision in
    select: tuple[str, ...] = ()  # WaitForFirstConsumer claims still without a node

    def allows(self, node: Node) -> bool:
        return (all(any(_labels_match(t, node.labels) for t in terms) for _, terms in self.affinity)
                and all(node.name == chosen for _, chosen in self.pinned)
                and all(_topology_match(terms, node.labels) for _, terms in self.topologies))

    def describe(self) -> str:
        """The volume constraints, for "no node allowed" reasons."""
        parts = [f"PV {pv}'s node affinity" for pv, _ in self.affinity]
        parts += [f"claim {claim} provisioned on {node}" for claim, node in self.pinned]
        parts += [f"StorageClass {cls}'s allowedTopologies" for cls, terms in self.topologies if terms]
        parts += [f"claim {claim} provisioned on one node for all its pods" for claim in self.select]
        return ", ".join(parts)


@dataclass(frozen=True)
class VolumeRules:
    """The volume side of binding a gang: ``waiting`` (why no pod may be bound now) or the
    rules per pod (pods naming no claim are absent and allow every node)."""

    pods: Mapping[PodKey, PodVolumeRules] = field(default_factory=dict)
    waiting: str = ""

    def allows(self, key: PodKey, node: Node) -> bool:
        rules = self.pods.get(key)
        return rules is None or rules.allows(node)

    def selects(self, key: PodKey) -> tuple[str, ...]:
        rules = self.pods.get(key)
        return rules.select if rules is not None else ()

    def describe(self, key: PodKey) -> str:
        rules = self.pods.get(key)
        return rules.describe() if rules is not None else ""


Consumer = tuple[str, str]  # (name, uid; "" before it exists) of the pod an ephemeral volume's claim is for


def _wait_reason(claim: str, record: ClaimRecord | None, volumes: Volumes, ephemeral_for: Consumer | None) -> str:
    """Why this claim makes its pod unschedulable now (kube-scheduler's PreFilter and
    Filter reasons, in ``podHasPVCs``' order), or "" when it does not. ``ephemeral_for``:
    the claim is that pod's generic ephemeral volume (rule 4)."""
    if record is None:
        if ephemeral_for is not None:
            return f'waiting for the ephemeral volume controller to create the persistentvolumeclaim "{claim}"'
        return f'persistentvolumeclaim "{claim}" not found'
    if record.lost:
        return f'persistentvolumeclaim "{claim}" bound to non-existent persistentvolume "{record.volume}"'
    if record.deleting:
        return f'persistentvolumeclaim "{claim}" is being deleted'
    if ephemeral_for is not None:
        pod, uid = ephemeral_for
        if not uid or record.controller != uid:
            return (f"PVC {record.namespace}/{claim} was not created for pod {record.namespace}/{pod} "
                    "(pod is not owner)")
    if record.bound:
        if record.volume not in volumes.volumes:
            return (f'persistentvolumeclaim "{claim}" is bound to persistentvolume "{record.volume}", '
                    "which does not exist")
        return ""
    cls = volumes.classes.get(record.storage_class) if record.storage_class else None
    if cls is None or cls.binding_mode != BINDING_WAIT_FOR_FIRST_CONSUMER or record.volume:
        if record.volume:
            why = f"pre-bound to persistentvolume {record.volume}, not bound yet"
        elif cls is not None:
            why = f"StorageClass {cls.name} binds Immediately"
        else:
            why = f"StorageClass {record.storage_class} not found" if record.storage_class else "no StorageClass"
        return f'pod has unbound immediate PersistentVolumeClaims (claim "{claim}": {why}; waiting for it to be bound)'
    if not record.selected_node and cls.provisioner in ("", NO_PROVISIONER):
        return (f'persistentvolumeclaim "{claim}" waits for a pre-created persistentvolume: StorageClass '
                f"{cls.name} has no provisioner, and choosing an existing volume for a node is kube-scheduler's "
                f"static binding, which the agent does not do (pre-bind the claim with spec.volumeName)")
    return ""


def volume_rules(job: Job, keys: Iterable[PodKey], volumes: Volumes | None,
                 pods: Mapping[PodKey, PodRecord] | None = None) -> VolumeRules | None:
    """The volume rules for binding the pods ``keys`` of ``job``; None when they name no claim.
    ``pods`` are the pods observed by key: their names (default: a Volcano job's
    ``<job>-<task>-<i>``, for a pod not made yet) and uids name and own their ephemeral
    volumes' claims.

    ``volumes`` None means the claims were not read (the pass had nothing to bind when it
    observed): the gang waits for the next pass rather than bind unchecked."""
    named = pod_claims(job)
    ephemeral = ephemeral_volumes(job)
    wanted: list[tuple[PodKey, str, dict[tuple[str, Consumer | None], None]]] = []
    for key in sorted(keys):
        pod = (pods or {}).get(key)
        name = pod.name if pod is not None else pod_name(job.name, *key)
        claims: dict[tuple[str, Consumer | None], None] = dict.fromkeys((c, None) for c in named.get(key, ()))
        claims.update(dict.fromkeys((ephemeral_claim(name, v), (name, pod.uid if pod is not None else ""))
                                    for v in ephemeral.get(key[0], ())))
        if claims:
            wanted.append((key, name, claims))
    if not wanted:
        return None
    if volumes is None:
        return VolumeRules(waiting="waiting for the job's PersistentVolumeClaims to be read")
    if volumes.error:
        return VolumeRules(waiting=volumes.error)
    rules: dict[PodKey, PodVolumeRules] = {}
    for key, name, consumed in wanted:
        affinity: list[tuple[str, tuple[Term, ...]]] = []
        pinned: list[tuple[str, str]] = []
        topologies: list[tuple[str, tuple[Topology, ...]]] = []
        select: list[str] = []
        for claim, ephemeral_for in consumed:
            record = volumes.claims.get(claim)
            reason = _wait_reason(claim, record, volumes, ephemeral_for)
            if reason:
                return VolumeRules(waiting=f"pod {name}: {reason}")
            assert record is not None
            if record.bound:
                pv = volumes.volumes[record.volume]
                if pv.node_affinity is not None:
                    affinity.append((pv.name, pv.node_affinity))
            elif record.selected_node:
                pinned.append((claim, record.selected_node))
            else:
                cls = volumes.classes[record.storage_class]
                topologies.append((cls.name, cls.allowed_topologies))
                select.append(claim)
        rules[key] = PodVolumeRules(tuple(affinity), tuple(pinned), tuple(topologies),
                                    tuple(dict.fromkeys(select)))
    return VolumeRules(rules)
