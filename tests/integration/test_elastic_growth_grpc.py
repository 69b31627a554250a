"""A running elastic job grows over real gRPC: when room appears in its HyperNode, central
adds pods to its Work (same version, next generation), the agent binds only the added pods
there, the running pods stay where they are, and the growth is settled in the store once
the agent reports it (PostgreSQL and SQLite)."""

from __future__ import annotations

import pytest
from fleetkit import Fleet, eventually, fleet, job_spec

from federation.domain import Job, Queue, Task
from federation.domain.plans import PodAssignment
from federation.domain.resources import Resources
from federation.domain.states import ACTIVE_WORK_STATES, WorkState
from federation.store import Conflict, Store, WorkRecord


def _active(f: Fleet, job: str) -> WorkRecord | None:
    works = [w for w in f.store.works.list(job=job, states=ACTIVE_WORK_STATES)]
    return works[0] if works else None


async def test_a_running_elastic_job_gains_pods_inside_its_hypernode(migrated_url: str) -> None:
    async with fleet(migrated_url, ("east",)) as f:
        cluster = f.clusters["east"]
        # Someone else holds east-n1 and the whole of leaf1: only east-n0 has room.
        for node in ("east-n1", "east-n2", "east-n3"):
            cluster.occupy(f"squatter-{node}", node, Resources.of(gpu=8))
        spec = job_spec("grower", pods=4, gpus=4, tier=1)
        spec.min_available = 2
        async with f.client() as c:
            await c.submit_job(spec)
            await eventually(lambda: f.store.jobs.get("grower").state == "running", what="grower running")
        work = _active(f, "grower")
        assert work is not None and work.payload.get("generation", 0) == 0
        assert work.payload["hypernode"] == "east-leaf0"
        before = f.job_pods("east", "grower")
        assert sorted(v or "" for v in before.values()) == ["east-n0", "east-n0"]  # the gang of 2 on the one free node

        await cluster.delete_pod("other", "squatter-east-n1")  # room appears inside east-leaf0

        def grown() -> bool:
            pods = f.job_pods("east", "grower")
            return len(pods) == 4 and all(pods.values())

        await eventually(grown, timeout=30, what="the added pods bound")
        after = f.job_pods("east", "grower")
        assert {k: v for k, v in after.items() if k in before} == before  # running pods untouched
        assert sorted(v or "" for k, v in after.items() if k not in before) == ["east-n1", "east-n1"]  # same leaf
        work2 = _active(f, "grower")
        assert work2 is not None and (work2.id, work2.version) == (work.id, work.version)
        assert work2.payload["generation"] == 1
        assert len(work2.payload["pods"]) == 4
        await eventually(lambda: "growing" not in (_active(f, "grower") or work2).payload,
                         what="growth settled by the agent's report")
        assert f.store.jobs.get("grower").state == "running"
        grew = [e for e in f.store.jobs.events_since(0, job="grower").events if e.type == "Grown"]
        assert len(grew) == 1 and "grew by 2 pod(s) in east/east-leaf0" in grew[0].message
        assert not any(call[0] == "delete_pod" and str(call[1]).startswith("grower") for call in cluster.calls)


def test_the_store_grows_only_an_active_work_and_refuses_stale_reports(store: Store) -> None:
    store.queues.create(Queue("research"))
    store.clusters.register("east", 1)
    store.jobs.submit(Job("llm", "research", (Task("worker", 2, Resources.of(gpu=4)),), min_available=1))
    payload = {"cluster": "east", "hypernode": "leaf0", "tier": 1, "pods": [["worker", 0, "n0"]]}
    work = store.works.create("llm", "east", payload)
    added = (PodAssignment("worker", 1, "n1"),)
    with pytest.raises(Conflict):
        store.works.grow("llm", "east", "leaf1", added)  # another HyperNode: a move, not a growth
    with pytest.raises(Conflict):
        store.works.grow("llm", "east", "leaf0", (PodAssignment("worker", 0, "n1"),))  # a running pod
    grown = store.works.grow("llm", "east", "leaf0", added)
    assert (grown.id, grown.version) == (work.id, work.version)
    assert grown.payload["generation"] == 1 and grown.payload["growing"] == [["worker", 1, "n1"]]
    assert grown.payload["pods"] == [["worker", 0, "n0"], ["worker", 1, "n1"]]
    with pytest.raises(Conflict):  # a report about the pod set before the growth
        store.works.record_pods(work.id, (PodAssignment("worker", 0, "n0"),), generation=0)
    settled = store.works.record_pods(work.id, (PodAssignment("worker", 0, "n0"), *added), generation=1)
    assert "growing" not in settled.payload and settled.payload["generation"] == 1
    store.works.update_status(work.id, WorkState.WITHDRAWN)
    with pytest.raises(Conflict):
        store.works.grow("llm", "east", "leaf0", (PodAssignment("worker", 2, "n1"),))
