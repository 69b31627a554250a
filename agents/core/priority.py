"""The job's PriorityClass in the member cluster: ensured there, carried by its pods.

The federation resolves ``priorityClassName`` against the classes applied to it
(``fedctl apply`` of scheduling.k8s.io/v1 PriorityClass, or the built-in table) and plans
with that value. In the member cluster Kubernetes' Priority admission plugin resolves the
pod's ``priorityClassName`` again, against that cluster's classes, and refuses a pod whose
class does not exist there, or whose ``spec.priority`` differs from the class's value. So
before the job's pods are created the agent makes sure the class exists:

- **absent**: it is created with the job's priority (the federation's value of the class),
  labelled ``federation.io/managed``, never deleted by the agent (other jobs, and the
  cluster's own pods, may use it);
- **present with the same value**: used;
- **present with another value**: the cluster's class is used as it is (its admin's
  definition is what every other pod of that cluster is ordered by, and admission would
  refuse any other value), and the job gets a Warning event saying both values; the
  federation still plans with its own value;
- **cannot be read or created** (RBAC, apiserver refusal, a timeout): the pods are created
  without a class (the cluster's globalDefault, or 0) and the job gets a Warning event
  saying why. The failure may be transient, so the job's controller tries again on a
  later pass, after a bounded exponential back-off (``retry_delay``: 1 s doubling to
  5 min, as the Kubernetes workqueue's rate limiter), and its pods created from then on
  carry the class; pods already running keep theirs (Kubernetes cannot change a pod's
  priority, and recreating a running gang for it would cost more than it gives).

Pods then carry ``priorityClassName`` and ``priority`` equal to the class's value in that
cluster. A job without a class (or with only the ``federation.io/priority`` annotation,
which no member cluster can express without a class) leaves its pods' priority to the
cluster. A workload job (Deployment/StatefulSet) carries its class in its own pod
template: the agent ensures the class the same way, and warns when it cannot.

A task whose pod template names its own class (Volcano's per-task ``priorityClassName``,
which sets that task's pods' priority while the Job's class orders the job) keeps it on
its pods when the member cluster has that class, as Volcano keeps a template's class.
The federation knows no value for it, so the agent does not create it: when the cluster
lacks it, the task's pods carry the job's class instead and the job gets a Warning event
naming the class, as Kubernetes admission would otherwise refuse the pods.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache

from agents.backend import AlreadyExists, BackendError, ClusterBackend
from agents.core.recovery import Action, JobEvent
from federation.domain.jobs import Job, Task
from federation.domain.states import WARNING_EVENT
from federation.domain.works import Work

DESCRIPTION = "created by the federation agent for jobs of the class {name} (the federation's value)"


@dataclass(frozen=True)
class ClusterPriority:
    """The class the job's pods carry in this cluster ("" none), its value there, and a
    warning to report once (empty when the cluster honours the federation's class as is)."""

    name: str = ""
    value: int | None = None
    warning: str = ""
    failed: bool = False  # the class could not be ensured: try again later (retry_delay)
    # Tasks' own classes the cluster lacks: their pods carry the job's class instead.
    missing: frozenset[str] = field(default_factory=frozenset)


NONE = ClusterPriority()
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 300.0


def retry_delay(failures: int) -> float:
    """How long after its ``failures``-th failed attempt the class is tried again: 1 s
    doubling, at most 5 min (client-go's ItemExponentialFailureRateLimiter, bounded)."""
    return min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2.0 ** min(max(0, failures - 1), 20))


def decide(name: str, wanted: int, existing: int | None, cluster: str) -> tuple[ClusterPriority, bool]:
    """What the pods carry given the class as the cluster holds it (``existing``), and
    whether it must be created first; pure."""
    if not name:
        return NONE, False
    if existing is None:
        return ClusterPriority(name, wanted), True
    if existing == wanted:
        return ClusterPriority(name, wanted), False
    return ClusterPriority(name, existing, f"PriorityClass {name} in cluster {cluster} has value {existing}, "
                                           f"the federation's is {wanted}: the pods carry the cluster's class "
                                           f"(admission allows no other value); the federation plans with "
                                           f"{wanted}"), False


@lru_cache(maxsize=1024)
def template_class(template_json: str) -> str:
    """The class a task's pod template names itself ("" none)."""
    spec = (json.loads(template_json) if template_json else {}).get("spec") or {}
    name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) else ""


async def ensure_priority_class(backend: ClusterBackend, job: Job) -> ClusterPriority:
    """Make sure the job's class exists in the cluster, and find which of its tasks' own
    classes the cluster lacks; what its pods carry (see the module docstring)."""
    result = await _ensure_job_class(backend, job)
    own = {c for t in job.tasks if (c := template_class(t.template_json))}
    if job.workload is not None or not own:
        return result
    # The job's own class, repeated in a template, is there exactly when it was ensured.
    missing = {job.priority_class} & own if not result.name else set()
    try:
        for name in sorted(own - {job.priority_class}):
            if await backend.read_priority_class(name) is None:
                missing.add(name)
    except BackendError as exc:
        missing = own
        why = f"PriorityClasses {', '.join(sorted(own))} could not be read in cluster {backend.cluster} ({exc.reason})"
        return replace(result, missing=frozenset(missing), failed=True,
                       warning="; ".join(w for w in (result.warning, why) if w))
    if not missing:
        return result
    why = (f"PriorityClass {', '.join(sorted(missing))} named by a task's pod template does not exist in cluster "
           f"{backend.cluster}: those pods carry the job's class instead")
    return replace(result, missing=frozenset(missing), warning="; ".join(w for w in (result.warning, why) if w))


async def _ensure_job_class(backend: ClusterBackend, job: Job) -> ClusterPriority:
    name, cluster = job.priority_class, backend.cluster
    if not name:
        return NONE
    try:
        existing = await backend.read_priority_class(name)
        result, create = decide(name, job.priority, existing, cluster)
        if create:
            try:
                await backend.create_priority_class(name, job.priority, DESCRIPTION.format(name=name))
            except AlreadyExists:  # created meanwhile (another job, an admin): use it as it is
                result, _ = decide(name, job.priority, await backend.read_priority_class(name), cluster)
        return result
    except BackendError as exc:
        return ClusterPriority(warning=f"PriorityClass {name} could not be ensured in cluster {cluster} "
                                       f"({exc.reason}); the pods run without it (the cluster's default priority)",
                               failed=True)


def for_cluster(work: Work, priority: ClusterPriority) -> Work:
    """``work`` with the job's class and priority as the cluster holds them, for rendering
    its pods (a workload job is left alone: its pods come from its own template)."""
    job = work.job
    if job.workload is None and priority.missing:
        job = replace(job, tasks=tuple(_without_class(t, priority.missing) for t in job.tasks))
    if job.workload is not None or (job.priority_class, job.priority) == (priority.name, priority.value):
        return work if job is work.job else replace(work, job=job)
    if not priority.name:
        return replace(work, job=replace(job, priority_class=""))
    return replace(work, job=replace(job, priority_class=priority.name, priority=priority.value or 0))


@lru_cache(maxsize=256)
def _without_class(task: Task, missing: frozenset[str]) -> Task:
    """The task with its template's class removed when the cluster lacks it (memoised: the
    job's controller asks on every pass, and the answer changes only with the Work)."""
    if template_class(task.template_json) not in missing:
        return task
    template = json.loads(task.template_json)
    template["spec"].pop("priorityClassName", None)
    template["spec"].pop("priority", None)
    return replace(task, template_json=json.dumps(template, sort_keys=True, separators=(",", ":")))


def priority_warning(job: str, message: str, now: float) -> Action:
    """The report of a class the cluster could not honour as the federation has it: a
    ``Warning`` WorkEvent, which central records as a job Warning event."""
    return Action(WARNING_EVENT, job, JobEvent(WARNING_EVENT, "PriorityClass", message, now), cause=message)
