"""The heart of the agent: given a Work and what the cluster holds now, the operations
that move the cluster toward the Work. Pure and level-triggered, like a Kubernetes
controller's reconcile (and Volcano's job controller ``syncJob``,
volcano-sh/volcano pkg/controllers/job/state/*.go), so that a restarted agent needs no
memory of what it was doing: it reads the cluster and carries on.

Rules, in order:

1. A cancelled Work withdraws everything labelled with the job.
2. The headless Service, the hosts ConfigMap, the ssh Secret and the svc NetworkPolicy
   are created when missing and replaced when their content hash differs.
3. Pods of another work version (or no longer wanted) are deleted. Their names and room
   are only reused once they are gone, so a pass that still sees such pods creates only
   non-clashing pods and binds nothing (a version change converges in two passes; each
   pass is still idempotent given what it sees).
4. A finished job (Completed/Failed/Aborted/Terminated) keeps its terminal pods for
   inspection and deletes the rest; nothing is created.
5. Missing pods are created unbound. Pod names are deterministic, so a pod is never
   created twice. A task with ``dependsOn`` gets its pods only once its dependencies run.
   An elastic job gets only the pods its Work lists; a grown Work (same version, next
   generation) lists more, so exactly the added pods are created and bound while the
   running ones are left alone.
6. **All-or-nothing binding.** Unbound pods are bound only when every pod of the gang
   exists and the gang reaches ``minAvailable`` inside the Work's HyperNode: planned
   nodes are reused when still valid, the rest re-packed in the same domain
   (agents/core/binding.py). Otherwise no pod is bound, and pods already bound (an agent
   killed midway, room taken by someone else) are deleted to be recreated unbound, and
   the Work reports Replan. A gang is therefore never left half-bound.
7. **Volumes first.** The claims of the job's ``spec.volumes[].volumeClaim`` are created
   before its pods (Volcano's ``createJobIOIfNotExist``), never replaced, and withdrawn
   with the job; a claim of that name the job did not make (a user's) is left alone and
   holds the job's pods back with the reason. Pods naming PersistentVolumeClaims are bound only as kube-scheduler
   would bind them (agents/core/volumes.py): a missing or unbound Immediate claim keeps
   the whole gang unbound and Pending with the reason, a bound PV's node affinity narrows
   the nodes (none left in the domain: Replan, as rule 6), and a WaitForFirstConsumer
   claim gets its pod's node written on it (``SelectClaimNode``) before any pod is bound.

Creates come before claim writes and those before binds in the op list, and ``apply_ops`` stops at the first failure,
so a half-applied pass can leave pods unbound but never binds part of a gang that the
next pass could not complete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from agents.core.binding import bind_gang
from agents.core.operations import (
    BindPod,
    CreateClaim,
    CreateConfigMap,
    CreateNetworkPolicy,
    CreatePod,
    CreateSecret,
    CreateService,
    DeleteClaim,
    DeleteConfigMap,
    DeleteNetworkPolicy,
    DeletePod,
    DeleteSecret,
    DeleteService,
    Op,
    SelectClaimNode,
)
from agents.core.records import (
    ANNOTATION_SPEC_HASH,
    LABEL_TASK,
    LABEL_TASK_INDEX,
    ClaimManifest,
    ClaimRecord,
    ConfigMapManifest,
    NetworkPolicyManifest,
    PodRecord,
    SecretManifest,
    ServiceManifest,
    WorkloadManifest,
)
from agents.core.recovery import (
    ABORT_JOB,
    COMPLETE_JOB,
    COMPLETED,
    FAIL_JOB,
    RESTARTS,
    TERMINAL_JOB_PHASES,
    TERMINATE_JOB,
    Action,
)
from agents.core.recovery import RUNNING as JOB_RUNNING
from agents.core.render import render
from agents.core.volumes import VolumeRules, Volumes, volume_rules
from federation.domain.jobs import Job
from federation.domain.nodes import Node
from federation.domain.plans import PodAssignment
from federation.domain.states import PodPhase, WorkPhase
from federation.domain.topology import Domain, HyperNodeTree
from federation.domain.works import Work

M = TypeVar("M", ServiceManifest, ConfigMapManifest, SecretManifest, NetworkPolicyManifest)


@dataclass(frozen=True)
class Observed:
    """The cluster as read for one Work. ``pods`` are those labelled with the job (any
    version); ``nodes`` carry free resources computed over ALL pods of the cluster;
    ``tree`` is the last valid HyperNode tree (None before one was ever seen)."""

    pods: tuple[PodRecord, ...] = ()
    services: tuple[ServiceManifest, ...] = ()
    config_maps: tuple[ConfigMapManifest, ...] = ()
    secrets: tuple[SecretManifest, ...] = ()
    network_policies: tuple[NetworkPolicyManifest, ...] = ()
    workloads: tuple[WorkloadManifest, ...] = ()
    nodes: tuple[Node, ...] = ()
    tree: HyperNodeTree | None = None
    # The names of the Ready ``nodes``, when the reader worked them out once for every job
    # (agents/core/view.py); None: ``pod_events`` derives them from ``nodes``.
    ready: frozenset[str] | None = None
    # The claims the job's pods name, their PVs and classes (agents/core/volumes.py); None
    # when the job names none or nothing was left to bind when it was observed.
    volumes: Volumes | None = None
    # The claims of the names the agent makes for the job's spec.volumes, as read on this
    # pass (any labels: one of another job or a user's is not the job's), and why they
    # could not be read.
    claims: tuple[ClaimRecord, ...] = ()
    claims_error: str = ""


@dataclass(frozen=True)
class Reconciliation:
    ops: tuple[Op, ...]
    phase: WorkPhase
    message: str = ""


def reconcile(
    work: Work,
    observed: Observed,
    *,
    job_phase: str = JOB_RUNNING,
    hints: Sequence[PodAssignment] = (),
) -> Reconciliation:
    """The operations that converge the cluster to ``work``; see the module rules.

    ``job_phase`` is the local job phase kept by recovery; ``hints`` are node choices for
    replacement pods made by recovery (they take precedence over the plan's).
    """
    job = work.job
    mine = [p for p in observed.pods if p.job == job.name]
    if work.cancelled:
        return _withdraw(work, observed, mine)
    desired = render(work)
    if job.elastic and work.placement.pods:
        # An elastic job runs the pods its Work lists, no more: central chose them (and,
        # when the job grows, adds pods in a new generation of the same version, so the
        # running ones stay and only the added ones are created and bound).
        listed = {(p.task, p.index) for p in work.placement.pods}
        desired = replace(desired, pods=tuple(
            m for m in desired.pods if (m.labels[LABEL_TASK], int(m.labels[LABEL_TASK_INDEX])) in listed))
    ops: list[Op] = []
    ops += _sync(observed.services, desired.service, job.namespace, CreateService, DeleteService)
    ops += _sync(observed.config_maps, desired.config_map, job.namespace, CreateConfigMap, DeleteConfigMap)
    ops += _sync(observed.secrets, desired.secret, job.namespace, CreateSecret, DeleteSecret)
    ops += _sync(observed.network_policies, desired.network_policy, job.namespace, CreateNetworkPolicy,
                 DeleteNetworkPolicy)

    wanted = {m.name for m in desired.pods}
    current: dict[str, PodRecord] = {}
    stale: list[PodRecord] = []
    for pod in mine:
        fresh = pod.namespace == job.namespace and pod.version == work.version and pod.name in wanted
        if fresh and pod.name not in current:
            current[pod.name] = pod
        else:
            stale.append(pod)
    ops += [DeletePod(p.namespace, p.name, f"work version {p.version} superseded by {work.version}")
            for p in stale if not p.deleting]

    if job_phase in TERMINAL_JOB_PHASES:
        ops += [DeletePod(p.namespace, p.name, f"job {job_phase}")
                for p in current.values() if not p.terminal and not p.deleting]
        phase = WorkPhase.SUCCEEDED if job_phase == COMPLETED else WorkPhase.FAILED
        return Reconciliation(tuple(ops), phase, f"job {job_phase}")

    claim_ops, hold = _make_claims(job.name, desired.claims, observed)
    if hold:
        return Reconciliation(tuple(ops), WorkPhase.PENDING, hold)
    ops += claim_ops
    held = {p.name for p in stale if p.namespace == job.namespace}
    waiting_tasks = waiting_on_dependencies(job, current.values())
    missing = [m for m in desired.pods if m.name not in current and m.name not in held
               and m.labels[LABEL_TASK] not in waiting_tasks]
    ops += [CreatePod(m) for m in missing]
    waiting = len(stale) + sum(1 for p in current.values() if p.deleting)
    if waiting:
        return Reconciliation(tuple(ops), WorkPhase.PENDING, f"waiting for {waiting} pods to terminate before binding")

    bound = [PodAssignment(p.task, p.index, p.node) for p in current.values() if p.node is not None]
    unbound = [(p.task, p.index) for p in current.values() if p.node is None and not p.terminal]
    unbound += [(m.labels[LABEL_TASK], int(m.labels[LABEL_TASK_INDEX])) for m in missing]
    if not unbound:
        return Reconciliation(tuple(ops), _settled_phase(work, current), "")
    if claim_ops:  # read back on the next pass (their class decides how the gang binds)
        made = ", ".join(op.manifest.name for op in claim_ops)
        return Reconciliation(tuple(ops), WorkPhase.PENDING, f"creating persistentvolumeclaims {made}")
    if observed.tree is None:
        return Reconciliation(tuple(ops), WorkPhase.PENDING, "no valid HyperNode tree observed yet")
    rules = volume_rules(job, unbound, observed.volumes, {(p.task, p.index): p for p in current.values()})
    if rules is not None and rules.waiting:
        return Reconciliation(tuple(ops), WorkPhase.PENDING, rules.waiting)
    domain = observed.tree.domains.get(work.placement.hypernode)
    planned = _merge(work.placement.pods, hints)
    result = bind_gang(job, domain or Domain(work.placement.hypernode, 0, frozenset()), observed.nodes,
                       planned=planned, pending=sorted(unbound), bound=bound, waiting=waiting_tasks,
                       volumes=rules, tree=observed.tree)
    if result.assignments is None:
        reason = result.reason if domain is not None else f"HyperNode {work.placement.hypernode} not found"
        ops += [DeletePod(job.namespace, p.name, "gang cannot be completed; unbinding")
                for p in current.values() if p.node is not None and not p.terminal]
        return Reconciliation(tuple(ops), WorkPhase.REPLAN, reason)
    names = {(t, i): n for t, i, n in ((m.labels[LABEL_TASK], int(m.labels[LABEL_TASK_INDEX]), m.name)
                                       for m in desired.pods)}
    ops += claim_writes(job.namespace, rules, observed.volumes, result.assignments)
    ops += [BindPod(job.namespace, names[(a.task, a.index)], a.node) for a in result.assignments]
    phase = WorkPhase.RUNNING if _started(current) >= job.gang_size else WorkPhase.BOUND
    return Reconciliation(tuple(ops), phase, "")


def _make_claims(job: str, desired: Sequence[ClaimManifest], observed: Observed) -> tuple[list[CreateClaim], str]:
    """Creates for the job's missing claims, or why its pods must wait: a claim of one of
    its names is someone else's (never replaced, and its data is not the job's to mount),
    or the claims could not be read."""
    if observed.claims_error:
        return [], observed.claims_error
    found = {c.name: c for c in observed.claims}
    for manifest in desired:
        claim = found.get(manifest.name)
        if claim is not None and claim.job != job:
            owner = f"job {claim.job}" if claim.job else "a user (it carries no job label)"
            return [], (f"persistentvolumeclaim {manifest.namespace}/{manifest.name}, which this job's "
                        f"spec.volumes makes, already exists and belongs to {owner}; it is left alone and the "
                        "job waits until it is renamed or deleted")
    return [CreateClaim(m) for m in desired if m.name not in found], ""


def claim_writes(namespace: str, rules: VolumeRules | None, volumes: Volumes | None,
                 assignments: Sequence[PodAssignment]) -> list[Op]:
    """The selected-node writes for the WaitForFirstConsumer claims of the pods about to be
    bound, once per claim (bind_gang put every pod sharing one on the same node)."""
    if rules is None or volumes is None:
        return []
    chosen: dict[str, str] = {}
    for a in assignments:
        for claim in rules.selects((a.task, a.index)):
            chosen.setdefault(claim, a.node)
    return [SelectClaimNode(namespace, claim, node, volumes.claims[claim].resource_version)
            for claim, node in sorted(chosen.items())]


def waiting_on_dependencies(job: Job, pods: Iterable[PodRecord]) -> frozenset[str]:
    """Tasks whose pods may not be created yet: a dependency (Volcano task ``dependsOn``)
    has fewer than its minAvailable (default: all replicas) pods Running or Succeeded.
    Volcano's ``waitDependsOnTaskMeetCondition``/``isDependsOnPodsReady``
    (pkg/controllers/job/job_controller_actions.go): all dependencies, or any one with
    ``iteration: any``. It only gates creation: pods that exist are kept."""
    started: dict[str, int] = {}
    for pod in pods:
        if pod.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) and not pod.deleting:
            started[pod.task] = started.get(pod.task, 0) + 1

    def ready(name: str) -> bool:
        return started.get(name, 0) >= job.task(name).minimum

    waiting = set()
    for task in job.tasks:
        if task.depends_on:
            met = [ready(d) for d in task.depends_on]
            if not (any(met) if task.depends_on_any else all(met)):
                waiting.add(task.name)
    return frozenset(waiting)


def _merge(planned: Sequence[PodAssignment], hints: Sequence[PodAssignment]) -> tuple[PodAssignment, ...]:
    override = {(h.task, h.index) for h in hints}
    return (*hints, *(p for p in planned if (p.task, p.index) not in override))


def _started(current: dict[str, PodRecord]) -> int:
    return sum(1 for p in current.values() if p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) and not p.deleting)


def _settled_phase(work: Work, current: dict[str, PodRecord]) -> WorkPhase:
    """Phase when nothing is left to bind."""
    if _started(current) >= work.job.gang_size:
        return WorkPhase.RUNNING
    placed = sum(1 for p in current.values() if p.node is not None)
    return WorkPhase.BOUND if placed >= work.job.gang_size else WorkPhase.PENDING


def _sync(
    observed: Sequence[M],
    desired: M | None,
    namespace: str,
    create: Callable[[M], Op],
    delete: Callable[[str, str], Op],
) -> list[Op]:
    """Create when missing, replace when the content hash differs, delete when unwanted."""
    want = desired.annotations.get(ANNOTATION_SPEC_HASH) if desired is not None else None
    ops: list[Op] = []
    keep = False
    for obj in observed:
        same = desired is not None and obj.name == desired.name and obj.namespace == namespace
        if same and obj.annotations.get(ANNOTATION_SPEC_HASH) == want:
            keep = True
        else:
            ops.append(delete(obj.namespace, obj.name))
    if desired is not None and not keep:
        ops.append(create(desired))
    return ops


def _withdraw(work: Work, observed: Observed, mine: Sequence[PodRecord]) -> Reconciliation:
    ops: list[Op] = [DeletePod(p.namespace, p.name, "work cancelled") for p in mine if not p.deleting]
    # The Secret goes before the Service: the orphan sweep finds a job's Secret by its
    # Service (the agent may not list Secrets), so the Service is the last marker.
    ops += [DeleteSecret(s.namespace, s.name) for s in observed.secrets]
    ops += [DeleteNetworkPolicy(n.namespace, n.name) for n in observed.network_policies]
    ops += [DeleteService(s.namespace, s.name) for s in observed.services]
    ops += [DeleteConfigMap(c.namespace, c.name) for c in observed.config_maps]
    # The job's claims go with it, as Volcano's owner reference makes the garbage collector
    # do; one still used by a terminating pod stays until the pod is gone (pvc-protection).
    claims = [c for c in observed.claims if c.job == work.name]
    ops += [DeleteClaim(c.namespace, c.name, work.name) for c in claims if not c.deleting]
    left = (len(mine) + len(observed.services) + len(observed.config_maps) + len(observed.secrets)
            + len(observed.network_policies) + len(claims))
    return Reconciliation(tuple(ops), WorkPhase.CANCELLED, f"withdrawing {left} objects" if left else "withdrawn")


def ops_for_actions(work: Work, observed: Observed, actions: Sequence[Action], now: float) -> tuple[Op, ...]:
    """Deletions that carry out recovery actions due at ``now``. Restarts only delete:
    the next reconcile pass recreates the pods and binds them (all-or-nothing again).
    Job-ending actions delete the pods still running; Replan changes nothing locally."""
    pods = {p.name: p for p in observed.pods if p.job == work.name and p.version == work.version}
    doomed: dict[str, str] = {}
    for action in actions:
        if not action.ready(now):
            continue
        if action.kind in RESTARTS:
            for name in action.pods:
                if name in pods:
                    doomed.setdefault(name, f"{action.kind} after {action.cause}")
        elif action.kind in (ABORT_JOB, TERMINATE_JOB, COMPLETE_JOB, FAIL_JOB):
            for name, pod in pods.items():
                if not pod.terminal:
                    doomed.setdefault(name, action.kind)
    return tuple(DeletePod(pods[n].namespace, n, why) for n, why in sorted(doomed.items()) if not pods[n].deleting)
