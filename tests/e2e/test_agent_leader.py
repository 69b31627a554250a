"""Leader handover between two agent replicas (separate processes) of one cluster: the
leader is killed with SIGKILL; the standby takes over within the lease duration, with a
larger epoch, and converges from the cluster without duplicating or restarting pods."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane
from fixtures_federation import Tree, backend_for, cleanup, eventually, unique

from agents.core.records import LABEL_JOB

pytestmark = pytest.mark.e2e

REPLICA = Path(__file__).resolve().parent / "agent_replica.py"
LEASE_DURATION = 3.0
SLACK = 1.5  # process scheduling and one Lease write on a loaded 2-core machine


def _terms(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _start(control_plane: Any, identity: str, lease: str, job: str, hypernode: str, events: Path,
           log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(REPLICA), "--kubeconfig", str(control_plane.kubeconfig("east")), "--cluster", "east",
         "--identity", identity, "--lease-name", lease, "--lease-namespace", "default",
         "--lease-duration", str(LEASE_DURATION), "--job", job, "--hypernode", hypernode, "--replicas", "3",
         "--gpus", "2", "--events", str(events)],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


async def _uids(control_plane: Any, job: str) -> dict[str, str]:
    raw = control_plane.request("east", "GET", f"/api/v1/namespaces/default/pods?labelSelector={LABEL_JOB}%3D{job}")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in raw["items"]}


async def test_standby_takes_over_within_the_lease_duration_without_duplicates(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    backend = await backend_for(control_plane, "east")
    job, lease = unique("handover"), unique("lease")
    events = tmp_path / "terms.jsonl"
    procs: list[subprocess.Popen[bytes]] = []
    with Tree(control_plane, "east") as tree:
        try:
            procs.append(_start(control_plane, "replica-a", lease, job, tree.leaf_a, events, tmp_path / "a.log"))
            await eventually("replica-a leads", lambda: _async(len(_terms(events)) == 1), 30)

            async def running() -> dict[str, str]:
                pods = [p for p in await backend.list_pods({LABEL_JOB: job}) if not p.deleting]
                ok = len(pods) == 3 and all(p.phase == "Running" for p in pods)
                return await _uids(control_plane, job) if ok else {}

            before = await eventually("gang Running under replica-a", running, 45)
            procs.append(_start(control_plane, "replica-b", lease, job, tree.leaf_a, events, tmp_path / "b.log"))
            time.sleep(LEASE_DURATION + 1)  # replica-b is a standby: it must not lead meanwhile
            assert [t["identity"] for t in _terms(events)] == ["replica-a"]

            killed = time.time()
            _stop(procs[0])  # SIGKILL: no release, the Lease has to expire
            await eventually("replica-b leads", lambda: _async(len(_terms(events)) == 2), 3 * LEASE_DURATION)
            first, second = _terms(events)
            assert second["identity"] == "replica-b"
            took = second["time"] - killed
            assert took <= LEASE_DURATION + SLACK, f"takeover after {took:.2f}s (lease {LEASE_DURATION}s)"
            assert second["epoch"] > first["epoch"]
            (tmp_path / "takeover-seconds").write_text(f"{took:.3f}\n")
            print(f"takeover after {took:.2f}s with a {LEASE_DURATION}s lease")

            lease_path = f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}"
            held = control_plane.request("east", "GET", lease_path)
            assert held["spec"]["holderIdentity"] == "replica-b"
            await _sleep(2.0)  # let the new leader run a few passes
            after = await eventually("gang still Running under replica-b", running, 30)
            assert after == before  # same pods: nothing duplicated, nothing restarted

            _stop(procs[1], signal.SIGTERM)  # graceful: the Lease is released
            released = control_plane.request("east", "GET", lease_path)
            assert not released["spec"].get("holderIdentity")
        finally:
            for proc in procs:
                _stop(proc)
            await cleanup(backend, job)
            control_plane.request("east", "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}")
            await backend.close()


async def _async(value: bool) -> bool:
    return value


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)
