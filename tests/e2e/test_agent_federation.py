"""The whole path on real kube-apiservers: ``fedctl submit`` of a Volcano Job YAML to the
central service (``build_server`` on 127.0.0.1 port 0, SQLite), the planner choosing a
cluster and HyperNode, and real ``federation-agent`` processes (``--kubeconfig``, Lease
leader election) binding the gang there, restarting under the job's policies, failing it
when maxRetry is exhausted, cancelling it, and handing over between two replicas."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fixtures_federation import Tree, backend_for, eventually, unique

from agents.core.records import LABEL_JOB
from agents.failpoints import CRASH_AFTER_BINDS, KILLED
from agents.k8s.backend import KubernetesBackend
from federation.client import FederationClient

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = ("east", "west")
LEASE_DURATION = 3.0


class Federation:
    """Central service + one agent process per cluster (more on demand) + one tree per cluster."""

    def __init__(self, control_plane: Any, tmp: Path, **server_kwargs: Any) -> None:
        """``server_kwargs`` go to ``build_server`` (default: a 30 s agent grace)."""
        self.server_kwargs = {"agent_grace_seconds": 30.0, **server_kwargs}
        self.control_plane = control_plane
        self.tmp = tmp
        self.trees = {c: Tree(control_plane, c) for c in CLUSTERS}
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self.backends: dict[str, KubernetesBackend] = {}
        self.leases = {c: unique(f"agent-{c}") for c in CLUSTERS}
        self.running: Any = None
        self.client: FederationClient | None = None

    async def start(self) -> Federation:
        from federation.service.server import build_server, open_store

        for tree in self.trees.values():
            tree.__enter__()
        self.store = open_store(f"sqlite:///{self.tmp / 'federation.db'}", migrate=True)
        self.running = await build_server(self.store, listen="127.0.0.1:0", round_debounce_seconds=0.1,
                                          **self.server_kwargs)
        self.address = self.running.address
        self.client = FederationClient(self.address)
        for cluster in CLUSTERS:
            self.backends[cluster] = await backend_for(self.control_plane, cluster)
            self.start_agent(cluster, f"{cluster}-a")
        await self.fedctl("queue", "create", "e2e", "--weight", "1")
        return self

    def start_agent(self, cluster: str, identity: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agents.main", "--cluster", cluster, "--server", self.address,
             "--kubeconfig", str(self.control_plane.kubeconfig(cluster)), "--lease-namespace", "default",
             "--lease-name", self.leases[cluster], "--lease-duration", str(LEASE_DURATION),
             "--identity", identity, "--heartbeat-seconds", "1", "--snapshot-period-seconds", "5", "--verbose"],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, start_new_session=True,
            stdout=(self.tmp / f"agent-{identity}.log").open("ab"), stderr=subprocess.STDOUT,
        )
        self.agents[identity] = proc
        return proc

    async def kill(self, identity: str, sig: int = signal.SIGKILL) -> None:
        """Signal an agent process and wait for it (the loop keeps serving meanwhile)."""
        proc = self.agents[identity]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
        for _ in range(150):
            if proc.poll() is not None:
                return
            await asyncio.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)

    async def fedctl_result(self, *args: str) -> tuple[int, str, str]:
        """Run ``fedctl`` as a separate process (without blocking the loop the service runs on):
        its exit code, stdout and stderr."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "federation.cli.fedctl", "--server", self.address, *args,
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        return int(proc.returncode or 0), out.decode(), err.decode()

    async def fedctl(self, *args: str) -> str:
        code, out, err = await self.fedctl_result(*args)
        assert code == 0, f"fedctl {' '.join(args)}: {out}{err}"
        return out

    async def submit(self, name: str, **kw: Any) -> None:
        path = self.tmp / f"{name}.yaml"
        path.write_text(volcano_job(name, **kw))
        await self.fedctl("submit", "-f", str(path))

    async def job(self, name: str) -> dict[str, Any]:
        out = json.loads(await self.fedctl("get", "job", name, "-o", "json"))
        return dict(out.get("job", out))

    async def state(self, name: str, *states: str) -> dict[str, Any]:
        async def check() -> dict[str, Any]:
            job = await self.job(name)
            return job if job.get("state") in states else {}

        return await eventually(f"job {name} in {states}", check, 90, interval=0.5)

    def raw_pods(self, cluster: str, job: str) -> list[dict[str, Any]]:
        """The job's pods as the apiserver holds them (not through any agent's cache)."""
        raw = self.control_plane.request(cluster, "GET",
                                         f"/api/v1/namespaces/default/pods?labelSelector={LABEL_JOB}%3D{job}")
        return list(raw["items"])

    def explain(self, cluster: str, job: str) -> str:
        """What a timed-out wait on ``job`` leaves to read: its pods as the cluster holds
        them and the tail of every agent's log (the logs live in the test's tmp dir)."""
        pods = [(p["metadata"]["name"], p["metadata"]["uid"][:8], p.get("status", {}).get("phase"),
                 p.get("spec", {}).get("nodeName"), bool(p["metadata"].get("deletionTimestamp")))
                for p in self.raw_pods(cluster, job)]
        logs = [f"--- agent-{identity}.log\n" + "\n".join(
                    (self.tmp / f"agent-{identity}.log").read_text(errors="replace").splitlines()[-40:])
                for identity in self.agents]
        return f"pods (name, uid, phase, node, deleting) on {cluster}: {pods}\n" + "\n".join(logs)

    async def stop(self) -> None:
        for identity in list(self.agents):
            await self.kill(identity, signal.SIGTERM)
        for backend in self.backends.values():
            await backend.close()
        if self.client is not None:
            await self.client.close()
        if self.running is not None:
            await self.running.stop(grace=1.0)
        self.store.dispose()
        for tree in self.trees.values():
            tree.__exit__()
        for cluster, lease in self.leases.items():
            with contextlib.suppress(Exception):
                self.control_plane.request(cluster, "DELETE",
                                           f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}")


def job_header(name: str, min_available: int, max_retry: int) -> str:
    """The first lines of a Volcano Job in queue ``e2e``, up to its spec's other fields."""
    return f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: {name}
spec:
  queue: e2e
  minAvailable: {min_available}
  maxRetry: {max_retry}
"""


def volcano_job(name: str, *, replicas: int = 3, gpus: int = 4, max_retry: int = 3, tier: int = 1,
                policies: str = "    - event: PodFailed\n      action: RestartPod\n") -> str:
    return job_header(name, replicas, max_retry) + f"""\
  networkTopology:
    mode: hard
    highestTierAllowed: {tier}
  policies:
{policies}  plugins:
    env: []
    svc: []
  tasks:
{task_yaml("worker", replicas, gpus)}"""


def task_yaml(name: str, replicas: int, gpus: int, policies: str = "") -> str:
    """One Volcano task whose pods tolerate kwok's nodes and ask for ``gpus`` GPUs each."""
    block = f"      policies:\n{policies}" if policies else ""
    return f"""\
    - name: {name}
      replicas: {replicas}
{block}      template:
        spec:
          tolerations:
            - key: kwok.x-k8s.io/node
              operator: Exists
              effect: NoSchedule
          containers:
            - name: trainer
              image: ghcr.io/example/train:1.0
              resources:
                requests:
                  cpu: "1"
                  nvidia.com/gpu: {gpus}
                limits:
                  nvidia.com/gpu: {gpus}
"""


@pytest_asyncio.fixture
async def federation(control_plane: Any, tmp_path: Path) -> AsyncIterator[Federation]:
    fed = Federation(control_plane, tmp_path)
    try:
        yield await fed.start()
    finally:
        await fed.stop()


async def _pods(fed: Federation, cluster: str, job: str) -> list[Any]:
    return [p for p in await fed.backends[cluster].list_pods({LABEL_JOB: job}) if not p.deleting]


def _uids(fed: Federation, cluster: str, job: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in fed.raw_pods(cluster, job)
            if not p["metadata"].get("deletionTimestamp")}


async def _running(fed: Federation, cluster: str, job: str, count: int) -> dict[str, str]:
    pods = await _pods(fed, cluster, job)
    if len(pods) == count and all(p.phase == "Running" and p.node for p in pods):
        return _uids(fed, cluster, job)
    return {}


def _fail_pod(fed: Federation, cluster: str, pod: str) -> None:
    fed.control_plane.request(cluster, "PATCH", f"/api/v1/namespaces/default/pods/{pod}",
                              {"metadata": {"labels": {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}}},
                              content_type="application/merge-patch+json")


async def test_fedctl_job_is_bound_in_its_hypernode_restarts_one_pod_and_fails_after_max_retry(
        federation: Federation) -> None:
    fed = federation
    name = unique("e2e-train")
    await fed.submit(name, max_retry=2)  # Volcano: the second restart reaches 2 and fails the job
    job = await fed.state(name, "JOB_STATE_RUNNING")
    cluster, hypernode = job["cluster"], job["hypernode"]
    tree = fed.trees[cluster]
    assert hypernode == tree.leaf_a, job  # 3 x 4 GPUs only fit the two-node leaf at tier 1
    before = await eventually("pods Running", lambda: _running(fed, cluster, name, 3), 60)
    pods = await _pods(fed, cluster, name)
    assert {p.node for p in pods} <= tree.members[hypernode]
    other = next(c for c in CLUSTERS if c != cluster)
    assert await _pods(fed, other, name) == []

    victim = f"{name}-worker-1"
    _fail_pod(fed, cluster, victim)

    async def replaced() -> dict[str, str]:
        # The cache said 3 Running; the apiserver, read after it, may already hold the victim
        # deleting (left out): not replaced yet.
        now = await _running(fed, cluster, name, 3)
        return now if victim in now and now[victim] != before[victim] else {}

    after = await eventually("only the failed pod replaced", replaced, 60)
    assert {k: v for k, v in after.items() if k != victim} == {k: v for k, v in before.items() if k != victim}
    assert {p.node for p in await _pods(fed, cluster, name)} <= tree.members[hypernode]

    _fail_pod(fed, cluster, victim)  # its restart would be the second: maxRetry 2 reached
    failed = await fed.state(name, "JOB_STATE_FAILED")
    assert await fed.state(name, "JOB_STATE_FAILED")
    reason = failed.get("reason", "") + " " + failed.get("message", "")
    assert "maxRetry 2 exhausted" in reason and victim in reason, failed


async def _gone(fed: Federation, name: str) -> None:
    """Cancel ``name`` and wait until no cluster has a pod of it (tests share the GPU nodes)."""
    with contextlib.suppress(AssertionError):
        await fed.fedctl("cancel", name)

    async def empty() -> bool:
        return all(not fed.raw_pods(c, name) for c in CLUSTERS)

    await eventually(f"no pod of {name} left", empty, 60)


async def test_fedctl_cancel_leaves_no_pods_services_or_config_maps(federation: Federation) -> None:
    fed = federation
    name = unique("e2e-cancel")
    await fed.submit(name, replicas=2, gpus=2)
    job = await fed.state(name, "JOB_STATE_RUNNING")
    cluster = job["cluster"]
    await eventually("pods Running", lambda: _running(fed, cluster, name, 2), 60)
    backend = fed.backends[cluster]
    assert await backend.list_services({LABEL_JOB: name}) and await backend.list_config_maps({LABEL_JOB: name})
    await fed.fedctl("cancel", name)
    await fed.state(name, "JOB_STATE_CANCELLED")

    async def empty() -> bool:
        return not (fed.raw_pods(cluster, name) or await backend.list_services({LABEL_JOB: name})
                    or await backend.list_config_maps({LABEL_JOB: name}))

    await eventually("nothing left behind", empty, 60)


async def test_agent_leader_handover_keeps_the_job_running_without_duplicates(federation: Federation) -> None:
    fed = federation
    name = unique("e2e-handover")
    await fed.submit(name, replicas=2, gpus=2)
    job = await fed.state(name, "JOB_STATE_RUNNING")
    cluster = job["cluster"]
    before = await eventually("pods Running", lambda: _running(fed, cluster, name, 2), 60)
    fed.start_agent(cluster, f"{cluster}-b")
    log = fed.tmp / f"agent-{cluster}-b.log"
    await eventually("the second replica stands by", lambda: _async("standing by" in log.read_text()), 60)
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{fed.leases[cluster]}"
    assert fed.control_plane.request(cluster, "GET", lease_path)["spec"]["holderIdentity"] == f"{cluster}-a"
    killed = time.monotonic()
    await fed.kill(f"{cluster}-a")  # SIGKILL: the Lease must expire

    async def taken() -> bool:
        lease = fed.control_plane.request(cluster, "GET", lease_path)
        return bool(lease["spec"].get("holderIdentity") == f"{cluster}-b")

    await eventually("the standby holds the Lease", taken, 3 * LEASE_DURATION, interval=0.1)
    took = time.monotonic() - killed
    assert took <= LEASE_DURATION + 1.5, f"takeover after {took:.2f}s"
    print(f"federation-agent takeover after {took:.2f}s with a {LEASE_DURATION}s lease")
    await asyncio.sleep(2.0)  # the new leader says hello (newer epoch), syncs and reconciles
    after = await eventually("pods still Running", lambda: _running(fed, cluster, name, 2), 30)
    assert after == before
    assert (await fed.state(name, "JOB_STATE_RUNNING"))["cluster"] == cluster
    await _gone(fed, name)


async def _async(value: bool) -> bool:
    return value


def two_task_job(name: str, *, job_policies: str = "", worker_policies: str = "") -> str:
    """A master (1 pod, 1 GPU) and workers (2 pods, 2 GPUs each): Volcano task-level and
    job-level lifecycle policies as a user writes them."""
    spec_policies = f"  policies:\n{job_policies}" if job_policies else ""
    return job_header(name, 3, 3) + f"""\
{spec_policies}  tasks:
{task_yaml("master", 1, 1)}{task_yaml("worker", 2, 2, worker_policies)}"""


@pytest.mark.parametrize("action", ["RestartTask", "RestartJob"])
async def test_fedctl_job_restarts_its_task_or_its_whole_gang_on_a_pod_failure(
        federation: Federation, action: str) -> None:
    fed = federation
    name = unique(f"e2e-{action.lower()}")
    policy = f"        - event: PodFailed\n          action: {action}\n"
    text = (two_task_job(name, worker_policies=policy) if action == "RestartTask"
            else two_task_job(name, job_policies=policy.replace("        ", "    ", 2)))
    path = fed.tmp / f"{name}.yaml"
    path.write_text(text)
    await fed.fedctl("submit", "-f", str(path))
    try:
        await _restarts(fed, name, action)
    finally:
        await _gone(fed, name)


async def _restarts(fed: Federation, name: str, action: str) -> None:
    cluster = (await fed.state(name, "JOB_STATE_RUNNING"))["cluster"]
    before = await eventually("gang Running", lambda: _running(fed, cluster, name, 3), 60)
    master, workers = f"{name}-master-0", [f"{name}-worker-{i}" for i in range(2)]
    _fail_pod(fed, cluster, workers[0])
    restarted = workers if action == "RestartTask" else [master, *workers]

    async def replaced() -> dict[str, str]:
        now = await _running(fed, cluster, name, 3)
        return now if now and all(now[p] != before[p] for p in restarted) else {}

    try:
        after = await eventually(f"{action} replaced {restarted}", replaced, 60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{fed.explain(cluster, name)}") from None
    if action == "RestartTask":
        assert after[master] == before[master]  # the master task was not touched
    job = await fed.state(name, "JOB_STATE_RUNNING")
    assert job["cluster"] == cluster  # repaired in place, never re-planned
    assert fed.client is not None

    async def recorded() -> list[str]:
        seen: list[str] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                async for ev in fed.client.watch_jobs(0):  # type: ignore[union-attr]  # the fixture has started the client by now
                    if ev.job.id == name:
                        seen.append(ev.message)
        return seen if any(m.startswith(action) for m in seen) else []

    messages = await eventually(f"a {action} job event", recorded, 30)
    assert not any(m.startswith("RestartPod") for m in messages), messages


async def test_agent_process_dying_mid_binding_leaves_no_duplicate_and_no_half_gang(federation: Federation) -> None:
    """The real binary dies (os._exit 137, as SIGKILL would leave it) right after binding 2
    of a 4-pod gang; a fresh replica takes the Lease over and completes the same gang."""
    fed = federation
    for cluster in CLUSTERS:  # swap the healthy agents for ones armed to die after 2 binds
        await fed.kill(f"{cluster}-a", signal.SIGTERM)  # graceful: the Lease is released
        fed.start_agent(cluster, f"{cluster}-crash", env={CRASH_AFTER_BINDS: "2"})
    name = unique("e2e-crash")
    await fed.submit(name, replicas=4, gpus=2)
    try:
        await _crash_then_complete(fed, name)
    finally:
        await _gone(fed, name)


async def _crash_then_complete(fed: Federation, name: str) -> None:
    async def crashed() -> str:
        for cluster in CLUSTERS:
            if fed.agents[f"{cluster}-crash"].poll() is not None:
                return cluster
        return ""

    cluster = await eventually("an armed agent died mid-binding", crashed, 90, interval=0.1)
    assert fed.agents[f"{cluster}-crash"].returncode == KILLED
    pods = fed.raw_pods(cluster, name)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    assert len(bound) == 2 and len(pods) <= 4, [p["metadata"]["name"] for p in pods]

    fed.start_agent(cluster, f"{cluster}-b")  # no memory of the dead one: reads the cluster
    after = await eventually("the gang Running under the new leader", lambda: _running(fed, cluster, name, 4), 90)
    assert sorted(after) == [f"{name}-worker-{i}" for i in range(4)]
    assert len(fed.raw_pods(cluster, name)) == 4  # nothing duplicated
    job = await fed.state(name, "JOB_STATE_RUNNING")
    assert job["cluster"] == cluster
    assert {p.node for p in await _pods(fed, cluster, name)} <= fed.trees[cluster].members[job["hypernode"]]


def _label_nodes(fed: Federation, cluster: str, nodes: set[str], labels: dict[str, str | None]) -> None:
    for node in sorted(nodes):
        fed.control_plane.request(cluster, "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}},
                                  content_type="application/merge-patch+json")


async def test_a_gpu_model_pinned_gang_lands_only_on_matching_nodes(federation: Federation) -> None:
    """Issue 11: nodeSelector nvidia.com/gpu.product binds the planner and the agent alike.

    Only nodes 0 and 2 of east carry the model label (they are in different leaves, so
    the gang needs the tier-2 spine); without the selector the planner would take the
    two-node leaf of either cluster."""
    fed = federation
    model = unique("h100")
    east = fed.trees["east"]
    pinned = {east.nodes[0], east.nodes[2]}
    _label_nodes(fed, "east", pinned, {"nvidia.com/gpu.product": model})
    name = unique("e2e-pinned")
    try:
        task = task_yaml("worker", 2, 8).replace(
            "        spec:\n", f"        spec:\n          nodeSelector:\n            nvidia.com/gpu.product: {model}\n")
        path = fed.tmp / f"{name}.yaml"
        path.write_text(job_header(name, 2, 1) + "  networkTopology:\n    mode: hard\n    highestTierAllowed: 2\n"
                        + "  tasks:\n" + task)
        await fed.fedctl("submit", "-f", str(path))
        try:
            job = await fed.state(name, "JOB_STATE_RUNNING")
        except AssertionError as exc:  # say where it is stuck
            raise AssertionError(f"{exc}\n{await fed.fedctl('explain', name)}") from None
        assert job["cluster"] == "east", job
        await eventually("pods Running", lambda: _running(fed, "east", name, 2), 60)
        assert {p.node for p in await _pods(fed, "east", name)} == pinned
        assert await _pods(fed, "west", name) == []
        explained = await fed.fedctl("explain", name)
        assert "no topology wait: Volcano semantics, hard" in explained, explained
    finally:
        _label_nodes(fed, "east", pinned, {"nvidia.com/gpu.product": None})
        await _gone(fed, name)
