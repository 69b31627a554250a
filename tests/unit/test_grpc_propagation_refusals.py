"""One rule for both paths: a Karmada placement the YAML path refuses (docs/design/
compatibility.md) is refused over gRPC too, with the same reason, because the refusals
live on the domain objects both paths build (``domain/propagation.py``).

Found by review: ``minGroups`` 2, ``Duplicated``, ``dynamicWeight`` and repeated
``clusterAffinities`` names were accepted by SubmitJob and then ignored by the planner.
"""

from __future__ import annotations

from typing import Any

import pytest

from federation.domain.errors import InvalidInput
from federation.domain.manifests_karmada import parse_policy_object
from federation.v1 import types_pb2 as T
from federation.wire.jobs import propagation_from_proto

_TERM_A = {"affinityName": "a", "clusterNames": ["east"]}

# (YAML placement, the same placement on the wire, YAML path, wire path, rule)
CASES = [
    pytest.param({"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 3}]},
                 T.PropagationPolicy(spread_constraints=[T.SpreadConstraint(spread_by_field="cluster", min_groups=2,
                                                                            max_groups=3)]),
                 "spreadConstraints[0].minGroups", "spreadConstraints[0].minGroups", "exactly one cluster",
                 id="minGroups 2"),
    pytest.param({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
                 T.PropagationPolicy(replica_scheduling=T.ReplicaScheduling(type="Duplicated")),
                 "replicaScheduling.replicaSchedulingType", "replicaScheduling.replicaSchedulingType",
                 "Duplicated not supported", id="Duplicated"),
    pytest.param({"replicaScheduling": {"replicaDivisionPreference": "Weighted",
                                        "weightPreference": {"dynamicWeight": "AvailableReplicas"}}},
                 T.PropagationPolicy(replica_scheduling=T.ReplicaScheduling(
                     type="Divided", division_preference="Weighted", dynamic_weight="AvailableReplicas")),
                 "replicaScheduling.weightPreference.dynamicWeight",
                 "replicaScheduling.weightPreference.dynamicWeight", "not supported", id="dynamicWeight"),
    pytest.param({"clusterAffinities": [_TERM_A, {**_TERM_A, "clusterNames": ["west"]}]},
                 T.PropagationPolicy(cluster_affinities=[
                     T.ClusterAffinityTerm(name="a", affinity=T.ClusterAffinity(cluster_names=["east"])),
                     T.ClusterAffinityTerm(name="a", affinity=T.ClusterAffinity(cluster_names=["west"]))]),
                 "clusterAffinities[1].affinityName", "clusterAffinities[1].affinityName", "duplicate affinityName",
                 id="a repeated affinity name"),
    pytest.param({"clusterAffinities": [{"clusterNames": ["east"]}]},
                 T.PropagationPolicy(cluster_affinities=[
                     T.ClusterAffinityTerm(affinity=T.ClusterAffinity(cluster_names=["east"]))]),
                 "clusterAffinities[0].affinityName", "clusterAffinities[0].affinityName", "is required",
                 id="an affinity term without a name"),
    pytest.param({"clusterAffinity": {"labelSelector": {"matchExpressions": [
                     {"key": "k", "operator": "Like", "values": ["v"]}]}}},
                 T.PropagationPolicy(cluster_affinity=T.ClusterAffinity(
                     match_expressions=[T.LabelRequirement(key="k", operator="Like", values=["v"])])),
                 "clusterAffinity.labelSelector.matchExpressions[0].operator",
                 "clusterAffinity.labelSelector.matchExpressions[0].operator", "must be one of",
                 id="a bad operator is rooted once on the wire"),
    # Refused by Karmada and accepted here before (pkg/util/validation/validation.go,
    # pkg/scheduler/core/spreadconstraint/select_clusters.go, the CRD's affinityName bounds).
    pytest.param({"spreadConstraints": [{"spreadByLabel": "zone", "minGroups": 1, "maxGroups": 1}]},
                 T.PropagationPolicy(spread_constraints=[T.SpreadConstraint(spread_by_label="zone", min_groups=1,
                                                                            max_groups=1)]),
                 "spreadConstraints[0].spreadByLabel", "spreadConstraints[0].spreadByLabel",
                 "spreads only by cluster or region", id="a spread by label Karmada never schedules"),
    pytest.param({"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1},
                                        {"maxGroups": 1}]},
                 T.PropagationPolicy(spread_constraints=[T.SpreadConstraint(spread_by_field="cluster", max_groups=1),
                                                         T.SpreadConstraint(max_groups=1)]),
                 "spreadConstraints[1].spreadByField", "spreadConstraints[1].spreadByField",
                 "at most one spread constraint per field", id="two cluster spread constraints"),
    pytest.param({"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1}]},
                 T.PropagationPolicy(spread_constraints=[T.SpreadConstraint(spread_by_field="cluster", min_groups=1)]),
                 "spreadConstraints[0].maxGroups", "spreadConstraints[0].maxGroups",
                 "a cluster spread without it is never scheduled", id="a cluster spread without maxGroups"),
    pytest.param({"clusterAffinities": [{**_TERM_A, "affinityName": "primary group"}]},
                 T.PropagationPolicy(cluster_affinities=[
                     T.ClusterAffinityTerm(name="primary group", affinity=T.ClusterAffinity(cluster_names=["east"]))]),
                 "clusterAffinities[0].affinityName", "clusterAffinities[0].affinityName", "not a valid label key",
                 id="an affinity name that is no label key"),
    pytest.param({"clusterAffinities": [{**_TERM_A, "affinityName": "a" * 33}]},
                 T.PropagationPolicy(cluster_affinities=[
                     T.ClusterAffinityTerm(name="a" * 33, affinity=T.ClusterAffinity(cluster_names=["east"]))]),
                 "clusterAffinities[0].affinityName", "clusterAffinities[0].affinityName", "at most 32 characters",
                 id="an affinity name over Karmada's 32 characters"),
]


def _yaml_error(placement: dict[str, Any]) -> InvalidInput:
    doc = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
           "metadata": {"name": "p"},
           "spec": {"resourceSelectors": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}],
                    "placement": placement}}
    with pytest.raises(InvalidInput) as info:
        parse_policy_object(doc, "documents[0]")
    return info.value


def _wire_error(msg: T.PropagationPolicy) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        propagation_from_proto(msg, "spec.propagation")
    return info.value


@pytest.mark.parametrize(("placement", "msg", "yaml_path", "wire_path", "rule"), CASES)
def test_yaml_and_grpc_refuse_the_same_placement_alike(placement: dict[str, Any], msg: T.PropagationPolicy,
                                                       yaml_path: str, wire_path: str, rule: str) -> None:
    from_yaml, from_wire = _yaml_error(placement), _wire_error(msg)
    assert from_yaml.path == f"documents[0].spec.placement.{yaml_path}"
    assert from_wire.path == f"spec.propagation.{wire_path}"
    assert rule in from_yaml.rule and from_yaml.rule == from_wire.rule


def test_what_one_cluster_can_honour_is_still_accepted_over_grpc() -> None:
    policy = propagation_from_proto(T.PropagationPolicy(
        spread_constraints=[T.SpreadConstraint(spread_by_field="cluster", min_groups=1, max_groups=1)],
        replica_scheduling=T.ReplicaScheduling(type="Divided", division_preference="Weighted",
                                               static_weights=[T.StaticClusterWeight(cluster="east", weight=2)]),
        cluster_affinities=[T.ClusterAffinityTerm(name="a", affinity=T.ClusterAffinity(cluster_names=["east"])),
                            T.ClusterAffinityTerm(name="b", affinity=T.ClusterAffinity(cluster_names=["west"]))],
    ), "spec.propagation")
    assert [t.name for t in policy.cluster_affinities] == ["a", "b"]
    assert policy.weighted_clusters() == {"east": 2}


def test_a_statically_weighted_division_ignores_the_spread_as_karmada_does() -> None:
    """Karmada skips spread constraints under a static weight list (select_clusters.go
    ``shouldIgnoreSpreadConstraint``), so a cluster spread without maxGroups is no error there."""
    policy = propagation_from_proto(T.PropagationPolicy(
        spread_constraints=[T.SpreadConstraint(spread_by_field="cluster")],
        replica_scheduling=T.ReplicaScheduling(type="Divided", division_preference="Weighted",
                                               static_weights=[T.StaticClusterWeight(cluster="east", weight=1)]),
    ), "spec.propagation")
    assert policy.weighted_clusters() == {"east": 1}


@pytest.mark.parametrize(("placement", "msg", "path"), [
    pytest.param({"clusterAffinity": {"labelSelector": {"matchExpressions": [
                     {"key": "node role", "operator": "DoesNotExist"}]}}},
                 T.PropagationPolicy(cluster_affinity=T.ClusterAffinity(
                     match_expressions=[T.LabelRequirement(key="node role", operator="DoesNotExist")])),
                 "clusterAffinity.labelSelector.matchExpressions[0].key", id="a key no label can have"),
    pytest.param({"clusterAffinity": {"labelSelector": {"matchExpressions": [
                     {"key": "zone", "operator": "NotIn", "values": ["eu west"]}]}}},
                 T.PropagationPolicy(cluster_affinity=T.ClusterAffinity(
                     match_expressions=[T.LabelRequirement(key="zone", operator="NotIn", values=["eu west"])])),
                 "clusterAffinity.labelSelector.matchExpressions[0].values[0]", id="a value no label can have"),
])
def test_a_selector_karmada_could_never_match_is_refused(placement: dict[str, Any], msg: T.PropagationPolicy,
                                                        path: str) -> None:
    """apimachinery refuses such a requirement, so Karmada's selector matches nothing
    (pkg/util/selector.go); here ``NotIn``/``DoesNotExist`` on it used to match every cluster."""
    assert _yaml_error(placement).path == f"documents[0].spec.placement.{path}"
    assert _wire_error(msg).path == f"spec.propagation.{path}"
