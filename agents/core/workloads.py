"""Workload jobs (a Deployment or StatefulSet, federation/domain/workloads.py) in the
member cluster: the workload itself is created, its controller creates the pods, and the
agent binds them all-or-nothing inside the Work's HyperNode, as for a Volcano Job.

The workload is created as the user wrote it, with five changes: ``spec.replicas`` is
the job's (the placed gang), the pod template goes to our scheduler
(``schedulerName: federation-scheduler``), the template carries our job, task and
work-version labels (so the agent finds the pods and tells versions apart) and the
work-id annotation, and ``spec.selector`` also requires the job label (``own_selector``:
the workload's controller adopts only its own job's pods). A new Work version replaces
the workload (delete, then create): the controller's pods of the old version go with it
(garbage collection through their owner references) and the new pods are bound once the
old ones are gone.

Pods have no deterministic names here, so each gets an index for placement and status:
a StatefulSet pod its ordinal, a Deployment pod its rank by name among the job's pods
of its version — the live ones first: a ReplicaSet leaves an evicted pod behind, Failed,
when it replaces it, and ranked among them the live pods took indices past the replicas
(the gang looked incomplete while it ran, and central refuses an index past twice the
replicas). Pods ranked past twice the replicas, such leftovers only, are not reported
(``agents.core.events.job_pods``).
Repair is the controller's: a lost pod is recreated unbound and bound again inside the
same HyperNode (bound pods count toward the gang); when the gang cannot be completed
there, the bound pods are released and the Work reports Replan. Restart policies do not
apply (a workload carries none; its controller restarts containers and pods).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from agents.core.binding import bind_gang
from agents.core.operations import BindPod, CreateWorkload, DeletePod, DeleteWorkload, Op
from agents.core.reconcile import Observed, Reconciliation, claim_writes
from agents.core.records import (
    ANNOTATION_SPEC_HASH,
    ANNOTATION_WORK_ID,
    LABEL_JOB,
    LABEL_TASK,
    LABEL_TASK_INDEX,
    LABEL_WORK_VERSION,
    SCHEDULER_NAME,
    PodRecord,
    WorkloadManifest,
)
from agents.core.render import spec_hash
from agents.core.volumes import volume_rules
from federation.domain.jobs import Job
from federation.domain.plans import PodAssignment
from federation.domain.states import PodPhase, WorkPhase
from federation.domain.topology import Domain
from federation.domain.works import Work


def _template_metadata(template: dict[str, Any], work: Work) -> None:
    job = work.job
    meta = template.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_JOB: job.name, LABEL_TASK: job.tasks[0].name,
                      LABEL_WORK_VERSION: str(work.version)}
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_WORK_ID: work.work_id}


def render_workload(work: Work) -> WorkloadManifest:
    """The Deployment/StatefulSet to create for ``work`` (deterministic)."""
    job = work.job
    assert job.workload is not None
    body = job.workload.body
    spec: dict[str, Any] = dict(body["spec"])
    spec["replicas"] = job.tasks[0].replicas
    template: dict[str, Any] = json.loads(json.dumps(spec.get("template") or {}))
    _template_metadata(template, work)
    pod_spec = template.setdefault("spec", {})
    pod_spec["schedulerName"] = SCHEDULER_NAME
    spec["template"] = template
    meta = body.get("metadata") or {}
    labels = {**dict(meta.get("labels") or {}), LABEL_JOB: job.name}
    digest = spec_hash("workload", job.workload.kind, json.dumps(spec, sort_keys=True), work.version)
    spec["selector"] = own_selector(spec.get("selector"), job.name)  # after the hash: derived from the name
    annotations = {**dict(meta.get("annotations") or {}), ANNOTATION_SPEC_HASH: digest}
    whole = {"apiVersion": body.get("apiVersion", "apps/v1"), "kind": job.workload.kind,
             "metadata": {"name": job.name, "namespace": job.namespace, "labels": labels, "annotations": annotations},
             "spec": spec}
    return WorkloadManifest(job.workload.kind, job.name, job.namespace, labels, annotations,
                            json.dumps(whole, sort_keys=True, separators=(",", ":")))


def own_selector(selector: object, job: str) -> dict[str, Any]:
    """The workload's selector, narrowed to its own job's pods (``LABEL_JOB``, which its
    template carries). A controller adopts every orphan pod its selector matches, and the
    agent's pods of other jobs have no owner: a StatefulSet ``<job>-<task>`` selecting, say,
    ``federation.io/task`` would otherwise adopt job ``<job>``'s pods ``<job>-<task>-<i>``
    in the same namespace and delete or replace them as its own."""
    out: dict[str, Any] = dict(selector) if isinstance(selector, dict) else {}
    out["matchLabels"] = {**(out.get("matchLabels") or {}), LABEL_JOB: job}
    return out


def _ordinal(name: str, prefix: str) -> int | None:
    tail = name[len(prefix):] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def index_pods(job: Job, pods: Iterable[PodRecord]) -> list[PodRecord]:
    """The job's pods, each with a task index: a StatefulSet pod's ordinal, else the rank
    of the pod's name among those of its work version, live pods (neither finished nor
    being deleted) ranked first (module doc)."""
    assert job.workload is not None
    task = job.tasks[0].name
    out: list[PodRecord] = []
    ranks: dict[int, int] = {}
    for pod in sorted(pods, key=lambda p: (p.terminal or p.deleting, p.name)):
        index = _ordinal(pod.name, f"{job.name}-") if job.workload.kind == "StatefulSet" else None
        if index is None:
            index = ranks.get(pod.version, 0)
            ranks[pod.version] = index + 1
        out.append(replace(pod, labels={**pod.labels, LABEL_TASK: task, LABEL_TASK_INDEX: str(index)}))
    return out


def reconcile_workload(work: Work, observed: Observed) -> Reconciliation:
    """The operations that converge a workload job (see the module docstring)."""
    job = work.job
    assert job.workload is not None
    kind = job.workload.kind
    mine = index_pods(job, (p for p in observed.pods if p.job == job.name and p.namespace == job.namespace))
    if work.cancelled:
        ops: list[Op] = [DeleteWorkload(w.kind, w.namespace, w.name) for w in observed.workloads]
        ops += [DeletePod(p.namespace, p.name, "work cancelled") for p in mine if not p.deleting]
        left = len(observed.workloads) + len(mine)
        return Reconciliation(tuple(ops), WorkPhase.CANCELLED, f"withdrawing {left} objects" if left else "withdrawn")
    desired = render_workload(work)
    ops = []
    have = [w for w in observed.workloads if w.kind == kind and w.name == job.name]
    if not have or have[0].annotations.get(ANNOTATION_SPEC_HASH) != desired.annotations[ANNOTATION_SPEC_HASH]:
        ops += [DeleteWorkload(w.kind, w.namespace, w.name) for w in have]
        ops.append(CreateWorkload(desired))
    stale = [p for p in mine if p.version != work.version]
    ops += [DeletePod(p.namespace, p.name, f"work version {p.version} superseded by {work.version}")
            for p in stale if not p.deleting]
    current = [p for p in mine if p.version == work.version and not p.deleting and not p.terminal]
    replicas = job.tasks[0].replicas
    current = [p for p in current if p.index < replicas]
    if stale or len(current) < job.gang_size:
        waiting = f"{len(stale)} old pods to go" if stale else f"{len(current)} of {job.gang_size} pods from the {kind}"
        return Reconciliation(tuple(ops), WorkPhase.PENDING, f"waiting for {waiting}")
    unbound = [(p.task, p.index) for p in current if p.node is None]
    bound = [PodAssignment(p.task, p.index, p.node) for p in current if p.node is not None]
    started = sum(1 for p in current if p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED))
    if not unbound:
        phase = WorkPhase.RUNNING if started >= job.gang_size else WorkPhase.BOUND
        return Reconciliation(tuple(ops), phase, "")
    if observed.tree is None:
        return Reconciliation(tuple(ops), WorkPhase.PENDING, "no valid HyperNode tree observed yet")
    names = {(p.task, p.index): p.name for p in current}
    rules = volume_rules(job, unbound, observed.volumes, {(p.task, p.index): p for p in current})
    if rules is not None and rules.waiting:
        return Reconciliation(tuple(ops), WorkPhase.PENDING, rules.waiting)
    domain = observed.tree.domains.get(work.placement.hypernode)
    result = bind_gang(job, domain or Domain(work.placement.hypernode, 0, frozenset()), observed.nodes,
                       planned=work.placement.pods, pending=sorted(unbound), bound=bound, volumes=rules)
    if result.assignments is None:
        reason = result.reason if domain is not None else f"HyperNode {work.placement.hypernode} not found"
        ops += [DeletePod(p.namespace, p.name, "gang cannot be completed; unbinding") for p in current if p.node]
        return Reconciliation(tuple(ops), WorkPhase.REPLAN, reason)
    ops += claim_writes(job.namespace, rules, observed.volumes, result.assignments)
    ops += [BindPod(job.namespace, names[(a.task, a.index)], a.node) for a in result.assignments]
    return Reconciliation(tuple(ops), WorkPhase.RUNNING if started >= job.gang_size else WorkPhase.BOUND, "")


def workload_refs(job: Job) -> Sequence[tuple[str, str, str]]:
    """(kind, namespace, name) of the workload the job owns (read by name, never listed)."""
    return ((job.workload.kind, job.namespace, job.name),) if job.workload is not None else ()
