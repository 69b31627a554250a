"""A grown Work (same version, next generation) for a running elastic job: the agent
creates and binds only the added pods, inside the same HyperNode, and never touches the
running ones; an older generation arriving late is ignored."""

from __future__ import annotations

from dataclasses import replace

from agentkit import fake, job, observe, step, work

from agents.core.operations import BindPod, CreatePod, DeletePod
from agents.core.reconcile import reconcile
from agents.runtime_jobs import JobBook
from federation.domain.plans import PodAssignment
from federation.domain.works import Work


def elastic() -> Work:
    """4 replicas of 4 GPUs, minAvailable 2, running 2 pods on n00 (leaf t1-l0 = n00, n01)."""
    return work(job(tasks=(("worker", 4, 4),), min_available=2), pods=(("worker", 0, "n00"), ("worker", 1, "n00")))


def grown(w: Work, *pods: tuple[str, int, str]) -> Work:
    more = tuple(PodAssignment(t, i, n) for t, i, n in pods)
    return replace(w, generation=w.generation + 1, placement=replace(w.placement, pods=w.placement.pods + more))


def nodes_of(cluster: object) -> dict[str, str | None]:
    return {p.name: p.node for p in cluster.pods({"federation.io/job": "train"})}  # type: ignore[attr-defined]  # the fake cluster, typed object by its callers


async def test_an_elastic_work_runs_only_the_pods_it_lists() -> None:
    cluster = fake()
    await step(cluster, elastic())
    assert nodes_of(cluster) == {"train-worker-0": "n00", "train-worker-1": "n00"}


async def test_a_grown_work_creates_and_binds_only_the_added_pods() -> None:
    cluster = fake()
    w = elastic()
    await step(cluster, w)
    g = grown(w, ("worker", 2, "n01"), ("worker", 3, "n01"))
    result = await step(cluster, g)
    assert not any(isinstance(op, DeletePod) for op in result.ops)
    assert sorted(op.manifest.name for op in result.ops if isinstance(op, CreatePod)) == [
        "train-worker-2", "train-worker-3"]
    assert sorted((op.name, op.node) for op in result.ops if isinstance(op, BindPod)) == [
        ("train-worker-2", "n01"), ("train-worker-3", "n01")]
    assert nodes_of(cluster) == {"train-worker-0": "n00", "train-worker-1": "n00",
                                 "train-worker-2": "n01", "train-worker-3": "n01"}
    assert reconcile(g, await observe(cluster, g)).ops == ()


async def test_added_pods_that_no_longer_fit_stay_unbound_and_the_job_keeps_running() -> None:
    cluster = fake()
    w = elastic()
    await step(cluster, w)
    cluster.occupy("squatter", "n01", (await observe(cluster, w)).nodes[0].allocatable)
    result = await step(cluster, grown(w, ("worker", 2, "n01")))
    assert result.phase != "Replan" and not any(isinstance(op, BindPod) for op in result.ops)
    assert nodes_of(cluster)["train-worker-2"] is None  # created, left unbound inside its domain
    assert nodes_of(cluster)["train-worker-0"] == "n00"


def test_the_runtime_takes_a_newer_generation_and_ignores_an_older_one() -> None:
    book = JobBook()
    w = elastic()
    assert book.accept(w)
    g = grown(w, ("worker", 2, "n01"))
    assert book.accept(g)
    assert not book.accept(w)  # reordered: the pod set before the growth
    assert not book.accept(g)  # a duplicate
    assert book.slots["train"].work.generation == 1 and len(book.slots["train"].work.placement.pods) == 3
