"""Clusters and works against SQLite and real PostgreSQL: epoch fencing, snapshots, failover."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from federation.domain import (
    ClusterSnapshot,
    HyperNodeMember,
    HyperNodeSpec,
    Job,
    MemberSelector,
    Node,
    Queue,
    Resources,
    Taint,
    Task,
)
from federation.domain.plans import PodAssignment
from federation.domain.states import WorkState
from federation.store import Conflict, NotFound, StaleEpoch, Store


def snapshot(name: str = "east", free_gpus: int = 8) -> ClusterSnapshot:
    nodes = tuple(
        Node(f"n{i}", Resources.of(gpu=8, cpu=64_000), Resources.of(gpu=free_gpus, cpu=64_000),
             labels={"rack": f"r{i // 2}"}, ready=i != 3)
        for i in range(4)
    )
    leaves = tuple(
        HyperNodeSpec(f"leaf-{r}", 1, (HyperNodeMember("Node", MemberSelector(labels={"rack": f"r{r}"})),))
        for r in range(2)
    )
    spine = HyperNodeSpec("spine", 2, tuple(HyperNodeMember("HyperNode", MemberSelector(exact_name=f"leaf-{r}"))
                                            for r in range(2)), tier_name="spine")
    return ClusterSnapshot(name, nodes, (*leaves, spine), labels={"region": "eu"},
                           taints=(Taint("maintenance", "soon", "PreferNoSchedule"),), taken_at=12.5)


def make_job(name: str) -> Job:
    return Job(name=name, queue="research", tasks=(Task("worker", 2, Resources.of(gpu=4)),))


def test_register_then_heartbeat(store: Store) -> None:
    reg = store.clusters.register("east", 1, agent_id="agent-a", labels={"region": "eu"},
                                  taints=(Taint("gpu", "", "NoSchedule"),))
    assert reg.accepted and reg.previous_epoch is None
    assert (reg.cluster.epoch, reg.cluster.health, reg.cluster.taints[0].key) == (1, "healthy", "gpu")
    before = reg.cluster.last_heartbeat
    heard = store.clusters.heartbeat("east", 1)
    assert heard > before and store.clusters.get("east").last_heartbeat == heard


def test_a_lower_epoch_is_fenced_and_a_higher_one_replaces(store: Store) -> None:
    store.clusters.register("east", 5, agent_id="old-leader")
    stale = store.clusters.register("east", 4, agent_id="older")
    assert not stale.accepted
    assert stale.cluster.agent_id == "old-leader"
    newer = store.clusters.register("east", 6, agent_id="new-leader")
    assert newer.accepted and newer.previous_epoch == 5
    with pytest.raises(StaleEpoch) as info:
        store.clusters.heartbeat("east", 5)
    assert (info.value.epoch, info.value.current) == (5, 6)
    with pytest.raises(StaleEpoch):
        store.clusters.record_snapshot(5, snapshot())
    with pytest.raises(Conflict, match="never registered"):
        store.clusters.heartbeat("east", 7)
    assert store.clusters.register("east", 6, agent_id="new-leader").accepted  # reconnect, same epoch


def test_unknown_cluster_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.clusters.heartbeat("ghost", 1)
    with pytest.raises(NotFound):
        store.clusters.get("ghost")


def test_snapshot_is_kept_whole_with_a_summary(store: Store) -> None:
    store.clusters.register("east", 1)
    snap = snapshot()
    record = store.clusters.record_snapshot(1, snap)
    summary = record.summary
    assert summary is not None
    assert (summary.nodes, summary.ready_nodes, summary.hypernodes, summary.max_tier) == (4, 3, 3, 2)
    assert summary.allocatable.gpus == 32
    assert summary.free.gpus == 24  # free counts usable nodes only
    assert record.labels == {"region": "eu"}
    [stored] = store.clusters.snapshots()
    assert stored == snap
    assert stored.tree.domains.keys() == snap.tree.domains.keys()


def test_a_refused_tree_keeps_the_previous_snapshot(store: Store) -> None:
    store.clusters.register("east", 1)
    store.clusters.record_snapshot(1, snapshot(free_gpus=8))
    record = store.clusters.record_tree_error("east", 1, "hyperNodes[2].spec.tier: must be higher than members")
    assert record.tree_error and record.tree_error.startswith("hyperNodes[2]")
    assert store.clusters.snapshots()[0].free.gpus == 24
    assert store.clusters.record_snapshot(1, snapshot(free_gpus=4)).tree_error is None


def test_silent_clusters_are_found_and_lost_ones_requeue_their_jobs(store: Store, clock: Any) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.clusters.register("west", 1)
    for name in ("placed-job", "running-job", "pending-job", "west-job"):
        store.jobs.submit(make_job(name))
    store.jobs.transition("placed-job", "placed", cluster="east", hypernode="leaf-0", tier=1)
    store.jobs.transition("running-job", "placed", cluster="east", hypernode="leaf-1", tier=1)
    store.jobs.transition("running-job", "dispatched")
    store.jobs.transition("running-job", "running")
    store.jobs.transition("west-job", "placed", cluster="west")
    work = store.works.create("running-job", "east", {"pods": 2})
    store.works.update_status(work.id, WorkState.BOUND, epoch=1)
    assert store.clusters.get("east").active_jobs == 2

    clock.advance(60)
    store.clusters.heartbeat("west", 1)
    assert store.clusters.silent_since(clock.now - timedelta(seconds=30)) == ["east"]

    loss = store.clusters.mark_lost("east")
    assert loss.cluster.health == "lost"
    assert loss.requeued == ("placed-job", "running-job")
    assert loss.withdrawn_works == (work.id,)
    for name in loss.requeued:
        job = store.jobs.get(name)
        assert (job.state, job.cluster, job.reason) == ("pending", None, "cluster east lost")
    assert store.jobs.get("west-job").state == "placed"
    assert store.works.get(work.id).state == "withdrawn"
    assert [c.name for c in store.clusters.list() if c.lost] == ["east"]
    assert [s.name for s in store.clusters.snapshots()] == []  # lost clusters are not planned on

    with pytest.raises(StaleEpoch):  # the returning agent must register again first
        store.clusters.heartbeat("east", 1)
    back = store.clusters.register("east", 2)
    assert back.accepted and back.cluster.health == "healthy"
    assert store.works.active("east") == []  # nothing stale is handed back


def test_mark_lost_rechecks_the_last_heartbeat_in_its_own_transaction(store: Store, clock: Any) -> None:
    """The watchdog decides from memory; a heartbeat (or re-hello) recorded since must spare
    the cluster, and the re-check belongs in the transaction that would mark it."""
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.jobs.submit(make_job("llm"))
    store.jobs.transition("llm", "placed", cluster="east")
    clock.advance(20)
    store.clusters.heartbeat("east", 1)
    clock.advance(5)
    spared = store.clusters.mark_lost("east", "silent", unless_heard_within=10)
    assert not spared.marked and (spared.requeued, spared.withdrawn_works) == ((), ())
    assert not store.clusters.get("east").lost and store.jobs.get("llm").state == "placed"
    clock.advance(6)
    loss = store.clusters.mark_lost("east", "silent", unless_heard_within=10)
    assert loss.marked and loss.requeued == ("llm",) and store.clusters.get("east").lost


def test_works_get_increasing_versions_and_supersede(store: Store) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.clusters.register("west", 1)
    store.jobs.submit(make_job("llm"))
    first = store.works.create("llm", "east", {"replicas": 2})
    second = store.works.create("llm", "west", {"replicas": 2})
    assert (first.version, second.version) == (1, 2)
    assert store.works.get(first.id).state == "withdrawn"
    assert [w.id for w in store.works.active("west")] == [second.id]
    assert store.works.latest("llm") == second
    assert second.payload == {"replicas": 2}
    with pytest.raises(NotFound):
        store.works.create("llm", "ghost", {})
    with pytest.raises(NotFound):
        store.works.create("ghost", "east", {})


def test_work_status_follows_its_table_and_is_fenced_by_epoch(store: Store) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.jobs.submit(make_job("llm"))
    work = store.works.create("llm", "east", {})
    assert store.works.update_status(work.id, "applied", epoch=1).state == "applied"
    assert store.works.update_status(work.id, "applied", epoch=1).state == "applied"  # repeated ack
    store.clusters.register("east", 2)
    with pytest.raises(StaleEpoch):
        store.works.update_status(work.id, WorkState.BOUND, epoch=1)
    store.works.update_status(work.id, "succeeded", epoch=2, message="done")
    with pytest.raises(Conflict, match="succeeded; cannot become bound"):
        store.works.update_status(work.id, WorkState.BOUND)
    assert [w.state for w in store.works.list(job="llm")] == ["succeeded"]
    with pytest.raises(NotFound):
        store.works.update_status(999, WorkState.BOUND)


def test_actual_pods_replace_the_planned_ones_in_one_fenced_write_without_a_new_version(store: Store) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.jobs.submit(make_job("llm"))
    planned = {"cluster": "east", "hypernode": "leaf-0", "tier": 1, "pods": [["worker", 0, "n0"], ["worker", 1, "n1"]]}
    work = store.works.create("llm", "east", planned)
    moved = (PodAssignment("worker", 0, "n0"), PodAssignment("worker", 1, "n2"))
    after = store.works.record_pods(work.id, moved, epoch=1)
    assert after.payload == {**planned, "pods": [["worker", 0, "n0"], ["worker", 1, "n2"]]}
    assert (after.version, after.state) == (work.version, work.state) and after.updated_at > work.updated_at
    assert store.works.get(work.id).payload == after.payload
    store.clusters.register("east", 2)
    with pytest.raises(StaleEpoch):
        store.works.record_pods(work.id, moved[:1], epoch=1)
    store.works.update_status(work.id, "succeeded", epoch=2)
    with pytest.raises(Conflict, match="succeeded"):
        store.works.record_pods(work.id, moved[:1], epoch=2)
    assert store.works.get(work.id).payload == after.payload
    with pytest.raises(NotFound):
        store.works.record_pods(999, moved)


def test_cancel_withdraws_the_jobs_active_work(store: Store) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.jobs.submit(make_job("llm"))
    store.jobs.transition("llm", "placed", cluster="east")
    work = store.works.create("llm", "east", {})
    store.jobs.cancel("llm", "user asked")
    assert store.works.get(work.id).state == "withdrawn"
    assert store.works.get(work.id).message == "user asked"


def test_a_tenants_view_of_a_cluster_counts_only_its_own_queues_jobs(store: Store) -> None:
    """Issue 10: ``active_jobs`` counted every tenant's jobs; a tenant's view
    (``queues=`` the queues it may use) counts its own alone."""
    store.queues.create(Queue("research"))
    store.queues.create(Queue("vision"))
    store.clusters.register("east", 1)
    store.jobs.submit(make_job("mine"))
    store.jobs.submit(Job(name="theirs", queue="vision", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
    for name in ("mine", "theirs"):
        store.jobs.transition(name, "placed", cluster="east")
    assert store.clusters.get("east").active_jobs == 2
    assert store.clusters.get("east", queues=["vision"]).active_jobs == 1
    assert [c.active_jobs for c in store.clusters.list(queues=["vision"])] == [1]
    assert [c.active_jobs for c in store.clusters.list(queues=[])] == [0]
    assert [c.active_jobs for c in store.clusters.list()] == [2]
