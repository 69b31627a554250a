"""A running elastic job grows on a real cluster: the agent's loop (over KubernetesBackend)
takes a Work of the same version and the next generation, creates and binds only the added
pods, inside the job's HyperNode, and leaves the running pods as they are (same uids)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fixtures_federation import Tree, WorkDriver, backend_for, cleanup, eventually, gpu_job, pod_uids, unique, work_for
from test_agent_work import running

from federation.domain.plans import PodAssignment

pytestmark = pytest.mark.e2e


async def test_a_grown_work_binds_only_the_added_pods_inside_the_same_hypernode(
        control_plane: Any, kube_clients: Any) -> None:
    backend = await backend_for(control_plane, "east")
    job = gpu_job(unique("grow"), (("worker", 4, 4),), min_available=2)
    with Tree(control_plane, "east") as tree:
        first_node, second_node = sorted(tree.members[tree.leaf_a])
        work = work_for(job, "east", tree.leaf_a, pods=[("worker", 0, first_node), ("worker", 1, first_node)])
        driver = WorkDriver(backend, work).start()
        try:
            started = await eventually("the gang of 2 Running", lambda: running(backend, job.name, 2))
            assert {p.node for p in started} == {first_node}  # only the listed pods, not all 4 replicas
            before = await pod_uids(kube_clients["east"], job.name)
            added = (PodAssignment("worker", 2, second_node), PodAssignment("worker", 3, second_node))
            grown = replace(work, generation=1, placement=replace(work.placement, pods=(*work.placement.pods, *added)))
            driver.update(grown)
            pods = await eventually("4 pods Running", lambda: running(backend, job.name, 4))
            assert {p.node for p in pods} <= tree.members[tree.leaf_a]
            assert {p.name: p.node for p in pods if p.name not in before} == {
                f"{job.name}-worker-2": second_node, f"{job.name}-worker-3": second_node}
            now = await pod_uids(kube_clients["east"], job.name)
            assert {k: v for k, v in now.items() if k in before} == before  # never recreated
            assert driver.last is not None and driver.last.generation == 1
        finally:
            await driver.stop()
            await cleanup(backend, job.name)
            await backend.close()
