"""A policy is readable by every tenant, but the jobs it governs are not: GetPolicy and
ListPolicies list (and so count) only the jobs of queues the caller may use, the rule
ListJobs applies; admins still see every job. Real gRPC over SQLite and PostgreSQL.

Found by review: tenant vision saw nlp's job names in a cluster-wide policy's job list.
"""

from __future__ import annotations

import json

from servicekit import ADMIN, NLP, VISION, client, queue, running, secured, spec

from federation.store import Store
from federation.v1 import objects_pb2

_REF = "clusterpropagationpolicy/everywhere"


def _everywhere() -> objects_pb2.Policy:
    """A ClusterPropagationPolicy selecting every Volcano Job, whoever submitted it."""
    doc = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
           "metadata": {"name": "everywhere"},
           "spec": {"resourceSelectors": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}]}}
    return objects_pb2.Policy(document_json=json.dumps(doc))


async def test_a_tenant_sees_only_its_own_jobs_under_a_shared_policy(store: Store) -> None:
    async with running(store, secured()) as srv, \
            client(srv, ADMIN) as admin, client(srv, NLP) as nlp, client(srv, VISION) as vision:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await admin.create_queue(queue("vision-q", "vision"))
        await admin.create_queue(queue("open-q"))  # no owners: every tenant may use it
        await admin.apply_policy(_everywhere())
        await nlp.submit_job(spec("nlp-1", "nlp-q"))
        await nlp.submit_job(spec("nlp-2", "nlp-q"))
        await vision.submit_job(spec("vision-1", "vision-q"))
        await nlp.submit_job(spec("shared-1", "open-q"))
        # what the planning round records (no control loop here)
        store.policies.set_claims(dict.fromkeys(("nlp-1", "nlp-2", "vision-1", "shared-1"), _REF))

        expected = {
            admin: ["nlp-1", "nlp-2", "shared-1", "vision-1"],
            nlp: ["nlp-1", "nlp-2", "shared-1"],
            vision: ["shared-1", "vision-1"],
        }
        for c, jobs in expected.items():
            assert list((await c.get_policy("ClusterPropagationPolicy", "", "everywhere")).jobs) == jobs
            [listed] = await c.list_policies()
            assert list(listed.jobs) == jobs


async def test_a_policy_lists_the_jobs_it_governs_now_not_every_job_it_ever_governed(store: Store) -> None:
    """``Policy.jobs`` is "jobs this policy governs now": a finished job's claim stays on
    record (ExplainJob still names its policy), but listing it made every policy's answer
    grow with all the jobs it ever governed, until it no longer fit in a message."""
    async with running(store, secured()) as srv, client(srv, ADMIN) as admin, client(srv, NLP) as nlp:
        await admin.create_queue(queue("nlp-q", "nlp"))
        await admin.apply_policy(_everywhere())
        await nlp.submit_job(spec("nlp-1", "nlp-q"))
        await nlp.submit_job(spec("nlp-done", "nlp-q"))
        store.policies.set_claims(dict.fromkeys(("nlp-1", "nlp-done"), _REF))
        await nlp.cancel_job("nlp-done")
        for c in (admin, nlp):
            assert list((await c.get_policy("ClusterPropagationPolicy", "", "everywhere")).jobs) == ["nlp-1"]
            [listed] = await c.list_policies()
            assert list(listed.jobs) == ["nlp-1"]
        assert (await nlp.explain_job("nlp-done")).policy == _REF  # the record stays
