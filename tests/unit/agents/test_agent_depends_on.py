"""Volcano task ``dependsOn``: a task's pods are created only once its dependencies run
(all of them, or any one with ``iteration: any``); jobs that could never start are refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from agentkit import fake, gpu, step, work

from agents.core.reconcile import waiting_on_dependencies
from agents.core.records import LABEL_TASK, PodRecord
from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, Task
from federation.domain.manifests import load_jobs


def job(*tasks: Task, min_available: int | None = None) -> Job:
    return Job(name="mpi", queue="default", tasks=tasks, min_available=min_available)


def task(name: str, replicas: int = 1, *deps: str, any_: bool = False, minimum: int | None = None) -> Task:
    return Task(name, replicas, gpu(1), min_available=minimum, depends_on=deps, depends_on_any=any_)


def running(task_name: str, index: int, phase: str = "Running") -> PodRecord:
    return PodRecord(f"mpi-{task_name}-{index}", "default", labels={LABEL_TASK: task_name,
                     "federation.io/task-index": str(index)}, phase=phase, node="n00")


WAITING = [
    pytest.param((), {"master"}, id="nothing-running-master-waits"),
    pytest.param((running("worker", 0),), {"master"}, id="one-of-two-workers-is-not-enough"),
    pytest.param((running("worker", 0), running("worker", 1, "Succeeded")), set(), id="all-workers-started"),
]


@pytest.mark.parametrize(("pods", "waiting"), WAITING)
def test_a_dependent_task_waits_for_its_dependencies_minimum(pods: tuple[PodRecord, ...], waiting: set[str]) -> None:
    j = job(task("master", 1, "worker"), task("worker", 2), min_available=2)
    assert waiting_on_dependencies(j, pods) == waiting


def test_iteration_any_needs_one_dependency_and_a_task_minimum_counts() -> None:
    j = job(task("eval", 1, "ps", "worker", any_=True), task("ps", 1), task("worker", 3, minimum=2), min_available=4)
    assert waiting_on_dependencies(j, [running("worker", 0)]) == {"eval"}
    assert waiting_on_dependencies(j, [running("worker", 0), running("worker", 2)]) == set()


REFUSED = [
    pytest.param(lambda: job(task("master", 1, "nobody"), task("worker", 2)), "spec.tasks[0].dependsOn.name",
                 id="unknown-task"),
    pytest.param(lambda: job(task("master", 1, "master"), task("worker", 2)), "spec.tasks[0].dependsOn.name",
                 id="itself"),
    pytest.param(lambda: job(task("a", 1, "b"), task("b", 1, "a"), task("c", 1)), "spec.tasks[0].dependsOn",
                 id="cycle"),
    pytest.param(lambda: job(task("master", 1, "worker"), task("worker", 2)), "spec.minAvailable",
                 id="gang-needs-the-dependent-task-would-never-start"),
]


@pytest.mark.parametrize(("build", "path"), REFUSED)
def test_depends_on_that_cannot_work_is_refused(build: Callable[[], object], path: str) -> None:
    with pytest.raises(InvalidInput) as info:
        build()
    assert info.value.path == path


async def test_master_pod_is_created_and_bound_only_after_the_workers_run() -> None:
    cluster = fake()
    w = work(job(task("master", 1, "worker"), task("worker", 2), min_available=2))
    first = await step(cluster, w)
    assert first.phase in ("Bound", "Running")
    assert sorted(p.name for p in cluster.pods()) == ["mpi-worker-0", "mpi-worker-1"]
    await step(cluster, w)  # the fake runs bound pods at once: the master is released
    assert sorted(p.name for p in cluster.pods()) == ["mpi-master-0", "mpi-worker-0", "mpi-worker-1"]
    assert all(p.node is not None for p in cluster.pods())


def test_volcano_task_start_dependency_example_parses() -> None:
    text = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: lm-mpi-job}
spec:
  minAvailable: 3
  tasks:
    - {name: mpimaster, replicas: 1, dependsOn: {name: [mpiworker]},
       template: {spec: {containers: [{name: c, image: i}]}}}
    - {name: mpiworker, replicas: 10, template: {spec: {containers: [{name: c, image: i}]}}}
    - {name: eval, replicas: 1, dependsOn: {name: [mpimaster, mpiworker], iteration: any},
       template: {spec: {containers: [{name: c, image: i}]}}}
"""
    [parsed] = load_jobs(text)
    assert parsed.task("mpimaster").depends_on == ("mpiworker",)
    assert not parsed.task("mpimaster").depends_on_any
    assert parsed.task("eval").depends_on_any


@pytest.mark.parametrize(("snippet", "path"), [
    ("{iteration: some, name: [mpiworker]}", "documents[0].spec.tasks[0].dependsOn.iteration"),
    ("{name: []}", "documents[0].spec.tasks[0].dependsOn.name"),
    ("{name: [mpiworker], after: 3}", "documents[0].spec.tasks[0].dependsOn.after"),
])
def test_bad_depends_on_names_the_field(snippet: str, path: str) -> None:
    text = f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  minAvailable: 1
  tasks:
    - {{name: mpimaster, replicas: 1, dependsOn: {snippet},
       template: {{spec: {{containers: [{{name: c, image: i}}]}}}}}}
    - {{name: mpiworker, replicas: 1, template: {{spec: {{containers: [{{name: c, image: i}}]}}}}}}
"""
    with pytest.raises(InvalidInput) as info:
        load_jobs(text)
    assert info.value.path == path
