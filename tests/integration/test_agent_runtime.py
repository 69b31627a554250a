"""The agent runtime against the real service over real gRPC: invalid trees refused at
central with the path (last valid snapshot kept), restart adoption without duplicates,
orphan clean-up after a sync, node loss without room → Replan → re-placed elsewhere, and
promised-but-unbound room reserved between rounds. Plus the runtime's pure rules
(backoff with jitter, version ordering)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from fleetkit import Fleet, eventually, fleet, has_snapshot, job_spec, tree

from agents.core.controller import JobController
from agents.core.records import LABEL_JOB, PodManifest
from agents.runtime import AgentRuntime, backoff_delay
from agents.runtime_jobs import JobSlot
from federation.client import FederationClient
from federation.domain.jobs import Job, Task
from federation.domain.plans import Placement
from federation.domain.resources import Resources
from federation.domain.topology import HyperNodeMember, HyperNodeSpec, MemberSelector
from federation.domain.works import Work
from federation.v1 import jobs_pb2


def _connected(f: Fleet, *names: str) -> bool:
    return set(names) <= set(f.hub.connected())


async def _state(f: Fleet, name: str) -> int:
    async with f.client() as c:
        return int((await c.get_job(name)).state)


async def test_invalid_hypernode_tree_is_refused_with_its_path_and_the_last_valid_snapshot_is_kept(
        migrated_url: str) -> None:
    async with fleet(migrated_url, ("east",)) as f:
        await eventually(lambda: has_snapshot(f, "east"), what="first snapshot")
        _, specs = tree("east")
        ghost = HyperNodeSpec("east-broken", 3, (HyperNodeMember("HyperNode", MemberSelector(exact_name="ghost")),))
        f.clusters["east"].set_hypernodes([*specs, ghost])
        await eventually(lambda: bool(f.store.clusters.get("east").tree_error), what="tree error recorded")
        error = f.store.clusters.get("east").tree_error or ""
        assert "hyperNodes[3].spec.members[0]" in error and "ghost" in error
        assert f.store.clusters.get("east").summary.hypernodes == 3  # type: ignore[union-attr]  # the valid one
        async with f.client() as c:  # planning goes on with the last valid tree
            await c.submit_job(job_spec("steady"))
            await eventually(lambda: _is_running(c, "steady"), what="steady running")
        f.clusters["east"].set_hypernodes(specs)
        await eventually(lambda: not f.store.clusters.get("east").tree_error, what="tree error cleared")


async def test_restarted_agent_adopts_running_pods_without_duplicates(migrated_url: str) -> None:
    async with fleet(migrated_url, ("east",)) as f:
        async with f.client() as c:
            await c.submit_job(job_spec("adopted"))
            await eventually(lambda: _is_running(c, "adopted"), what="running")
        cluster = f.clusters["east"]
        before = dict(f.job_pods("east", "adopted"))
        creates = sum(1 for call in cluster.calls if call[0] == "create_pod")
        binds = cluster.bind_count
        await f.kill_agent("east")
        f.start_agent("east")  # a new process: new epoch, empty memory
        await eventually(lambda: f.agents["east"].runtime.syncs >= 1, what="new agent synced")
        await asyncio.sleep(1.0)  # several passes
        assert f.job_pods("east", "adopted") == before
        assert sum(1 for call in cluster.calls if call[0] == "create_pod") == creates
        assert cluster.bind_count == binds
        assert await _state(f, "adopted") == jobs_pb2.JOB_STATE_RUNNING


async def test_objects_of_jobs_outside_the_desired_set_are_removed_after_sync(migrated_url: str) -> None:
    async with fleet(migrated_url, ("east",), agents=False) as f:
        cluster = f.clusters["east"]
        await cluster.create_pod(PodManifest("ghost-worker-0", "default", labels={LABEL_JOB: "ghost"},
                                             requests=Resources.of(gpu=1)))
        cluster.occupy("not-ours", "east-n3", Resources.of(gpu=1))
        f.start_agent("east")
        await eventually(lambda: not cluster.pods({LABEL_JOB: "ghost"}), what="orphan removed")
        assert cluster.pod("not-ours", "other") is not None  # never touch what we did not create


async def test_node_lost_without_room_in_the_domain_is_replanned(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: _connected(f, "east", "west"), what="agents connected")
        async with f.client() as c:
            await c.submit_job(job_spec("nomad", clusters=("east", "west")))
            await eventually(lambda: _is_running(c, "nomad"), what="running")
            first = await c.get_job("nomad")
            leaf_nodes = sorted(set(f.job_pods(first.cluster, "nomad").values()))  # type: ignore[type-var]  # pod nodes are str; the mapping's value type is wider
            f.clusters[first.cluster].set_node_ready(str(leaf_nodes[0]), False)  # the leaf has no spare node
            await eventually(lambda: _moved(c, "nomad", first.cluster, first.hypernode), timeout=30,
                             what="re-placed in another domain")
            events = [e.type for e in f.store.jobs.events_since(0, job="nomad").events]
            assert "Requeued" in events
            await eventually(lambda: _is_running(c, "nomad"), what="running again")
            await eventually(lambda: not _live_pods(f, first.cluster, "nomad", first.hypernode), what="old withdrawn")


async def test_room_placed_but_not_yet_bound_is_not_given_twice(migrated_url: str) -> None:
    async with fleet(migrated_url, ("east",), agent_grace_seconds=60.0) as f:
        await eventually(lambda: has_snapshot(f, "east"), what="snapshot")
        await f.kill_agent("east")  # works are created but nobody binds: snapshots stay stale
        async with f.client() as c:
            await c.submit_job(job_spec("first"))
            await eventually(lambda: f.store.jobs.get("first").state == "placed", what="first placed")
            await c.submit_job(job_spec("second"))
            await eventually(lambda: f.store.jobs.get("second").state == "placed", what="second placed")
            await c.submit_job(job_spec("third"))
            await eventually(lambda: bool(f.store.jobs.get("third").reason), what="third unplaced")
        assert f.store.jobs.get("third").state == "pending"
        assert f.store.jobs.get("first").hypernode != f.store.jobs.get("second").hypernode
        f.start_agent("east")
        await eventually(lambda: f.store.jobs.get("second").state == "running", what="second running")
        assert f.store.jobs.get("first").state == "running"


async def test_finished_jobs_leave_the_active_set_so_a_pass_reconciles_only_active_jobs(
        migrated_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts reconcile calls (``JobController.sync``) per pass, not time: finished jobs
    once made every pass cost as much as the agent's whole history."""
    calls = {"sync": 0, "pass": 0}
    real_sync, real_pass = JobController.sync, AgentRuntime._pass

    async def counted_sync(self, *args, **kwargs):  # type: ignore[no-untyped-def]  # a counting wrapper, patched over the real method it forwards to
        calls["sync"] += 1
        return await real_sync(self, *args, **kwargs)

    async def counted_pass(self):  # type: ignore[no-untyped-def]  # a counting wrapper, patched over the real method it forwards to
        await real_pass(self)
        calls["pass"] += 1

    monkeypatch.setattr(JobController, "sync", counted_sync)
    monkeypatch.setattr(AgentRuntime, "_pass", counted_pass)

    async def settles_at(runtime: AgentRuntime, active: int, what: str) -> None:
        """Windows of five passes until one costs ``active`` reconcile calls per pass."""
        deadline = time.monotonic() + 20
        while True:
            async with runtime._lock:  # between passes: the counts are consistent
                before = dict(calls)
            await eventually(lambda: calls["pass"] >= before["pass"] + 5, what="five more passes")  # noqa: B023 - the lambda is awaited within the loop iteration that defines it
            async with runtime._lock:
                synced, passes = calls["sync"] - before["sync"], calls["pass"] - before["pass"]
            if synced == active * passes:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {synced} reconcile calls over {passes} passes")

    async with fleet(migrated_url, ("east",)) as f:
        runtime = f.agents["east"].runtime
        history = [f"done-{i}" for i in range(4)]
        for name in history:
            f.runtimes[name] = 0.3
        async with f.client() as c:
            for name in history:
                await c.submit_job(job_spec(name, pods=1))
            for name in history:
                await eventually(lambda: f.store.jobs.get(name).state == "succeeded", what=f"{name} succeeded")  # noqa: B023 - the lambda is awaited within the loop iteration that defines it
            await settles_at(runtime, 0, "four finished jobs, none active")
            assert not runtime.jobs.slots and set(history) <= set(runtime.jobs.tombstones)
            await c.submit_job(job_spec("live", pods=1))  # no runtime: runs until cancelled
            await eventually(lambda: _is_running(c, "live"), what="live running")
            await settles_at(runtime, 1, "one active job after four finished ones")


@pytest.mark.parametrize("attempt", range(8))
def test_backoff_doubles_to_the_cap_with_jitter_in_the_upper_half(attempt: int) -> None:
    rng = random.Random(attempt)
    delays = [backoff_delay(attempt, 0.5, 30.0, rng) for _ in range(200)]
    ceiling = min(30.0, 0.5 * 2 ** attempt)
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(set(delays)) > 100  # jittered: agents do not reconnect in lockstep


def _work(version: int, cancelled: bool = False) -> Work:
    job = Job("v", "q", (Task("w", 1, Resources.of(gpu=1)),))
    return Work(f"id{version}", job, version, Placement("v", "east", "east-leaf0", 1), cancelled=cancelled)


@pytest.mark.parametrize(("held", "offered", "accepted"), [
    pytest.param(_work(2), _work(1), False, id="older-version-ignored"),
    pytest.param(_work(2), _work(2), False, id="duplicate-ignored"),
    pytest.param(_work(2), _work(3), True, id="newer-version-taken"),
    pytest.param(_work(2), _work(2, cancelled=True), True, id="cancel-of-held-version-taken"),
    pytest.param(_work(2, cancelled=True), _work(2), False, id="replay-after-cancel-ignored"),
    pytest.param(_work(2, cancelled=True), _work(3), True, id="re-placed-after-cancel-taken"),
])
def test_version_rules(held: Work, offered: Work, accepted: bool) -> None:
    slot = JobSlot(JobController(held))
    assert slot.accept(offered) is accepted
    assert slot.work == (offered if accepted else held)


async def _is_running(c: FederationClient, name: str) -> bool:
    return bool((await c.get_job(name)).state == jobs_pb2.JOB_STATE_RUNNING)


async def _moved(c: FederationClient, name: str, cluster: str, hypernode: str) -> bool:
    job = await c.get_job(name)
    return bool(job.state in (jobs_pb2.JOB_STATE_PLACED, jobs_pb2.JOB_STATE_DISPATCHED, jobs_pb2.JOB_STATE_RUNNING)
                and (job.cluster, job.hypernode) != (cluster, hypernode))


def _live_pods(f: Fleet, cluster: str, job: str, hypernode: str) -> list[str]:
    domain_nodes = {"leaf0": {f"{cluster}-n0", f"{cluster}-n1"}, "leaf1": {f"{cluster}-n2", f"{cluster}-n3"}}
    nodes = domain_nodes.get(hypernode.rsplit("-", 1)[-1], set())
    return [p.name for p in f.clusters[cluster].pods({LABEL_JOB: job}) if p.node in nodes and not p.deleting]


async def test_job_failed_by_exhausted_max_retry_is_failed_at_central_with_that_reason(migrated_url: str) -> None:
    # The agent ends the job (FailJob); central must record why, not just "job Failed".
    async with fleet(migrated_url, ("east",)) as f:
        spec = job_spec("fragile", policies=(("RestartPod", "PodFailed"),))
        spec.max_retry = 1  # the first restart reaches it (0 would mean 3, as in Volcano)
        async with f.client() as c:
            await c.submit_job(spec)
            await eventually(lambda: _is_running(c, "fragile"), what="running")
            f.clusters["east"].fail_pod("fragile-worker-1")
            await eventually(lambda: f.store.jobs.get("fragile").state == "failed", what="failed")
            reason = f.store.jobs.get("fragile").reason or ""
            assert "maxRetry 1 exhausted after PodFailed of pod fragile-worker-1" in reason, reason
            assert "maxRetry 1 exhausted" in (await c.get_job("fragile")).reason
