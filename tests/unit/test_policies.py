"""Karmada policies as objects: parsing (honoured or refused, naming the field), Karmada's
matching precedence, claims, and PriorityClass resolution."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, Task
from federation.domain.manifests_k8s import parse_priority_class
from federation.domain.manifests_karmada import parse_policy_object
from federation.domain.manifests_volcano import resolve_priority_class
from federation.domain.policies import PolicyObject, PriorityClass
from federation.domain.resources import Resources
from federation.domain.workloads import Workload
from federation.propagation.matching import best_policy, govern, governing_policy, resource_of

JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}


def _doc(name: str, *, kind: str = "PropagationPolicy", namespace: str | None = "default",
         selectors: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None and kind == "PropagationPolicy":
        meta["namespace"] = namespace
    body = {"resourceSelectors": selectors if selectors is not None else [dict(JOB)],
            "placement": {"clusterAffinity": {"clusterNames": [name]}}, **spec}
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": meta, "spec": body}


def _policy(name: str, **kw: Any) -> PolicyObject:
    return parse_policy_object(_doc(name, **kw), "documents[0]")


def _job(name: str = "train", namespace: str = "default", **labels: str) -> Job:
    return Job(name=name, queue="q", namespace=namespace, labels=tuple(sorted(labels.items())),
               tasks=(Task("worker", 1, Resources.parse({"cpu": "1"}, "r")),))


# ---------------------------------------------------------------- precedence

PRECEDENCE = [
    pytest.param([_policy("by-kind"), _policy("by-name", selectors=[{**JOB, "name": "train"}])], "by-name",
                 id="a name match beats a kind-only match"),
    pytest.param([_policy("by-kind"),
                  _policy("by-label", selectors=[{**JOB, "labelSelector": {"matchLabels": {"team": "llm"}}}])],
                 "by-label", id="a label match beats a kind-only match"),
    pytest.param([_policy("by-label", selectors=[{**JOB, "labelSelector": {"matchExpressions": [
                      {"key": "team", "operator": "In", "values": ["llm", "cv"]}]}}]),
                  _policy("by-name", selectors=[{**JOB, "name": "train"}])],
                 "by-name", id="a name match beats a label match"),
    pytest.param([_policy("by-name", selectors=[{**JOB, "name": "train"}]), _policy("urgent", priority=1)],
                 "urgent", id="explicit priority beats the implicit one"),
    pytest.param([_policy("b"), _policy("a")], "a", id="a tie goes to the alphabetically first name"),
    pytest.param([_policy("cluster-name", kind="ClusterPropagationPolicy", selectors=[{**JOB, "name": "train"}],
                          priority=100), _policy("namespaced")],
                 "namespaced", id="any namespaced policy beats a cluster-wide one"),
    pytest.param([_policy("cluster-name", kind="ClusterPropagationPolicy", selectors=[{**JOB, "name": "train"}]),
                  _policy("elsewhere", namespace="other")],
                 "cluster-name", id="a policy of another namespace never selects the job"),
    pytest.param([_policy("no-match", selectors=[{**JOB, "labelSelector": {"matchExpressions": [
                      {"key": "team", "operator": "NotIn", "values": ["llm"]}]}}])],
                 None, id="NotIn excludes the job"),
    pytest.param([_policy("name-wins", selectors=[{**JOB, "name": "train",
                                                   "labelSelector": {"matchLabels": {"team": "cv"}}}])],
                 "name-wins", id="a name set ignores the label selector, as Karmada does"),
    pytest.param([_policy("other-ns", kind="ClusterPropagationPolicy", selectors=[{**JOB, "namespace": "other"}])],
                 None, id="a selector's namespace must be the job's"),
    pytest.param([_policy("deploys", selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}])], None,
                 id="a selector for another kind does not match a Volcano Job"),
]


@pytest.mark.parametrize(("policies", "expected"), PRECEDENCE)
def test_karmada_precedence_picks_the_governing_policy(policies: list[PolicyObject], expected: str | None) -> None:
    best = best_policy(resource_of(_job(team="llm")), policies)
    assert (best.name if best is not None else None) == expected


def test_running_jobs_keep_their_claim_unless_a_higher_policy_preempts() -> None:
    old = _policy("old", priority=1)
    newer = _policy("newer", priority=5)
    grab = _policy("grab", priority=9, preemption="Always", selectors=[{**JOB, "name": "train"}])
    w = resource_of(_job())
    assert governing_policy(w, [old, newer], old.ref, holds_capacity=True) == old
    assert governing_policy(w, [old, newer], old.ref, holds_capacity=False) == newer  # pending: best now
    assert governing_policy(w, [old, newer, grab], old.ref, holds_capacity=True) == grab
    assert governing_policy(w, [newer], old.ref, holds_capacity=True) == newer  # claim's policy deleted


def test_govern_applies_the_placement_and_holds_suspended_pending_jobs() -> None:
    held = _policy("held", suspension={"dispatching": True})
    ruled = govern(_job(), [held], None, holds_capacity=False)
    assert ruled.suspended and ruled.ref == held.ref and ruled.claim_changed
    assert ruled.job.propagation == held.placement
    running = govern(_job(), [held], held.ref, holds_capacity=True)
    assert not running.suspended and not running.claim_changed


# ---------------------------------------------------------------- honoured or refused

REFUSED = [
    pytest.param({"placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}},
                 "documents[0].spec.placement.replicaScheduling.replicaSchedulingType", "Duplicated not supported",
                 id="Duplicated would run the gang in every cluster"),
    pytest.param({"placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2}]}},
                 "documents[0].spec.placement.spreadConstraints[0].minGroups", "exactly one cluster",
                 id="a spread over two clusters cannot hold one gang"),
    pytest.param({"placement": {"replicaScheduling": {"weightPreference": {"dynamicWeight": "AvailableReplicas"}}}},
                 "documents[0].spec.placement.replicaScheduling.weightPreference.dynamicWeight", "not supported",
                 id="dynamic weights divide replicas"),
    pytest.param({"placement": {"clusterAffinity": {"fieldSelector": {"matchExpressions": []}}}},
                 "documents[0].spec.placement.clusterAffinity.fieldSelector", "not supported", id="fieldSelector"),
    pytest.param({"placement": {"workloadAffinity": {}}}, "documents[0].spec.placement.workloadAffinity",
                 "not supported", id="workloadAffinity"),
    pytest.param({"failover": {"application": {}}}, "documents[0].spec.failover.application", "not supported",
                 id="application failover"),
    pytest.param({"propagateDeps": True}, "documents[0].spec.propagateDeps", "not supported", id="propagateDeps"),
    pytest.param({"suspension": {"dispatchingOnClusters": {}}}, "documents[0].spec.suspension.dispatchingOnClusters",
                 "not supported", id="per-cluster suspension"),
    pytest.param({"schedulerName": "other"}, "documents[0].spec.schedulerName", "not supported", id="scheduler"),
    pytest.param({"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}]},
                 "documents[0].spec.resourceSelectors[0].kind", "not supported", id="queues are not propagated"),
    pytest.param({"preemption": "Sometimes"}, "documents[0].spec.preemption", "Never or Always", id="preemption"),
    pytest.param({"resourceSelectors": []}, "documents[0].spec.resourceSelectors", "at least one",
                 id="no selector"),
    pytest.param({"placement": {"clusterAffinity": {"labelSelector": {"matchExpressions": [
        {"key": "zone", "operator": "In"}]}}}},
        "documents[0].spec.placement.clusterAffinity.labelSelector.matchExpressions[0].values", "must not be empty",
        id="In needs values"),
    # Karmada's policy webhook (pkg/util/validation/validation.go) refuses these; we used to
    # accept them: the first selected nothing, the second could seize any Job of the namespace.
    pytest.param({"resourceSelectors": [dict(JOB), {**JOB, "namespace": "other"}]},
                 "documents[0].spec.resourceSelectors[1].namespace", "selects only in its own namespace",
                 id="a PropagationPolicy's selector naming another namespace"),
    pytest.param({"resourceSelectors": [{**JOB, "labelSelector": {"matchLabels": {"team name": "llm"}}}]},
                 "documents[0].spec.resourceSelectors[0].labelSelector.matchLabels['team name']",
                 "not a valid label key", id="a label key no Job can carry"),
    pytest.param({"preemption": "Always", "resourceSelectors": [{**JOB, "name": "train"}, dict(JOB)]},
                 "documents[0].spec.resourceSelectors[1].name", "required when spec.preemption is Always",
                 id="preemption Always with a selector naming no workload"),
]


@pytest.mark.parametrize(("spec", "path", "rule"), REFUSED)
def test_fields_a_gang_cannot_honour_are_refused_naming_the_field(spec: dict[str, Any], path: str, rule: str) -> None:
    doc = _doc("p")
    doc["spec"].update(spec)
    with pytest.raises(InvalidInput) as info:
        parse_policy_object(doc, "documents[0]")
    assert info.value.path == path and rule in info.value.rule


@pytest.mark.parametrize(("meta", "path"), [
    pytest.param({"name": "Train_Policy"}, "documents[0].metadata.name", id="a name Kubernetes would refuse"),
    pytest.param({"name": "p" * 254}, "documents[0].metadata.name", id="a name over 253 characters"),
    pytest.param({"name": "p", "namespace": "Team A"}, "documents[0].metadata.namespace",
                 id="a namespace that is no DNS label"),
])
def test_policy_names_kubernetes_would_refuse_are_refused(meta: dict[str, str], path: str) -> None:
    doc = _doc("p")
    doc["metadata"] = meta
    with pytest.raises(InvalidInput) as info:
        parse_policy_object(doc, "documents[0]")
    assert info.value.path == path


def test_a_cluster_policy_may_select_in_any_namespace() -> None:
    policy = _policy("anywhere", kind="ClusterPropagationPolicy", selectors=[{**JOB, "namespace": "other"}])
    assert best_policy(resource_of(_job(namespace="other")), [policy]) == policy


def test_a_claim_goes_when_its_policy_no_longer_selects_the_job() -> None:
    """Karmada drops the claim of a workload its policy was changed not to select
    (pkg/detector/policy.go); the job then follows the best policy of the moment."""
    w = resource_of(_job())
    changed = _policy("old", selectors=[{**JOB, "name": "another-job"}])
    fallback = _policy("fallback")
    assert governing_policy(w, [changed, fallback], changed.ref, holds_capacity=True) == fallback
    assert governing_policy(w, [changed], changed.ref, holds_capacity=True) is None
    ruled = govern(_job(), [changed], changed.ref, holds_capacity=True)
    assert ruled.ref is None and ruled.claim_changed


def test_honoured_fields_reach_the_placement() -> None:
    doc = yaml.safe_load("""
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: gpu}
spec:
  resourceSelectors: [{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: train}]
  priority: 7
  preemption: Always
  placement:
    clusterAffinity:
      labelSelector:
        matchExpressions: [{key: location, operator: In, values: [us]}]
    clusterTolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [a]}, weight: 1}
          - {targetCluster: {clusterNames: [b]}, weight: 2}
""")
    p = parse_policy_object(doc, "documents[0]")
    assert (p.kind, p.namespace, p.priority, p.preemption) == ("ClusterPropagationPolicy", "", 7, "Always")
    affinity = p.placement.cluster_affinity
    assert affinity is not None and affinity.matches("x", {"location": "us"}) and not affinity.matches("x", {})
    assert p.placement.weighted_clusters() == {"a": 1, "b": 2}
    assert p.placement.cluster_tolerations[0].key == "dedicated"


# ---------------------------------------------------------------- priority classes

def test_priority_classes_resolve_applied_first_then_built_in_then_the_global_default() -> None:
    applied = {"high-priority": PriorityClass("high-priority", 1_000_000),
               "everyone": PriorityClass("everyone", 50, global_default=True)}
    assert resolve_priority_class("high-priority", applied) == (1_000_000, "high-priority")  # overrides built-in
    assert resolve_priority_class("normal", applied) == (1000, "normal")
    assert resolve_priority_class("", applied) == (50, "everyone")
    assert resolve_priority_class("", {}) == (0, "")
    with pytest.raises(InvalidInput, match="priority class 'nope' not found"):
        resolve_priority_class("nope", applied)


@pytest.mark.parametrize(("doc", "path"), [
    pytest.param({"metadata": {"name": "x"}}, "documents[0].value", id="value is required"),
    pytest.param({"metadata": {"name": "x"}, "value": 2_000_000_000}, "documents[0].value", id="system range"),
    pytest.param({"metadata": {"name": "x"}, "value": 1, "preemptionPolicy": "Sometimes"},
                 "documents[0].preemptionPolicy", id="preemption policy"),
    pytest.param({"metadata": {"name": "x"}, "value": 1, "valu": 2}, "documents[0].valu", id="a typo"),
])
def test_bad_priority_classes_are_refused(doc: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **doc}, "documents[0]")
    assert info.value.path == path


# ---------------------------------------------------------------- admin cluster taints

def _taint_request(add: list[tuple[str, str, str]], remove: list[str]) -> Any:
    from federation.v1 import clusters_pb2, types_pb2

    return clusters_pb2.TaintClusterRequest(name="west", remove=remove,
                                            add=[types_pb2.Taint(key=k, value=v, effect=e) for k, v, e in add])


def test_admin_taints_follow_kubectl_taint_semantics() -> None:
    from federation.domain.nodes import Taint
    from federation.service.clusters import taints_after

    current = (Taint("a", "1", "NoSchedule"), Taint("b", "", "PreferNoSchedule"))
    assert taints_after(current, _taint_request([("a", "2", "NoSchedule")], []), 5.0) == (
        Taint("b", "", "PreferNoSchedule"), Taint("a", "2", "NoSchedule"))  # same key+effect replaced
    assert taints_after(current, _taint_request([], ["a"]), 5.0) == (Taint("b", "", "PreferNoSchedule"),)
    assert taints_after(current, _taint_request([], ["b:PreferNoSchedule"]), 5.0) == (Taint("a", "1", "NoSchedule"),)


def test_an_admin_noexecute_taint_records_when_it_was_put_on_and_keeps_it_when_set_again() -> None:
    from federation.domain.nodes import Taint
    from federation.service.clusters import taints_after

    [first] = taints_after((), _taint_request([("drain", "", "NoExecute")], []), 100.0)
    assert first == Taint("drain", "", "NoExecute", time_added=100.0)
    assert taints_after((first,), _taint_request([("drain", "", "NoExecute")], []), 200.0) == (first,)
    assert taints_after((first,), _taint_request([("drain", "v2", "NoExecute")], []), 200.0) == (
        Taint("drain", "v2", "NoExecute", time_added=200.0),)  # a new value is a new taint


@pytest.mark.parametrize(("add", "remove", "path"), [
    pytest.param([("x", "", "NoWay")], [], "add[0].effect", id="an unknown effect"),
    pytest.param([("", "", "NoSchedule")], [], "add[0].key", id="a taint needs a key"),
    pytest.param([], ["ghost"], "remove[0]", id="removing what is not there"),
])
def test_bad_admin_taints_are_refused(add: list[tuple[str, str, str]], remove: list[str], path: str) -> None:
    from federation.service.clusters import taints_after

    with pytest.raises(InvalidInput) as info:
        taints_after((), _taint_request(add, remove), 0.0)
    assert info.value.path == path


def test_static_weights_restrict_and_rank_clusters_heaviest_first() -> None:
    doc = _doc("w")
    doc["spec"]["placement"] = {"replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": ["small"]}, "weight": 1},
            {"targetCluster": {"clusterNames": ["big", "bigger"]}, "weight": 3}]}}}
    groups = parse_policy_object(doc, "documents[0]").placement.affinity_groups()
    assert [g.cluster_names if g is not None else None for g in groups] == [("big", "bigger"), ("small",)]


def _deployment(name: str = "serve") -> Job:
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": {"app": name}},
            "spec": {"replicas": 2}}
    return Job(name=name, queue="q", labels=(("app", name),), workload=Workload("Deployment", json.dumps(body)),
               tasks=(Task("default0", 2, Resources.parse({"cpu": "1"}, "r")),))


def test_a_deployment_job_is_selected_by_deployment_selectors_and_not_by_volcano_job_ones() -> None:
    by_job_kind = _policy("volcano-jobs")
    by_deploy_name = _policy("serve-deploy",
                             selectors=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": "serve"}])
    by_sts_kind = _policy("stateful", selectors=[{"apiVersion": "apps/v1", "kind": "StatefulSet"}])
    assert resource_of(_deployment()).kind == "Deployment"
    best = best_policy(resource_of(_deployment()), [by_job_kind, by_deploy_name, by_sts_kind])
    assert best is not None and best.name == "serve-deploy"
    assert best_policy(resource_of(_deployment()), [by_job_kind, by_sts_kind]) is None
