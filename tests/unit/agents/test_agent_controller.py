"""The per-job loop end to end on the fake cluster with a simulated clock."""

from __future__ import annotations

from agentkit import LABEL_KEYS, fake, gpu, job, work

from agents.backend import BackendError, BindingRejected
from agents.core.controller import JobController
from agents.fake.clock import ManualClock
from federation.domain.jobs import LifecyclePolicy

P = LifecyclePolicy


def controller(j_policies: tuple[LifecyclePolicy, ...] = (), hypernode: str = "t1-l0", **kw: object) -> JobController:
    return JobController(work(job(policies=j_policies, **kw), hypernode), label_keys=LABEL_KEYS)  # type: ignore[arg-type]  # keyword arguments passed through untyped to the constructor


async def test_lifecycle_bind_fail_restart_complete() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock, runtime=100.0)
    ctl = controller((P("RestartPod", events=("PodFailed",)),))
    first = await ctl.sync(cluster, clock(), None)
    assert first.phase == "Bound" and first.actions == ()
    assert (await ctl.sync(cluster, clock(), None)).phase == "Running"

    clock.advance(10)
    cluster.fail_pod("train-worker-1", exit_code=3)
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartPod"]
    assert report.events[0].message.startswith("RestartPod on PodFailed of pod train-worker-1 (exitCode=3)")
    pod = cluster.pod("train-worker-1")
    assert pod is not None and pod.phase == "Running" and pod.node in {"n00", "n01"}  # replaced in the same pass
    assert ctl.state.retries == 1

    cluster.advance(200)
    done = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in done.actions] == ["CompleteJob"] and done.phase == "Succeeded"
    assert ctl.state.phase == "Completed"
    again = await ctl.sync(cluster, clock(), None)
    assert again.actions == () and again.phase == "Succeeded"


async def test_two_failures_under_restart_job_restart_the_job_once() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller((P("RestartJob", events=("PodFailed",)),))
    await ctl.sync(cluster, clock(), None)
    cluster.fail_pod("train-worker-0")
    cluster.fail_pod("train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartJob"]
    assert ctl.state.retries == 1
    assert all(p.phase == "Running" for p in cluster.pods())


async def test_delayed_action_reports_when_to_wake_and_fires_then() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller((P("RestartJob", events=("PodFailed",), timeout_seconds=30),))
    await ctl.sync(cluster, clock(), None)
    clock.advance(5)
    cluster.fail_pod("train-worker-0")
    waiting = await ctl.sync(cluster, clock(), None)
    assert waiting.actions == () and waiting.wake_at == 35.0
    clock.set(35.0)
    fired = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in fired.actions] == ["RestartJob"] and fired.wake_at is None


async def test_node_lost_is_replaced_inside_the_hypernode_in_one_pass() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller(hypernode="t2-s0")
    await ctl.sync(cluster, clock(), None)
    lost = cluster.pod("train-worker-0")
    assert lost is not None and lost.node is not None
    cluster.set_node_ready(lost.node, False)
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["RestartPod"]
    moved = cluster.pod("train-worker-0")
    assert moved is not None and moved.node == report.actions[0].targets[0].node != lost.node
    assert ctl.state.retries == 0


async def test_node_lost_without_room_reports_replan() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller()
    await ctl.sync(cluster, clock(), None)
    cluster.set_node_ready("n00", False)
    report = await ctl.sync(cluster, clock(), None)
    assert report.phase == "Replan" and "no node in t1-l0 has room" in report.message


async def test_a_failure_without_a_policy_leaves_the_gang_running_until_its_pods_end() -> None:
    # Volcano's SyncJob: the Failed pod is kept (not recreated), the others run on.
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller()
    await ctl.sync(cluster, clock(), None)
    cluster.fail_pod("train-worker-0")
    report = await ctl.sync(cluster, clock(), None)
    assert report.actions == () and ctl.state.phase == "Running"
    assert [(p.name, p.phase) for p in cluster.pods()] == [("train-worker-0", "Failed"), ("train-worker-1", "Running")]
    cluster.fail_pod("train-worker-1")
    report = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in report.actions] == ["FailJob"] and report.phase == "Failed"


async def test_update_ignores_stale_versions_and_moves_to_new_ones() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller()
    j = ctl.work.job
    await ctl.sync(cluster, clock(), None)
    assert ctl.update(work(j, "t1-l1", version=0)) is False
    assert ctl.update(work(j, "t1-l1", version=2)) is True
    await ctl.sync(cluster, clock(), None)
    await ctl.sync(cluster, clock(), None)
    assert {p.node for p in cluster.pods()} == {"n02", "n03"}
    assert ctl.update(work(j, "t1-l1", version=3, cancelled=True))
    report = await ctl.sync(cluster, clock(), None)
    assert report.phase == "Cancelled" and cluster.pods() == []


async def test_room_taken_reports_replan_and_binds_once_room_returns() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller()
    cluster.occupy("thief", "n00", gpu(8))
    report = await ctl.sync(cluster, clock(), None)
    assert report.phase == "Replan" and report.error == ""
    await cluster.delete_pod("other", "thief")
    assert (await ctl.sync(cluster, clock(), None)).phase == "Bound"


async def test_refused_operation_is_reported_and_retried_next_pass() -> None:
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller()
    real_bind = cluster.bind_pod
    refusals = iter([BindingRejected("apiserver said no")])

    async def flaky_bind(namespace: str, name: str, node: str) -> None:
        for refusal in refusals:
            raise refusal
        await real_bind(namespace, name, node)

    cluster.bind_pod = flaky_bind  # type: ignore[method-assign]  # a test double replaces the method
    first = await ctl.sync(cluster, clock(), None)
    assert "apiserver said no" in first.error
    assert cluster.bind_count == 0  # the first bind was refused, so none followed
    second = await ctl.sync(cluster, clock(), None)
    assert second.error == "" and cluster.bind_count == 2



async def test_a_lasting_refusal_is_the_reports_message_and_is_retried_after_a_back_off() -> None:
    # A namespace the member cluster lacks: every create is refused. The report said Bound
    # with no message (nothing exists, and the job did not say why), and the runtime re-ran
    # every job's pass back to back for as long as the refusal lasted.
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller()

    async def refuse(_manifest: object) -> None:
        raise BackendError('create service default/train: HTTP 404 NotFound: namespaces "default" not found')

    cluster.create_service = refuse  # type: ignore[method-assign, assignment]  # a test double replaces the method
    first = await ctl.sync(cluster, clock(), None)
    assert first.phase == "Pending" and 'namespaces "default" not found' in first.message
    assert first.wake_at == clock() + 1.0 and cluster.pods() == []
    second = await ctl.sync(cluster, clock(), None)
    assert second.wake_at == clock() + 2.0  # backing off, 1 s doubling
    del cluster.create_service  # the namespace exists now
    third = await ctl.sync(cluster, clock(), None)
    assert third.error == "" and third.message == "" and third.phase == "Bound" and third.wake_at is None


async def test_report_of_the_binding_pass_names_the_nodes_the_pods_were_actually_bound_to() -> None:
    """Central records a job's placement from these reports. A report holding the pods as
    read before the pass (none yet, or unbound) would tell it nothing, and a gang the agent
    re-packed would keep its planned nodes in central's record."""
    clock = ManualClock()
    cluster = fake(clock=clock)
    planned_elsewhere = (("worker", 0, "n00"), ("worker", 1, "n01"))  # not in t1-l1: the agent re-packs
    ctl = JobController(work(job(), "t1-l1", pods=planned_elsewhere), label_keys=LABEL_KEYS)
    report = await ctl.sync(cluster, clock(), None)
    assert report.phase == "Bound"
    assert {(p.task, p.index, p.node) for p in report.pods} == {("worker", 0, "n02"), ("worker", 1, "n03")}

    cluster.fail_pod("train-worker-1", exit_code=1)
    restart = JobController(work(job(policies=(P("RestartPod", events=("PodFailed",)),)), "t1-l1",
                                 pods=planned_elsewhere), label_keys=LABEL_KEYS)
    again = await restart.sync(cluster, clock(), None)
    assert [a.kind for a in again.actions] == ["RestartPod"]
    replaced = {p.name: p for p in again.pods}["train-worker-1"]
    assert replaced.node in {"n02", "n03"} and replaced.phase == "Running"  # the replacement, not the failed pod


async def test_max_retry_exhaustion_is_the_reported_message_of_every_terminal_pass() -> None:
    # Central records a job's reason from the terminal WorkStatus message: "job Failed"
    # alone lost why (the FailJob event is sent once and not recorded as the reason).
    clock = ManualClock()
    cluster = fake(clock=clock)
    ctl = controller((P("RestartPod", events=("PodFailed",)),), max_retry=2)
    await ctl.sync(cluster, clock(), None)
    cluster.fail_pod("train-worker-1")
    assert [a.kind for a in (await ctl.sync(cluster, clock(), None)).actions] == ["RestartPod"]
    clock.advance(5)
    cluster.fail_pod("train-worker-1")
    failed = await ctl.sync(cluster, clock(), None)
    assert [a.kind for a in failed.actions] == ["FailJob"] and failed.phase == "Failed"
    assert "maxRetry 2 exhausted after PodFailed of pod train-worker-1" in failed.message
    assert ctl.state.reason == failed.events[0].message
    later = await ctl.sync(cluster, clock(), None)
    assert later.actions == () and later.phase == "Failed" and later.message == failed.message
