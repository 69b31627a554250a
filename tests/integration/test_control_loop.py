"""The whole control loop over real gRPC: submit → round → Work → agent → pods bound
inside the chosen HyperNode → status back to RUNNING → SUCCEEDED; restart events; cancel;
explain. Two in-memory clusters, real agents, the real server, SQLite and PostgreSQL."""

from __future__ import annotations

from fleetkit import Fleet, eventually, fleet, has_snapshot, job_spec

from federation.client import FederationClient
from federation.control.snapshot import load
from federation.v1 import jobs_pb2


async def state_of(f: Fleet, name: str) -> int:
    async with f.client() as c:
        return (await c.get_job(name)).state


async def test_submitted_job_is_placed_bound_inside_its_hypernode_runs_and_succeeds(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: len(f.hub.connected()) == 2, what="both agents connected")
        # A round before west's first snapshot would (rightly) record the job as waiting
        # for its only allowed cluster; this test is about the uneventful path.
        await eventually(lambda: has_snapshot(f, "west"), what="west's first snapshot")
        f.runtimes["train"] = 1.5
        async with f.client() as c:
            await c.submit_job(job_spec("train", clusters=("west",)))
            await eventually(lambda: _is(c, "train", jobs_pb2.JOB_STATE_RUNNING), what="train running")
            job = await c.get_job("train")
            assert job.cluster == "west" and job.tier == 1 and job.hypernode.startswith("west-leaf")
            pods = f.job_pods("west", "train")
            assert len(pods) == 2 and not f.job_pods("east", "train")
            leaf = {"west-leaf0": {"west-n0", "west-n1"}, "west-leaf1": {"west-n2", "west-n3"}}[job.hypernode]
            assert set(pods.values()) == leaf  # the whole gang inside the chosen HyperNode, one pod per node
            explain = await c.explain_job("train")
            assert explain.WhichOneof("detail") == "placement" and explain.placement.cluster == "west"
            assert explain.round_id > 0
            await eventually(lambda: _is(c, "train", jobs_pb2.JOB_STATE_SUCCEEDED), what="train succeeded")
        events = [e.type for e in f.store.jobs.events_since(0, job="train").events]
        assert events == ["Submitted", "Placed", "Dispatched", "Running", "Succeeded"]


async def test_unplaceable_job_is_unschedulable_with_a_reason_explain_names_the_constraint(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: len(f.hub.connected()) == 2, what="both agents connected")
        async with f.client() as c:
            await c.submit_job(job_spec("huge", pods=3, tier=1))  # 3 x 8 GPUs never fit a 2-node leaf
            await eventually(lambda: _unschedulable(c, "huge"), what="huge marked unschedulable")
            job = await c.get_job("huge")
            assert job.state == jobs_pb2.JOB_STATE_PENDING and job.reason
            explain = await c.explain_job("huge")
            assert explain.WhichOneof("detail") == "pending"
            decision = f.store.audit.latest_decision("huge")
            assert decision is not None and decision.decision.outcome == "unplaced"
            assert decision.decision.constraint and decision.decision.reason


async def test_pod_failure_under_restart_pod_is_replaced_and_reported_as_an_event(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: len(f.hub.connected()) == 2, what="both agents connected")
        async with f.client() as c:
            await c.submit_job(job_spec("resilient", clusters=("east",), policies=(("RestartPod", "PodFailed"),)))
            await eventually(lambda: _is(c, "resilient", jobs_pb2.JOB_STATE_RUNNING), what="running")
            before = f.job_pods("east", "resilient")
            f.clusters["east"].fail_pod("resilient-worker-1", exit_code=137)
            await eventually(lambda: _restarts(c, "resilient", 1), what="restart recorded")
            events = f.store.jobs.events_since(0, job="resilient").events
            restarted = [e for e in events if e.type == "Restarted"]
            assert len(restarted) == 1 and "RestartPod" in restarted[0].message
            await eventually(lambda: _pod_running(f, "east", "resilient-worker-1"), what="pod replaced")
            after = f.job_pods("east", "resilient")
            assert after["resilient-worker-0"] == before["resilient-worker-0"]  # only the failed pod was touched
            assert (await c.get_job("resilient")).state == jobs_pb2.JOB_STATE_RUNNING


async def test_pod_replaced_on_another_node_after_node_loss_moves_the_recorded_placement(migrated_url: str) -> None:
    """Central must know where the pods are after the agent replaced one: explain and the
    next planning round read the recorded placement (the Work's pods), and a planned node
    that is NotReady must not stay in it."""
    async with fleet(migrated_url) as f:
        await eventually(lambda: len(f.hub.connected()) == 2, what="both agents connected")
        async with f.client() as c:
            await c.submit_job(job_spec("mover", pods=1, clusters=("east",)))
            await eventually(lambda: _is(c, "mover", jobs_pb2.JOB_STATE_RUNNING), what="running")
            job = await c.get_job("mover")
            [planned] = f.job_pods("east", "mover").values()
            assert planned is not None and _recorded_nodes(f, "mover") == [planned]
            spare = {"east-n0": "east-n1", "east-n1": "east-n0", "east-n2": "east-n3", "east-n3": "east-n2"}[planned]
            f.clusters["east"].set_node_ready(planned, False)  # NodeLost: replaced inside the same leaf
            await eventually(lambda: f.job_pods("east", "mover").get("mover-worker-0") == spare, what="pod replaced")
            await eventually(lambda: _recorded_nodes(f, "mover") == [spare], what="placement follows the pod")
            data = load(f.store, 0.0)
            [running] = [r for r in data.snapshot.running if r.job.name == "mover"]
            assert [p.node for p in running.placement.pods] == [spare]  # what the planner is given
            again = await c.get_job("mover")
            assert (again.cluster, again.hypernode, again.state) == (job.cluster, job.hypernode,
                                                                     jobs_pb2.JOB_STATE_RUNNING)


def _recorded_nodes(f: Fleet, job: str) -> list[str]:
    [work] = [w for w in f.store.works.list(job=job) if w.active]
    return [str(n) for _t, _i, n in work.payload["pods"]]


async def test_cancel_removes_everything_the_agent_created(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: len(f.hub.connected()) == 2, what="both agents connected")
        async with f.client() as c:
            await c.submit_job(job_spec("doomed", clusters=("east",)))
            await eventually(lambda: _is(c, "doomed", jobs_pb2.JOB_STATE_RUNNING), what="running")
            assert f.leftovers("east", "doomed") > 0
            await c.cancel_job("doomed")
            await eventually(lambda: f.leftovers("east", "doomed") == 0, what="everything withdrawn")
            assert (await c.get_job("doomed")).state == jobs_pb2.JOB_STATE_CANCELLED
        works = f.store.works.list(job="doomed")
        assert [w.state for w in works] == ["withdrawn"]


async def _is(c: FederationClient, name: str, state: int) -> bool:
    return bool((await c.get_job(name)).state == state)


async def _unschedulable(c: FederationClient, name: str) -> bool:
    return bool((await c.get_job(name)).unschedulable)


async def _restarts(c: FederationClient, name: str, n: int) -> bool:
    return bool((await c.get_job(name)).restarts >= n)


def _pod_running(f: Fleet, cluster: str, name: str) -> bool:
    pod = f.clusters[cluster].pod(name)
    return pod is not None and pod.phase == "Running" and pod.node is not None and not pod.deleting


