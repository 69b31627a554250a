"""Karmada policies as stored objects, through the whole control loop (real gRPC, real
agents on in-memory clusters, SQLite and PostgreSQL): a policy applied once steers every
job it selects; pending jobs pick up a new or changed policy; running jobs keep theirs
unless a higher-priority policy with ``preemption: Always`` takes them over; suspended
dispatching holds a job; ``explain`` names the policy."""

from __future__ import annotations

import json
from typing import Any

from fleetkit import eventually, fleet, has_snapshot, job_spec
from servicekit import ADMIN

from federation.client import FederationClient
from federation.v1 import jobs_pb2, objects_pb2, types_pb2


def _policy(name: str, clusters: list[str], *, kind: str = "PropagationPolicy", labels: dict[str, str] | None = None,
            job: str = "", priority: int = 0, preemption: str = "", suspend: bool = False) -> objects_pb2.Policy:
    selector: dict[str, Any] = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}
    if job:
        selector["name"] = job
    if labels:
        selector["labelSelector"] = {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}
                                                          for k, v in labels.items()]}
    spec: dict[str, Any] = {"resourceSelectors": [selector],
                            "placement": {"clusterAffinity": {"clusterNames": clusters}}}
    if priority:
        spec["priority"] = priority
    if preemption:
        spec["preemption"] = preemption
    if suspend:
        spec["suspension"] = {"dispatching": True}
    meta = {"name": name, **({"namespace": "default"} if kind == "PropagationPolicy" else {})}
    doc = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}
    return objects_pb2.Policy(document_json=json.dumps(doc))


def _job(name: str, **labels: str) -> types_pb2.JobSpec:
    spec = job_spec(name, pods=1, tier=None)
    spec.labels.update(labels)
    return spec


async def _state(c: FederationClient, name: str) -> int:
    return (await c.get_job(name)).state


async def _cluster(c: FederationClient, name: str) -> str:
    return (await c.get_job(name)).cluster


async def test_a_stored_policy_steers_every_job_it_selects_by_karmada_precedence(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="both snapshots")
        async with f.client(ADMIN) as c:
            # A cluster-wide kind-only policy sends jobs west; a namespaced label policy sends
            # llm jobs east: the namespaced policy wins wherever both match.
            assert (await c.apply_policy(_policy("all-west", ["west"], kind="ClusterPropagationPolicy"))).outcome \
                == "created"
            await c.apply_policy(_policy("llm-east", ["east"], labels={"team": "llm"}))
            await c.submit_job(_job("plain"))
            await c.submit_job(_job("llm", team="llm"))
            await eventually(lambda: _state_is(c, "plain", jobs_pb2.JOB_STATE_RUNNING), what="plain running")
            await eventually(lambda: _state_is(c, "llm", jobs_pb2.JOB_STATE_RUNNING), what="llm running")
            assert await _cluster(c, "plain") == "west" and await _cluster(c, "llm") == "east"
            assert (await c.explain_job("llm")).policy == "propagationpolicy/default/llm-east"
            assert (await c.explain_job("plain")).policy == "clusterpropagationpolicy/all-west"
            listed = {p.name: list(p.jobs) for p in await c.list_policies()}
            assert listed == {"all-west": ["plain"], "llm-east": ["llm"]}

            # A higher-priority policy without preemption does not take over running jobs ...
            await c.apply_policy(_policy("llm-west", ["west"], labels={"team": "llm"}, priority=5))
            await eventually(lambda: _explained(c, "llm", "propagationpolicy/default/llm-east"), what="kept")
            await c.submit_job(_job("llm2", team="llm"))  # ... but governs new ones at once
            await eventually(lambda: _explained(c, "llm2", "propagationpolicy/default/llm-west"), what="new job")
            # ... and one with preemption: Always does.
            await c.apply_policy(_policy("llm-grab", ["west"], job="llm", priority=10, preemption="Always"))
            await eventually(lambda: _explained(c, "llm", "propagationpolicy/default/llm-grab"), what="preempted")


async def test_pending_jobs_pick_up_a_new_or_changed_policy_and_suspension_holds_them(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="both snapshots")
        async with f.client(ADMIN) as c:
            await c.apply_policy(_policy("held", ["east"], job="later", suspend=True))
            await c.submit_job(_job("later"))
            await eventually(lambda: _reason_has(c, "later", "dispatching suspended by propagationpolicy/default/held"),
                             what="held with its reason")
            assert await _state(c, "later") == jobs_pb2.JOB_STATE_PENDING
            changed = await c.apply_policy(_policy("held", ["east"], job="later"))  # resume dispatching
            assert changed.outcome == "configured" and changed.policy.version == 2
            await eventually(lambda: _state_is(c, "later", jobs_pb2.JOB_STATE_RUNNING), what="released")
            assert await _cluster(c, "later") == "east"

            # A policy naming a cluster that does not exist leaves the job pending ...
            await c.apply_policy(_policy("nowhere", ["mars"], job="moved"))
            await c.submit_job(_job("moved"))
            await eventually(lambda: _pending_reason(c, "moved"), what="moved pending")
            # ... until the policy changes.
            await c.apply_policy(_policy("nowhere", ["west"], job="moved"))
            await eventually(lambda: _state_is(c, "moved", jobs_pb2.JOB_STATE_RUNNING), what="moved running")
            assert await _cluster(c, "moved") == "west"
            await c.delete_policy("PropagationPolicy", "default", "nowhere")
            assert (await c.explain_job("moved")).policy == ""


async def _state_is(c: FederationClient, name: str, state: int) -> bool:
    return await _state(c, name) == state


async def _explained(c: FederationClient, name: str, policy: str) -> bool:
    return (await c.explain_job(name)).policy == policy


async def _reason_has(c: FederationClient, name: str, text: str) -> bool:
    return text in (await c.get_job(name)).reason


async def _pending_reason(c: FederationClient, name: str) -> bool:
    explained = await c.explain_job(name)
    return explained.WhichOneof("detail") == "pending" and bool(explained.pending.round_id)


async def test_an_admin_taint_keeps_jobs_off_a_cluster_unless_their_policy_tolerates_it(migrated_url: str) -> None:
    async with fleet(migrated_url) as f:
        await eventually(lambda: has_snapshot(f, "east") and has_snapshot(f, "west"), what="both snapshots")
        async with f.client(ADMIN) as c:
            tainted = await c.taint_cluster("west", [types_pb2.Taint(key="maintenance", effect="NoSchedule")], [])
            assert [(t.key, t.effect) for t in tainted.admin_taints] == [("maintenance", "NoSchedule")]
            doc = json.loads(_policy("west-ok", ["west"], job="tolerant").document_json)
            doc["spec"]["placement"]["clusterTolerations"] = [{"key": "maintenance", "operator": "Exists"}]
            await c.apply_policy(objects_pb2.Policy(document_json=json.dumps(doc)))
            await c.apply_policy(_policy("west-only", ["west"], job="intolerant"))
            await c.submit_job(_job("tolerant"))
            await c.submit_job(_job("intolerant"))
            await eventually(lambda: _state_is(c, "tolerant", jobs_pb2.JOB_STATE_RUNNING), what="tolerant runs")
            assert await _cluster(c, "tolerant") == "west"
            await eventually(lambda: _pending_reason(c, "intolerant"), what="intolerant considered")
            assert (await c.explain_job("intolerant")).pending.constraint == "taints"
            # The taint survives the agent's snapshots; removing it releases the job.
            await c.taint_cluster("west", [], ["maintenance"])
            await eventually(lambda: _state_is(c, "intolerant", jobs_pb2.JOB_STATE_RUNNING), what="released")
            assert await _cluster(c, "intolerant") == "west"
