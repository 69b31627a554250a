"""Where a job's pods may go and what they may be: the queue's namespaces and Pod Security level.

Checked at submission, after the caller was found to own the queue and before anything
is stored, so a refused pod never reaches the planner, the store or any member cluster
(docs/design/limits.md, "Safe pods"). The rules themselves are pure domain functions
(``Queue.allowed_namespaces``, ``pod_security.check_pod_security``); this module only
applies them to one submission with the request's field paths.

Why at the federation and not only in the member cluster: the agent creates pods with
its own service account, so a cluster's admission can at best refuse them after the job
was placed, leaving the job stuck; and a member cluster may not enforce Pod Security
Admission at all.
"""

from __future__ import annotations

import dataclasses

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job
from federation.domain.manifests_fields import QUEUE_DEFAULT_NAMESPACE
from federation.domain.names import is_system_namespace
from federation.domain.pod_security import check_pod_security, parse_template
from federation.domain.queues import Queue
from federation.v1 import types_pb2
from federation.wire.limits import Limits

# Kubernetes reserves this prefix for the classes of pods that keep a node or a cluster
# running (system-node-critical, system-cluster-critical): such pods preempt every other
# pod and are the last a kubelet evicts.
SYSTEM_PRIORITY_PREFIX = "system-"

# Templates up to this size are checked on the event loop (tens of microseconds); a job
# with more template text is checked in a worker thread.
INLINE_TEMPLATE_BYTES = 16 * 1024


def template_bytes(spec: types_pb2.JobSpec) -> int:
    return sum(len(t.template_json) for t in spec.tasks) + len(spec.workload.body_json)


def admit(job: Job, spec: types_pb2.JobSpec, queue: Queue, limits: Limits, path: str = "spec") -> Job:
    """The job with its namespace resolved, if ``queue`` lets its pods run; else ``InvalidInput``.

    A job that names no namespace (``QUEUE_DEFAULT_NAMESPACE``: a manifest without
    ``metadata.namespace``, from ``submit``, ``apply``, a JobFlow or a workload) takes the
    queue's default namespace here, the one place that knows the queue. ``spec`` is the
    wire message the job came from (its templates are checked as the tenant wrote them);
    a workload's pod template is checked in its body, where its controller reads it.
    """
    namespace = queue.default_namespace if job.namespace == QUEUE_DEFAULT_NAMESPACE else job.namespace
    if namespace not in queue.allowed_namespaces:
        allowed = ", ".join(queue.allowed_namespaces)
        why = " (a Kubernetes system namespace)" if is_system_namespace(namespace) else ""
        raise InvalidInput(f"{path}.namespace", f"{namespace}{why} is not a namespace of queue {queue.name} "
                                                f"(allowed: {allowed})")
    _check_priority_class(job.priority_class, queue, f"{path}.priorityClass")
    for i, task in enumerate(spec.tasks):
        if not task.template_json:
            continue
        tpath = f"{path}.tasks[{i}].template"
        template = parse_template(task.template_json, tpath, limits.max_template_depth)
        check_pod_security(template, queue.pod_security, tpath)
        _check_priority_class(_template_class(template), queue, f"{tpath}.spec.priorityClassName")
    if job.workload is not None and job.workload.template_json:  # the pods its controller creates
        wpath = f"{path}.workload.bodyJson.spec.template"
        template = parse_template(job.workload.template_json, wpath, limits.max_template_depth)
        check_pod_security(template, queue.pod_security, wpath)
        _check_priority_class(_template_class(template), queue, f"{wpath}.spec.priorityClassName")
    return job if job.namespace == namespace else dataclasses.replace(job, namespace=namespace)


def _template_class(template: dict[str, object]) -> str:
    spec = template.get("spec")
    name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) else ""


def _check_priority_class(name: str, queue: Queue, path: str) -> None:
    """A system priority class is for the same queues as system namespaces: an admin's
    explicit choice. A tenant's training pods with it would preempt, and outlive, the
    member clusters' own daemons."""
    if name.startswith(SYSTEM_PRIORITY_PREFIX) and not queue.allow_system_namespaces:
        raise InvalidInput(path, f"{name} is a system priority class (the {SYSTEM_PRIORITY_PREFIX} prefix is "
                                 f"Kubernetes'); queue {queue.name} may not use it (only a queue an admin lets "
                                 "use system namespaces may)")
