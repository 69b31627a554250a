"""The eight MPI/Horovod examples Volcano publishes (../shared/real-manifests, read by
path, never copied) are honoured: each parses, and the rendered pods carry what the
examples rely on at run time (the ssh Secret with a config naming every pod, mounted at
/root/.ssh; the worker host file their ``mpiexec --host`` reads; MPI_HOST for the mpi
plugin; the master created after the workers for task dependsOn)."""

from __future__ import annotations

import pytest

from agents.core.records import SshMount
from agents.core.render import render
from federation.domain.manifests import load_jobs
from federation.domain.plans import Placement
from federation.domain.works import Work
from tests.fixtures.corpus import CORPUS as CORPUS_ROOT
from tests.fixtures.corpus import corpus

CORPUS = CORPUS_ROOT / "volcano-jobs"
EXAMPLES = (
    "volcano-website__docs__Ecosystem__MPIOnVolcano.md__L33-84.yaml",
    "volcano__docs__user-guide__how_to_use_mpi_plugin.md__L34-75.yaml",
    "volcano__docs__user-guide__how_to_use_ssh_plugin.md__L37-88.yaml",
    "volcano__example__integrations__mpi__mpi-example.yaml",
    "volcano__example__kubecon-2019-china__gang__mpi-example.yaml",
    "volcano__example__kubecon-2019-china__horovod-sample__lm-horovod-tf-mnist-v0.5.yaml",
    "volcano__example__kubecon-2019-china__mpi-sample__mpi-example.yaml",
    "volcano__example__task-start-dependency__mpi.yaml",
)


@pytest.mark.parametrize("name", EXAMPLES)
def test_mpi_example_is_honoured(name: str) -> None:
    corpus()
    [job] = load_jobs((CORPUS / name).read_text())
    rendered = render(Work("w", job, 1, Placement(job.name, "c", "h", 1, ())))
    secret = rendered.secret
    assert secret is not None and secret.key_pair, "ssh (explicit or implied by mpi) makes the key Secret"
    for pod in rendered.pods:
        assert f"Host {pod.name}\n  HostName {pod.name}.{job.name}\n" in secret.data["config"]
        assert pod.ssh == SshMount(f"{job.name}-ssh", "/root/.ssh", 0o600)
        assert (rendered.config_map is not None and rendered.config_map.name, "/etc/volcano") in pod.config_map_mounts
    workers = [t for t in job.tasks if "worker" in t.name]
    assert workers, "every example has a worker task"
    assert rendered.config_map is not None
    host_file = rendered.config_map.data[f"{workers[0].name}.host"].splitlines()
    assert host_file == [f"{job.name}-{workers[0].name}-{i}.{job.name}" for i in range(workers[0].replicas)]
    if job.plugin("mpi") is not None:
        master = rendered.pods[0]
        assert master.env_dict()["MPI_HOST"] == ",".join(host_file)


def test_the_examples_are_eight_and_one_orders_its_tasks() -> None:
    assert len(EXAMPLES) == 8
    corpus()
    [job] = load_jobs((CORPUS / EXAMPLES[-1]).read_text())
    assert job.task("mpimaster").depends_on == ("mpiworker",)
