"""Rendering a Work: pods, headless Service, hosts ConfigMap and the plugin environment."""

from __future__ import annotations

import pytest
from agentkit import job, work

from agents.core.records import (
    ANNOTATION_WORK_ID,
    LABEL_JOB,
    LABEL_TASK,
    LABEL_TASK_INDEX,
    LABEL_WORK_VERSION,
    SCHEDULER_NAME,
    PodManifest,
)
from agents.core.render import render
from federation.domain.jobs import Job


def env(j: Job, pod: str) -> dict[str, str]:
    manifest = render(work(j)).pod(pod)
    assert manifest is not None
    return manifest.env_dict()


def test_one_unbound_pod_per_replica_with_our_labels_and_scheduler() -> None:
    rendered = render(work(job(tasks=(("master", 1, 0), ("worker", 2, 8))), version=7))
    assert [p.name for p in rendered.pods] == ["train-master-0", "train-worker-0", "train-worker-1"]
    pod = rendered.pods[2]
    assert pod.labels == {LABEL_JOB: "train", LABEL_TASK: "worker", LABEL_TASK_INDEX: "1", LABEL_WORK_VERSION: "7"}
    assert pod.annotations == {ANNOTATION_WORK_ID: "w-train"}
    assert pod.scheduler_name == SCHEDULER_NAME
    assert not hasattr(pod, "node_name")  # binding happens through the Binding subresource
    assert (pod.hostname, pod.subdomain) == ("train-worker-1", "train")
    assert pod.requests.gpus == 8


def test_headless_service_selects_the_job() -> None:
    service = render(work(job())).service
    assert (service.name, service.namespace) == ("train", "default")
    assert service.selector == {LABEL_JOB: "train"}


def test_rendering_is_deterministic() -> None:
    j = job(plugins=(("svc", ()), ("pytorch", ())))
    assert render(work(j)) == render(work(j))


def test_no_plugins_means_no_env_and_no_config_map() -> None:
    rendered = render(work(job()))
    assert rendered.config_map is None
    assert all(p.env == () and p.config_map_mounts == () for p in rendered.pods)


def svc(name: str = "train", **tasks: int) -> dict[str, str]:
    """The svc plugin's env for ``tasks`` (task name -> replicas); implied by pytorch and mpi."""
    out = {}
    for task, replicas in tasks.items():
        key = task.upper().replace("-", "_")
        out[f"VC_{key}_HOSTS"] = ",".join(f"{name}-{task}-{i}.{name}" for i in range(replicas))
        out[f"VC_{key}_NUM"] = str(replicas)
    return out


ENV_CASES = [
    pytest.param(job(tasks=(("worker", 3, 8),), plugins=(("env", ()),)), "train-worker-2",
                 {"VC_TASK_INDEX": "2", "VK_TASK_INDEX": "2"}, id="env-plugin-task-index"),
    pytest.param(job(tasks=(("ps", 1, 0), ("data-loader", 2, 0)), plugins=(("svc", ()),)), "train-ps-0",
                 {"VC_PS_HOSTS": "train-ps-0.train", "VC_PS_NUM": "1",
                  "VC_DATA_LOADER_HOSTS": "train-data-loader-0.train,train-data-loader-1.train",
                  "VC_DATA_LOADER_NUM": "2"}, id="svc-plugin-hosts-for-every-task-dash-to-underscore"),
    pytest.param(job(tasks=(("worker", 2, 0),), plugins=(("svc", ("--inject-hosts-env=false",)),)),
                 "train-worker-0", {}, id="svc-inject-hosts-env-false-leaves-the-env-out"),
    pytest.param(job(tasks=(("master", 1, 8), ("worker", 3, 8)), plugins=(("pytorch", ()),)), "train-master-0",
                 {"MASTER_ADDR": "train-master-0.train", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": "0",
                  **svc(master=1, worker=3)}, id="pytorch-master-is-rank-0-and-svc-is-implied"),
    pytest.param(job(tasks=(("master", 1, 8), ("worker", 3, 8)), plugins=(("pytorch", ()),)), "train-worker-2",
                 {"MASTER_ADDR": "train-master-0.train", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": "3",
                  **svc(master=1, worker=3)}, id="pytorch-worker-rank-is-index-plus-one"),
    pytest.param(job(tasks=(("chief", 1, 8), ("trainer", 2, 8), ("eval", 1, 0)),
                     plugins=(("pytorch", ("--master=chief", "--worker=trainer", "--port=29500")),)), "train-eval-0",
                 {"MASTER_ADDR": "train-chief-0.train", "MASTER_PORT": "29500", "WORLD_SIZE": "3",
                  **svc(chief=1, trainer=2, eval=1)}, id="pytorch-custom-names-and-port-other-tasks-get-no-rank"),
    pytest.param(job(tasks=(("worker", 2, 8),), plugins=(("pytorch", ()),)), "train-worker-0", svc(worker=2),
                 id="pytorch-without-master-task-injects-only-the-implied-svc-hosts"),
    pytest.param(job(tasks=(("master", 1, 0), ("worker", 2, 8)), plugins=(("mpi", ()),)), "train-master-0",
                 {"MPI_HOST": "train-worker-0.train,train-worker-1.train", **svc(master=1, worker=2)},
                 id="mpi-host-lists-the-workers-on-the-master"),
    pytest.param(job(tasks=(("master", 1, 0), ("worker", 2, 8)), plugins=(("mpi", ()),)), "train-worker-1",
                 svc(master=1, worker=2), id="mpi-workers-get-no-mpi-host-as-in-volcano"),
    pytest.param(job(tasks=(("launcher", 1, 0), ("mpiworker", 2, 8)),
                     plugins=(("mpi", ("--master=launcher", "--worker=mpiworker")),)), "train-launcher-0",
                 {"MPI_HOST": "train-mpiworker-0.train,train-mpiworker-1.train", **svc(launcher=1, mpiworker=2)},
                 id="mpi-master-and-worker-options"),
    pytest.param(job(plugins=(("deepspeed", ()),)), "train-worker-0",
                 {"DEEPSPEED_HOSTFILE": "/etc/volcano/hostfile"}, id="deepspeed-points-at-the-hostfile"),
]


@pytest.mark.parametrize(("j", "pod", "expected"), ENV_CASES)
def test_plugin_environment(j: Job, pod: str, expected: dict[str, str]) -> None:
    assert env(j, pod) == expected


def test_svc_config_map_holds_one_host_file_per_task_and_is_mounted() -> None:
    rendered = render(work(job(tasks=(("ps", 1, 0), ("data-loader", 2, 0)), plugins=(("svc", ()),))))
    cm = rendered.config_map
    assert cm is not None and cm.name == "train-hosts"
    assert cm.data == {"ps.host": "train-ps-0.train",
                       "data_loader.host": "train-data-loader-0.train\ntrain-data-loader-1.train"}
    assert all(p.config_map_mounts == (("train-hosts", "/etc/volcano"),) for p in rendered.pods)


def test_deepspeed_hostfile_lists_gpu_pods_with_their_slots() -> None:
    j = job(tasks=(("launcher", 1, 0), ("worker", 2, 4)), plugins=(("deepspeed", ()),))
    cm = render(work(j)).config_map
    assert cm is not None
    assert cm.data["hostfile"] == "train-worker-0.train slots=4\ntrain-worker-1.train slots=4\n"


def test_deepspeed_hostfile_without_gpus_gives_one_slot_per_pod() -> None:
    cm = render(work(job(tasks=(("worker", 2, 0),), plugins=(("deepspeed", ()),)))).config_map
    assert cm is not None and cm.data["hostfile"] == "train-worker-0.train slots=1\ntrain-worker-1.train slots=1\n"


def test_config_map_hash_changes_with_its_content() -> None:
    a = render(work(job(tasks=(("worker", 2, 8),), plugins=(("svc", ()),)))).config_map
    b = render(work(job(tasks=(("worker", 3, 8),), plugins=(("svc", ()),)))).config_map
    assert a is not None and b is not None
    assert a.annotations != b.annotations


def test_manifest_is_hashable_for_sets() -> None:
    pods: set[PodManifest] = set(render(work(job())).pods)
    assert len(pods) == 2
