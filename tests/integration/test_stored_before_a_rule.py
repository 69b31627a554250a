"""A job or policy stored by an earlier release that breaks a rule added since is read
as it was accepted, never failing a round, a listing or the job itself (the store keeps
what it stored; the new rule applies to new submissions)."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from sqlalchemy import update

from federation.control.snapshot import load
from federation.domain import Job, Queue, Resources, Task
from federation.domain.manifests_karmada import parse_policy_object
from federation.store import Store
from federation.store.codec import canonical_json, digest_of
from federation.store.models import JobRow, PolicyRow

OLD_TEMPLATE = {"spec": {"nodeName": "n1", "nodeSelector": {"gpu": True},
                         "containers": [{"name": "c", "image": "x"}]}}
OLD_PROPAGATION = {"name": "p", "spread_constraints": [{"spread_by_field": "region", "max_groups": 1}]}


def _store_as_an_earlier_release(store: Store, name: str) -> None:
    """Submit a valid job, then rewrite its stored spec as an earlier release accepted it."""
    store.jobs.submit(Job(name, "research", (Task("w", 1, Resources({"cpu": 1000})),)))
    with store.db.write() as session:
        spec = dict(session.get(JobRow, name).spec)  # type: ignore[union-attr]  # submitted just above
        spec["tasks"] = [{**spec["tasks"][0], "template_json": canonical_json(OLD_TEMPLATE)}]
        spec["propagation"] = OLD_PROPAGATION
        session.execute(update(JobRow).where(JobRow.name == name).values(spec=spec, spec_digest=digest_of(spec)))


def test_a_job_stored_before_a_rule_is_read_as_stored(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    store.queues.create(Queue("research"))
    name = f"old-{uuid.uuid4().hex[:8]}"  # a spec of its own: decoded specs are cached by digest
    _store_as_an_earlier_release(store, name)
    with caplog.at_level(logging.WARNING, logger="federation.store.lifecycle"):
        record = store.jobs.get(name)
    assert "breaks a rule of this release" in caplog.text
    assert json.loads(record.job.tasks[0].template_json)["spec"]["nodeName"] == "n1"
    assert record.job.propagation is not None and record.job.propagation.spread_constraints[0].spread_by_field \
        == "region"
    assert record.job.tasks[0].constraints.selector == (("gpu", "True"),)  # planned as it was then
    planning = load(store, 0.0)  # the round reads it and goes on
    assert [p.job.name for p in planning.snapshot.pending] == [name]


def test_a_policy_stored_before_a_rule_is_left_out_of_rounds_and_logged(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    store.queues.create(Queue("research"))
    document: dict[str, Any] = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
                "metadata": {"name": "everything"},
                "spec": {"resourceSelectors": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}],
                         "placement": {"clusterAffinity": {"clusterNames": ["east"]}}}}
    store.policies.apply(parse_policy_object(document, ""), document)
    old = {**document, "spec": {**document["spec"], "placement": {
        "clusterAffinity": {"clusterNames": ["east"]}, "spreadConstraints": [{"spreadByField": "region"}]}}}
    with store.db.write() as session:
        session.execute(update(PolicyRow).values(document=old))
    with caplog.at_level(logging.ERROR, logger="federation.store.objects"):
        assert store.policies.all() == []
    assert "policy" in caplog.text and "is not applied" in caplog.text


def test_a_policy_stored_before_a_rule_is_still_listed_and_read(store: Store) -> None:
    """An admin must see (to fix or delete) a policy that a later rule leaves out of the
    rounds: reading or listing it used to raise the new rule, so ListPolicies failed whole."""
    document: dict[str, Any] = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                                "metadata": {"name": "labelled", "namespace": "team-a"},
                                "spec": {"resourceSelectors": [{"apiVersion": "batch.volcano.sh/v1alpha1",
                                                                "kind": "Job"}],
                                         "placement": {"clusterAffinity": {"clusterNames": ["east"]}}}}
    store.policies.apply(parse_policy_object(document, ""), document)
    ref = "propagationpolicy/team-a/labelled"
    old = {**document, "spec": {**document["spec"], "preemption": "Always", "placement": {
        "spreadConstraints": [{"spreadByLabel": "zone", "maxGroups": 1}]}}}
    with store.db.write() as session:
        session.execute(update(PolicyRow).where(PolicyRow.ref == ref).values(document=old))
    assert [r.document for r in store.policies.list()] == [old]
    record = store.policies.get(ref)
    assert (record.kind, record.namespace, record.name, record.document) == (
        "PropagationPolicy", "team-a", "labelled", old)
