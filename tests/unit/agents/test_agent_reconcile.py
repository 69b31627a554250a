"""The reconcile loop against the fake cluster: convergence, idempotence, all-or-nothing
binding, restart midway, version changes, cancel, and recovery end to end."""

from __future__ import annotations

from agentkit import LABEL_KEYS, fake, gpu, job, observe, step, work

from agents.core.apply import apply_ops, observe_job
from agents.core.events import observe as observe_state
from agents.core.events import pod_events
from agents.core.operations import BindPod, CreateConfigMap, CreateNetworkPolicy, CreatePod, CreateService, DeletePod
from agents.core.reconcile import Observed, ops_for_actions, reconcile
from agents.core.recovery import JobRuntimeState, Room, decide, record
from agents.fake.cluster import FakeCluster
from federation.domain.jobs import LifecyclePolicy

SVC = (("svc", ()),)


def bound(cluster: FakeCluster, version: int | None = None) -> dict[str, str]:
    return {p.name: p.node for p in cluster.pods({"federation.io/job": "train"})
            if p.node is not None and (version is None or p.version == version)}


async def test_fresh_work_creates_everything_then_binds_the_whole_gang() -> None:
    w = work(job(tasks=(("worker", 2, 8),), plugins=SVC), pods=(("worker", 0, "n00"), ("worker", 1, "n01")))
    result = reconcile(w, await observe(fake(), w))
    kinds = [type(op) for op in result.ops]
    assert kinds == [CreateService, CreateConfigMap, CreateNetworkPolicy, CreatePod, CreatePod, BindPod, BindPod]
    assert [op.node for op in result.ops if isinstance(op, BindPod)] == ["n00", "n01"]
    assert result.phase == "Bound"


async def test_applying_then_reconciling_again_yields_no_ops() -> None:
    cluster = fake()
    w = work(job(plugins=SVC))
    await step(cluster, w)
    again = reconcile(w, await observe(cluster, w))
    assert again.ops == ()
    assert again.phase == "Running"
    assert set(bound(cluster).values()) <= {"n00", "n01"}  # inside t1-l0


async def test_binding_never_leaves_the_chosen_hypernode() -> None:
    cluster = fake()
    cluster.set_node_ready("n00", False)
    w = work(job(tasks=(("worker", 2, 8),)), "t2-s0", pods=(("worker", 0, "n00"), ("worker", 1, "n01")))
    await step(cluster, w)
    placed = bound(cluster)
    assert placed["train-worker-1"] == "n01" and placed["train-worker-0"] in {"n02", "n03"}


async def test_gang_that_does_not_fit_its_domain_binds_nothing_and_reports_replan() -> None:
    cluster = fake()
    cluster.occupy("squatter", "n01", gpu(4))
    w = work(job(tasks=(("worker", 2, 8),)))
    result = await step(cluster, w)
    assert result.phase == "Replan" and "needs 2 pods inside t1-l0 but only 1 fit" in result.message
    assert not any(isinstance(op, BindPod) for op in result.ops)
    assert bound(cluster) == {}
    assert reconcile(w, await observe(cluster, w)).ops == ()


async def test_restart_midway_at_every_cut_completes_without_duplicates() -> None:
    """Agent killed after applying k of the ops, for every k: the next pass completes the
    gang with no duplicate pod and no second binding."""
    w = work(job(tasks=(("master", 1, 0), ("worker", 3, 8)), plugins=SVC), "t2-s0")
    ops = reconcile(w, await observe(fake(), w)).ops
    for cut in range(len(ops) + 1):
        cluster = fake()
        assert (await apply_ops(cluster, ops[:cut])).ok
        await step(cluster, w)
        assert reconcile(w, await observe(cluster, w)).ops == (), f"cut {cut}"
        assert len(cluster.pods()) == 4 and len(bound(cluster)) == 4
        assert cluster.bind_count == 4
        assert [c for c in cluster.calls if c[0] == "create_pod"] == [("create_pod", m.manifest.name)
                                                                     for m in ops if isinstance(m, CreatePod)]


async def test_half_bound_gang_that_cannot_be_completed_is_unbound_not_left_half_bound() -> None:
    cluster = fake()
    w = work(job(tasks=(("worker", 2, 8),)))
    ops = reconcile(w, await observe(cluster, w)).ops
    await apply_ops(cluster, ops[:-1])  # killed before the last bind
    assert len(bound(cluster)) == 1
    free_node = ({"n00", "n01"} - set(bound(cluster).values())).pop()
    cluster.occupy("thief", free_node, gpu(8))  # someone took the room meanwhile
    rollback = await step(cluster, w)
    assert rollback.phase == "Replan"
    assert [type(op) for op in rollback.ops] == [DeletePod]
    assert bound(cluster) == {}
    recreate = await step(cluster, w)  # recreated unbound, still nothing bound
    assert [type(op) for op in recreate.ops] == [CreatePod] and bound(cluster) == {}
    assert reconcile(w, await observe(cluster, w)).ops == ()
    await cluster.delete_pod("other", "thief")
    await step(cluster, w)
    assert len(bound(cluster)) == 2


async def test_version_change_replaces_old_pods_then_binds_new_ones() -> None:
    cluster = fake()
    j = job(tasks=(("worker", 2, 8),))
    await step(cluster, work(j, version=1))
    w2 = work(j, "t1-l1", version=2)
    first = await step(cluster, w2)
    assert [type(op) for op in first.ops] == [DeletePod, DeletePod]
    assert first.phase == "Pending" and "waiting for 2 pods to terminate" in first.message
    await step(cluster, w2)
    assert set(bound(cluster, version=2).values()) == {"n02", "n03"}
    assert bound(cluster, version=1) == {}
    assert reconcile(w2, await observe(cluster, w2)).ops == ()


async def test_cancel_withdraws_everything_labelled_with_the_job() -> None:
    cluster = fake()
    j = job(plugins=SVC)
    await step(cluster, work(j))
    cancelled = work(j, version=2, cancelled=True)
    result = await step(cluster, cancelled)
    assert result.phase == "Cancelled"
    assert cluster.pods() == [] and cluster.services() == [] and cluster.config_maps() == []
    assert reconcile(cancelled, await observe(cluster, cancelled)).ops == ()


async def test_changed_config_map_is_replaced() -> None:
    cluster = fake()
    await step(cluster, work(job(tasks=(("worker", 1, 8),), plugins=SVC)))
    w2 = work(job(tasks=(("worker", 2, 8),), plugins=SVC), version=2)
    await step(cluster, w2)
    [cm] = cluster.config_maps()
    assert cm.data["worker.host"] == "train-worker-0.train\ntrain-worker-1.train"


async def test_finished_job_keeps_terminal_pods_and_deletes_the_rest() -> None:
    cluster = fake()
    w = work(job())
    await step(cluster, w)
    cluster.succeed_pod("train-worker-0")
    result = await step(cluster, w, job_phase="Completed")
    assert result.phase == "Succeeded"
    assert [p.name for p in cluster.pods()] == ["train-worker-0"]
    assert reconcile(w, await observe(cluster, w), job_phase="Completed").ops == ()


async def test_elastic_extras_that_do_not_fit_stay_unbound() -> None:
    cluster = fake()
    w = work(job(tasks=(("worker", 3, 8),), min_available=2))
    result = await step(cluster, w)
    assert result.phase == "Bound" and len(bound(cluster)) == 2 and len(cluster.pods()) == 3
    assert reconcile(w, await observe(cluster, w)).ops == ()


async def test_no_tree_yet_means_create_but_do_not_bind() -> None:
    cluster = fake()
    w = work(job())
    cluster.set_hypernode_error("broken")
    observed = await observe_job(cluster, w.name, tree=None, label_keys=LABEL_KEYS)
    result = reconcile(w, observed)
    assert result.phase == "Pending" and not any(isinstance(op, BindPod) for op in result.ops)


async def test_missing_hypernode_reports_replan() -> None:
    w = work(job(), "t1-gone")
    result = reconcile(w, await observe(fake(), w))
    assert result.phase == "Replan" and result.message == "HyperNode t1-gone not found"


async def test_restart_pod_policy_end_to_end() -> None:
    cluster = fake()
    j = job(policies=(LifecyclePolicy("RestartPod", events=("PodFailed",)),))
    w = work(j)
    await step(cluster, w)
    cluster.fail_pod("train-worker-1", exit_code=1)
    observed = await observe(cluster, w)
    state = observe_state(JobRuntimeState(), j, observed.pods)
    [event] = [e for e in pod_events(j, observed.pods, observed.nodes, 5.0) if e.event == "PodFailed"]
    actions = decide(j, state, event, 5.0)
    ops = ops_for_actions(w, observed, actions, 5.0)
    assert ops == (DeletePod("default", "train-worker-1", "RestartPod after PodFailed"),)
    assert (await apply_ops(cluster, ops)).ok
    state = record(j, state, actions, 5.0)
    await step(cluster, w)
    pod = cluster.pod("train-worker-1")
    assert pod is not None and pod.phase == "Running" and pod.node in {"n00", "n01"}
    assert state.retries == 1


async def test_node_lost_end_to_end_replaces_inside_the_same_hypernode() -> None:
    cluster = fake()
    j = job()
    w = work(j, "t2-s0", pods=(("worker", 0, "n00"), ("worker", 1, "n01")))
    await step(cluster, w)
    cluster.set_node_ready("n00", False)
    observed = await observe(cluster, w)
    [event] = pod_events(j, observed.pods, observed.nodes, 9.0)
    assert event.event == "NodeLost" and event.node == "n00"
    assert observed.tree is not None
    room = Room(observed.tree.domains["t2-s0"], observed.nodes)
    [action] = decide(j, JobRuntimeState(), event, 9.0, room=room)
    assert action.kind == "RestartPod" and action.targets[0].node in {"n02", "n03"}
    await apply_ops(cluster, ops_for_actions(w, observed, [action], 9.0))
    await step(cluster, w, hints=action.targets)
    assert bound(cluster)["train-worker-0"] == action.targets[0].node


def test_ops_for_actions_ignores_delayed_and_replan() -> None:
    j = job(policies=(LifecyclePolicy("RestartJob", events=("PodFailed",), timeout_seconds=60),))
    w = work(j)
    from agents.core.recovery import PodEvent, PodRef

    event = PodEvent("PodFailed", "worker", (PodRef("train-worker-0", "worker", 0),), 1, 0.0)
    actions = decide(j, JobRuntimeState(), event, 10.0)
    assert ops_for_actions(w, Observed(), actions, 10.0) == ()
