"""What Volcano's job plugins put into a job's pods, as pure functions of the Job.

Modelled on volcano-sh/volcano ``pkg/controllers/job/plugins/…`` (env, svc, ssh,
distributed-framework/{mpi,pytorch,tensorflow}); option parsing and implied plugins are
in ``federation/domain/plugins.py``. Training images written for Volcano run unchanged:

- ``env``: ``VC_TASK_INDEX`` and ``VK_TASK_INDEX``.
- ``svc``: ``VC_<TASK>_HOSTS`` (``<job>-<task>-<i>.<job>``, comma separated) and
  ``VC_<TASK>_NUM`` for every task, unless ``--inject-hosts-env=false``; ``<task>.host``
  files in the hosts ConfigMap. Volcano reads the env from its ConfigMap; we inline the
  values, which is equivalent and keeps pods readable.
- ``ssh``: the Secret ``<job>-ssh`` (key pair + ``config``) mounted at the key path.
  The config names every pod: ``Host <job>-<task>-<i>`` / ``HostName <host>.<job>``
  after ``StrictHostKeyChecking no`` and ``UserKnownHostsFile /dev/null`` (Volcano's
  ``generateSSHConfig``).
- ``mpi``: ``MPI_HOST`` (the worker hosts) on the master's pods only, and the port
  (``--port``, 22) opened as ``mpijob-port`` on every container.
- ``pytorch``: ``MASTER_ADDR`` (first master host), ``MASTER_PORT``, ``WORLD_SIZE``
  (master + worker replicas) on every pod, ``RANK`` 0 on the master and index+1 on
  workers, the port opened as ``pytorchjob-port``; nothing when there is no master task.
- ``tensorflow``: ``TF_CONFIG`` = ``{"cluster": {role: ["<host>:<port>", …]}, "task":
  {"type": role, "index": i}}`` for the ps/worker/chief/evaluator tasks; nothing for a
  stand-alone job (one task, one replica), as in Volcano.
- ``deepspeed`` (ours, modelled on DeepSpeed's launcher): a ``hostfile`` with
  ``<host> slots=<gpus per pod>`` lines and ``DEEPSPEED_HOSTFILE`` pointing at it.

Env var names upper-case the task name and turn '-' into '_', as Volcano does.
"""

from __future__ import annotations

import json

from agents.core.records import pod_name
from federation.domain.jobs import Job
from federation.domain.plugins import HOSTS_MOUNT_PATH

SSH_MODE_ROOT, SSH_MODE_NO_ROOT = 0o600, 0o755


def env_key(task: str) -> str:
    return task.upper().replace("-", "_")


def host(job: str, task: str, index: int) -> str:
    """``<job>-<task>-<i>.<job>``: resolvable in the job's namespace through the headless Service."""
    return f"{pod_name(job, task, index)}.{job}"


def task_hosts(job: Job, task: str) -> list[str]:
    return [host(job.name, task, i) for i in range(job.task(task).replicas)]


def _has_task(job: Job, name: str) -> bool:
    return any(t.name == name for t in job.tasks)


def hosts_data(job: Job) -> dict[str, str]:
    """ConfigMap data: ``<task>.host`` files, and the DeepSpeed ``hostfile`` when enabled."""
    data: dict[str, str] = {}
    for task in job.tasks:
        data[f"{task.name.replace('-', '_')}.host"] = "\n".join(task_hosts(job, task.name))
    if job.plugin("deepspeed") is not None:
        gpu_tasks = [t for t in job.tasks if t.resources.gpus > 0]
        lines = [
            f"{h} slots={t.resources.gpus if gpu_tasks else 1}"
            for t in (gpu_tasks or list(job.tasks))
            for h in task_hosts(job, t.name)
        ]
        data["hostfile"] = "\n".join(lines) + "\n"
    return data


def needs_config_map(job: Job) -> bool:
    return job.plugin("svc") is not None or job.plugin("deepspeed") is not None


def ssh_config(job: Job) -> str:
    """The ssh client config naming every pod of the job (Volcano's generateSSHConfig)."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task, index, _ in job.pods():
        lines += [f"Host {pod_name(job.name, task, index)}", f"  HostName {host(job.name, task, index)}"]
    return "\n".join(lines) + "\n"


def ssh_secret_name(job: str) -> str:
    return f"{job}-ssh"


def ssh_mount(job: Job) -> tuple[str, str, int] | None:
    """(Secret, mount path, file mode) for the ssh plugin, None without it."""
    options = job.plugin("ssh")
    if options is None:
        return None
    mode = SSH_MODE_NO_ROOT if options.switch("no-root") else SSH_MODE_ROOT
    return ssh_secret_name(job.name), options.text("ssh-key-file-path"), mode


def _pytorch_env(job: Job, task: str, index: int) -> list[tuple[str, str]]:
    options = job.plugin("pytorch")
    if options is None:
        return []
    master, worker = options.text("master"), options.text("worker")
    if not _has_task(job, master):
        return []
    world = sum(t.replicas for t in job.tasks if t.name in (master, worker))
    env = [("MASTER_ADDR", host(job.name, master, 0)), ("MASTER_PORT", str(options.number("port"))),
           ("WORLD_SIZE", str(world))]
    if task == master:
        env.append(("RANK", "0"))
    elif task == worker:
        env.append(("RANK", str(index + 1)))
    return env


def _tf_config(job: Job, task: str, index: int) -> list[tuple[str, str]]:
    options = job.plugin("tensorflow")
    if options is None or (len(job.tasks) == 1 and job.tasks[0].replicas == 1):
        return []
    port = options.number("port")
    roles = {options.text(role): role for role in ("ps", "worker", "chief", "evaluator")}
    cluster = {roles[t.name]: [f"{h}:{port}" for h in task_hosts(job, t.name)] for t in job.tasks if t.name in roles}
    spec = {"cluster": cluster, "task": {"type": roles.get(task, task), "index": index}}
    return [("TF_CONFIG", json.dumps(spec, separators=(",", ":")))]


def pod_env(job: Job, task: str, index: int) -> tuple[tuple[str, str], ...]:
    """The plugin environment of one pod, in a stable order."""
    env: list[tuple[str, str]] = []
    if job.plugin("env") is not None:
        env += [("VC_TASK_INDEX", str(index)), ("VK_TASK_INDEX", str(index))]
    svc = job.plugin("svc")
    if svc is not None and svc.switch("inject-hosts-env"):
        for t in job.tasks:
            env += [(f"VC_{env_key(t.name)}_HOSTS", ",".join(task_hosts(job, t.name))),
                    (f"VC_{env_key(t.name)}_NUM", str(t.replicas))]
    env += _pytorch_env(job, task, index)
    mpi = job.plugin("mpi")
    if mpi is not None and task == mpi.text("master") and _has_task(job, mpi.text("worker")):
        env.append(("MPI_HOST", ",".join(task_hosts(job, mpi.text("worker")))))
    env += _tf_config(job, task, index)
    if job.plugin("deepspeed") is not None:
        env.append(("DEEPSPEED_HOSTFILE", f"{HOSTS_MOUNT_PATH}/hostfile"))
    return tuple(env)


def container_ports(job: Job) -> tuple[tuple[str, int], ...]:
    """Ports the framework plugins open on every container (Volcano's openContainerPort)."""
    ports: list[tuple[str, int]] = []
    mpi, pytorch = job.plugin("mpi"), job.plugin("pytorch")
    if mpi is not None:
        ports.append(("mpijob-port", mpi.number("port")))
    if pytorch is not None and _has_task(job, pytorch.text("master")):
        ports.append(("pytorchjob-port", pytorch.number("port")))
    return tuple(ports)


def secret_refs(job: Job) -> tuple[tuple[str, str], ...]:
    """(namespace, name) of the Secrets the job's plugins own (read by name, never listed)."""
    return ((job.namespace, ssh_secret_name(job.name)),) if job.plugin("ssh") is not None else ()
