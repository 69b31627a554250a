"""Render a Work into the Kubernetes objects the agent creates: pods, a headless
Service, and a ConfigMap of host files.

The framework environment follows Volcano's job plugins so that training images written
for Volcano run unchanged (volcano-sh/volcano pkg/controllers/job/plugins/…):

- ``env`` (plugins/env): ``VC_TASK_INDEX`` and ``VK_TASK_INDEX``.
- ``svc`` (plugins/svc): hostname/subdomain per pod; ``VC_<TASK>_HOSTS`` (comma separated
  ``<job>-<task>-<i>.<job>``) and ``VC_<TASK>_NUM`` for every task; ``<task>.host`` files
  (one host per line) in the ConfigMap mounted at ``/etc/volcano``. Volcano reads the env
  from the ConfigMap; we inline the values, which is equivalent and keeps pods readable.
- ``pytorch`` (plugins/distributed-framework/pytorch): ``MASTER_ADDR`` (first master
  host), ``MASTER_PORT`` (``--port=``, default 23456) and ``WORLD_SIZE`` (master + worker
  replicas) on every pod; ``RANK`` 0 on the master, index+1 on workers. Task names come
  from ``--master=``/``--worker=`` (default master/worker).
- ``mpi`` (plugins/distributed-framework/mpi): ``MPI_HOST`` (worker hosts) on every pod.
- ``deepspeed`` (ours, modelled on DeepSpeed's launcher): a ``hostfile`` key with
  ``<host> slots=<gpus per pod>`` lines, ``DEEPSPEED_HOSTFILE`` pointing at it.

Env var names upper-case the task name and turn '-' into '_' (as Volcano does). Pods are
rendered without a node: binding is a separate, all-or-nothing step (agents/core/binding.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from agents.core.records import (
    ANNOTATION_SPEC_HASH,
    ANNOTATION_WORK_ID,
    LABEL_JOB,
    LABEL_TASK,
    LABEL_TASK_INDEX,
    LABEL_WORK_VERSION,
    SCHEDULER_NAME,
    ConfigMapManifest,
    PodManifest,
    ServiceManifest,
    pod_name,
)
from federation.domain.jobs import Job
from federation.domain.works import Work

HOSTS_MOUNT_PATH = "/etc/volcano"
PYTORCH_DEFAULT_PORT = 23456


@dataclass(frozen=True)
class Rendered:
    """Everything one Work needs in the cluster."""

    service: ServiceManifest
    config_map: ConfigMapManifest | None
    pods: tuple[PodManifest, ...]

    def pod(self, name: str) -> PodManifest | None:
        for p in self.pods:
            if p.name == name:
                return p
        return None


def env_key(task: str) -> str:
    return task.upper().replace("-", "_")


def plugin_args(job: Job, plugin: str) -> tuple[str, ...] | None:
    """The plugin's arguments, or None when the job does not enable it."""
    for name, args in job.plugins:
        if name == plugin:
            return args
    return None


def flag(args: tuple[str, ...], name: str, default: str) -> str:
    """``--name=value`` from a Volcano-style plugin argument list (last one wins)."""
    value = default
    for arg in args:
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
    return value


def host(job: str, task: str, index: int) -> str:
    """``<job>-<task>-<i>.<job>``: resolvable in the job's namespace through the headless Service."""
    return f"{pod_name(job, task, index)}.{job}"


def task_hosts(job: Job, task: str) -> list[str]:
    return [host(job.name, task, i) for i in range(job.task(task).replicas)]


def spec_hash(*parts: object) -> str:
    """A stable digest of an object's desired content, compared instead of the object
    itself so the Kubernetes adapter only has to round-trip one annotation."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _has_task(job: Job, name: str) -> bool:
    return any(t.name == name for t in job.tasks)


def hosts_data(job: Job) -> dict[str, str]:
    """ConfigMap data: ``<task>.host`` files, and the DeepSpeed ``hostfile`` when enabled."""
    data: dict[str, str] = {}
    for task in job.tasks:
        data[f"{task.name.replace('-', '_')}.host"] = "\n".join(task_hosts(job, task.name))
    if plugin_args(job, "deepspeed") is not None:
        gpu_tasks = [t for t in job.tasks if t.resources.gpus > 0]
        lines = [
            f"{h} slots={t.resources.gpus if gpu_tasks else 1}"
            for t in (gpu_tasks or list(job.tasks))
            for h in task_hosts(job, t.name)
        ]
        data["hostfile"] = "\n".join(lines) + "\n"
    return data


def pod_env(job: Job, task: str, index: int) -> tuple[tuple[str, str], ...]:
    """The plugin environment of one pod, in a stable order."""
    env: list[tuple[str, str]] = []
    if plugin_args(job, "env") is not None:
        env += [("VC_TASK_INDEX", str(index)), ("VK_TASK_INDEX", str(index))]
    if plugin_args(job, "svc") is not None:
        for t in job.tasks:
            env += [(f"VC_{env_key(t.name)}_HOSTS", ",".join(task_hosts(job, t.name))),
                    (f"VC_{env_key(t.name)}_NUM", str(t.replicas))]
    args = plugin_args(job, "pytorch")
    if args is not None:
        master, worker = flag(args, "master", "master"), flag(args, "worker", "worker")
        if _has_task(job, master):
            world = sum(t.replicas for t in job.tasks if t.name in (master, worker))
            env += [("MASTER_ADDR", host(job.name, master, 0)),
                    ("MASTER_PORT", flag(args, "port", str(PYTORCH_DEFAULT_PORT))),
                    ("WORLD_SIZE", str(world))]
            if task == master:
                env.append(("RANK", "0"))
            elif task == worker:
                env.append(("RANK", str(index + 1)))
    args = plugin_args(job, "mpi")
    if args is not None:
        worker = flag(args, "worker", "worker")
        if _has_task(job, worker):
            env.append(("MPI_HOST", ",".join(task_hosts(job, worker))))
    if plugin_args(job, "deepspeed") is not None:
        env.append(("DEEPSPEED_HOSTFILE", f"{HOSTS_MOUNT_PATH}/hostfile"))
    return tuple(env)


def _needs_config_map(job: Job) -> bool:
    return any(plugin_args(job, p) is not None for p in ("svc", "deepspeed", "mpi"))


def config_map_name(job: str) -> str:
    return f"{job}-hosts"


def render(work: Work) -> Rendered:
    """Pods for every task replica, the headless Service ``<job>`` and (for svc, mpi and
    deepspeed) the ConfigMap ``<job>-hosts``. Deterministic: rendering twice gives equal
    objects, which is what lets reconcile compare desired and observed state."""
    job = work.job
    job_labels = {LABEL_JOB: job.name}
    selector = dict(job_labels)
    service = ServiceManifest(
        name=job.name, namespace=job.namespace, labels=job_labels,
        annotations={ANNOTATION_SPEC_HASH: spec_hash("service", sorted(selector.items()))},
        selector=selector,
    )
    config_map = None
    mounts: tuple[tuple[str, str], ...] = ()
    if _needs_config_map(job):
        data = hosts_data(job)
        config_map = ConfigMapManifest(
            name=config_map_name(job.name), namespace=job.namespace, labels=job_labels,
            annotations={ANNOTATION_SPEC_HASH: spec_hash("config-map", sorted(data.items()))},
            data=data,
        )
        mounts = ((config_map.name, HOSTS_MOUNT_PATH),)
    pods = tuple(
        _pod(work, task, index, mounts) for task, index, _ in job.pods()
    )
    return Rendered(service, config_map, pods)


def _pod(work: Work, task: str, index: int, mounts: tuple[tuple[str, str], ...]) -> PodManifest:
    job = work.job
    user_labels: Mapping[str, str] = dict(job.labels)
    labels = {
        **user_labels,
        LABEL_JOB: job.name,
        LABEL_TASK: task,
        LABEL_TASK_INDEX: str(index),
        LABEL_WORK_VERSION: str(work.version),
    }
    spec = job.task(task)
    return PodManifest(
        name=pod_name(job.name, task, index),
        namespace=job.namespace,
        labels=labels,
        annotations={ANNOTATION_WORK_ID: work.work_id},
        scheduler_name=SCHEDULER_NAME,
        requests=spec.resources,
        env=pod_env(job, task, index),
        hostname=pod_name(job.name, task, index),
        subdomain=job.name,
        tolerations=job.tolerations,
        config_map_mounts=mounts,
        template_json=spec.template_json,
    )
