"""Karmada-style failover over real gRPC (propagation/taints.py): an agent that goes
silent gets its cluster tainted ``cluster.karmada.io/unreachable:NoExecute`` by the
service; a job without a toleration leaves after the service's failover grace, one that
tolerates the taint for ``tolerationSeconds`` stays that long and then leaves, one that
tolerates it without a bound stays; the returning agent clears the taint and its sync
removes only the pods of the jobs that left. A job that stays still counts toward its
queue's capability meanwhile. An admin's NoExecute taint evicts likewise."""

from __future__ import annotations

import time

from fleetkit import GRACE, Fleet, eventually, fleet, job_spec
from servicekit import ADMIN

from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.propagation.taints import UNREACHABLE
from federation.v1 import jobs_pb2, types_pb2

FAILOVER_GRACE = 2.0
PATIENCE = 8  # tolerationSeconds of the patient job


def _tolerating(name: str, seconds: int | None, key: str = UNREACHABLE) -> types_pb2.JobSpec:
    spec = job_spec(name, pods=1, gpus=2)
    tol = types_pb2.Toleration(key=key, operator="Exists", effect="NoExecute")
    if seconds is not None:
        tol.toleration_seconds = seconds
    spec.propagation.cluster_tolerations.append(tol)
    return spec


async def _where(f: Fleet, name: str) -> tuple[int, str]:
    async with f.client() as c:
        job = await c.get_job(name)
    return job.state, job.cluster


async def _running_in(f: Fleet, name: str, cluster: str) -> bool:
    return await _where(f, name) == (jobs_pb2.JOB_STATE_RUNNING, cluster)


async def _taints(f: Fleet, cluster: str) -> list[types_pb2.Taint]:
    async with f.client() as c:
        clusters = await c.list_clusters()
    return [t for c in clusters for t in c.taints if c.name == cluster]


async def test_silent_agent_taints_its_cluster_and_each_job_leaves_when_its_toleration_runs_out(
        migrated_url: str) -> None:
    async with fleet(migrated_url, agents=False, failover_grace_seconds=FAILOVER_GRACE) as f:
        f.start_agent("east")
        async with f.client() as c:
            await c.submit_job(job_spec("plain", pods=1, gpus=2))
            await c.submit_job(_tolerating("patient", PATIENCE))
            await c.submit_job(_tolerating("loyal", None))
        for name in ("plain", "patient", "loyal"):
            await eventually(lambda n=name: _running_in(f, n, "east"), what=f"{name} running in east")
        f.start_agent("west")
        epoch = f.agents["east"].runtime.epoch
        await f.kill_agent("east")  # silent from now on; its pods keep running
        silent_at = time.time()

        async def tainted() -> bool:
            return any(t.key == UNREACHABLE and t.effect == "NoExecute" for t in await _taints(f, "east"))

        await eventually(tainted, timeout=GRACE + 20, what="east tainted unreachable")
        [taint] = [t for t in await _taints(f, "east") if t.key == UNREACHABLE]
        assert taint.HasField("time_added") and taint.time_added >= silent_at
        await eventually(lambda: _running_in(f, "plain", "west"), timeout=FAILOVER_GRACE + 20,
                         what="plain re-placed in west after the failover grace")
        left = time.time()
        # plain left FAILOVER_GRACE after the taint; patient tolerates PATIENCE seconds: still in east
        assert left < taint.time_added + PATIENCE
        assert (await _where(f, "patient"))[1] == "east"
        await eventually(lambda: _running_in(f, "patient", "west"), timeout=PATIENCE + 20,
                         what="patient re-placed once its tolerationSeconds ran out")
        assert time.time() >= taint.time_added + PATIENCE
        assert await _running_in(f, "loyal", "east")  # tolerates for ever
        events = [(e.type, e.message) for e in f.store.jobs.events_since(0, job="patient").events]
        assert any("tolerated for 8s (tolerationSeconds)" in m for _, m in events), events

        f.start_agent("east", epoch=epoch)  # the agent returns: fenced, synced, untainted
        await eventually(lambda: not f.store.clusters.get("east").lost, what="east registered again")
        assert not [t for t in await _taints(f, "east") if t.key == UNREACHABLE]
        await eventually(lambda: f.leftovers("east", "plain") == 0 and f.leftovers("east", "patient") == 0,
                         what="the pods of the jobs that left are removed from east")
        assert len(f.job_pods("east", "loyal")) == 1 and await _running_in(f, "loyal", "east")
        assert len(f.job_pods("west", "plain")) == 1 and len(f.job_pods("west", "patient")) == 1


async def test_an_admin_noexecute_taint_evicts_the_jobs_that_do_not_tolerate_it(migrated_url: str) -> None:
    async with fleet(migrated_url, agents=False) as f:
        f.start_agent("east")
        async with f.client() as c:
            await c.submit_job(job_spec("plain", pods=1, gpus=2))
            await c.submit_job(_tolerating("tolerant", None, key="maintenance"))
            for name in ("plain", "tolerant"):
                await eventually(lambda n=name: _running_in(f, n, "east"), what=f"{name} running in east")
            f.start_agent("west")
        async with f.client(ADMIN) as admin:
            await admin.taint_cluster("east", [types_pb2.Taint(key="maintenance", effect="NoExecute")], [])
        await eventually(lambda: _running_in(f, "plain", "west"), what="plain moved to west")
        await eventually(lambda: f.leftovers("east", "plain") == 0, what="its pods removed from east by the agent")
        assert await _running_in(f, "tolerant", "east")


async def test_a_job_staying_on_an_unreachable_cluster_still_counts_toward_its_queue(migrated_url: str) -> None:
    async with fleet(migrated_url, agents=False, failover_grace_seconds=FAILOVER_GRACE) as f:
        f.store.queues.update(Queue("research", owners=("nlp",), capability=Resources.of(gpu=4)))
        f.start_agent("east")
        async with f.client() as c:
            await c.submit_job(_tolerating("loyal", None))  # 2 GPUs, tolerates unreachable for ever
        await eventually(lambda: _running_in(f, "loyal", "east"), what="loyal running in east")
        f.start_agent("west")
        await f.kill_agent("east")
        await eventually(lambda: f.store.clusters.get("east").lost, timeout=GRACE + 20, what="east unreachable")
        async with f.client() as c:
            await c.submit_job(job_spec("extra", pods=1, gpus=4))  # 2 + 4 would pass the capability of 4
            await c.submit_job(job_spec("small", pods=1, gpus=2))  # 2 + 2 fits
        await eventually(lambda: _running_in(f, "small", "west"), what="small placed in west")
        state, cluster = await _where(f, "extra")
        assert (state, cluster) == (jobs_pb2.JOB_STATE_PENDING, "")
        assert await _running_in(f, "loyal", "east")
