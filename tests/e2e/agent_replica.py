"""One agent replica as its own process, for the leader-handover test (the test kills it
with SIGKILL, as a node failure would). It campaigns for a Lease through
``run_agent_on_kubernetes`` and, while leading, drives one Work with the agent's
per-job loop. Each term is appended to ``--events`` as a JSON line:
``{"event": "lead", "identity": ..., "epoch": ..., "time": ...}``.

    python tests/e2e/agent_replica.py --kubeconfig K --cluster east --identity a \
        --lease-name L --lease-namespace default --lease-duration 3 \
        --job NAME --hypernode H --replicas 3 --gpus 2 --events FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fixtures_federation import WorkDriver, gpu_job, work_for

from agents.backend import ClusterBackend
from agents.k8s.run import run_agent_on_kubernetes


def main() -> None:
    p = argparse.ArgumentParser()
    for flag in ("kubeconfig", "cluster", "identity", "lease-name", "lease-namespace", "job", "hypernode", "events"):
        p.add_argument(f"--{flag}", required=True)
    p.add_argument("--lease-duration", type=float, default=3.0)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--gpus", type=int, default=2)
    args = p.parse_args()
    work = work_for(gpu_job(args.job, (("worker", args.replicas, args.gpus),)), args.cluster, args.hypernode)
    events = Path(args.events)

    async def runtime(backend: ClusterBackend, epoch: int, agent_id: str) -> None:
        with events.open("a") as f:
            f.write(json.dumps({"event": "lead", "identity": agent_id, "epoch": epoch, "time": time.time()}) + "\n")
        driver = WorkDriver(backend, work).start()
        try:
            await asyncio.Event().wait()
        finally:
            await driver.stop()

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await run_agent_on_kubernetes(args.cluster, runtime, kubeconfig=args.kubeconfig,
                                      lease_namespace=args.lease_namespace, lease_name=args.lease_name,
                                      lease_duration=args.lease_duration, identity=args.identity, stop=stop)

    asyncio.run(run())


if __name__ == "__main__":
    main()
