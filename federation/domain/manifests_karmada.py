"""Karmada ``policy.karmada.io/v1alpha1`` (Cluster)PropagationPolicy documents into a
domain ``PropagationPolicy``.

Only ``spec.placement`` decides anything here (see karmada-io/karmada
``pkg/apis/policy/v1alpha1/propagation_types.go``); the other Karmada spec fields are
accepted and ignored because the federation, not Karmada, owns priority, preemption and
failover. Placement fields the federation does not implement (``fieldSelector``,
``matchExpressions``, ``workloadAffinity``) are refused, never silently dropped. The policy
applies to the Job in the same file; ``resourceSelectors``, when given, must select it.
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.domain.errors import InvalidInput
from federation.domain.manifests_fields import check_keys, integer, mapping, sequence, string, string_map, strings
from federation.domain.manifests_volcano import parse_tolerations
from federation.domain.propagation import (
    ClusterAffinity,
    ClusterAffinityTerm,
    PropagationPolicy,
    ReplicaScheduling,
    SpreadConstraint,
)

_SPEC_KEYS = ("resourceSelectors", "placement", "priority", "preemption", "propagateDeps", "schedulerName",
              "failover", "conflictResolution", "activationPreference", "suspension", "dependentOverrides",
              "association", "preserveResourcesOnDeletion", "schedulePriority")
_PLACEMENT_KEYS = ("clusterAffinity", "clusterAffinities", "clusterTolerations", "spreadConstraints",
                   "replicaScheduling")
_AFFINITY_KEYS = ("clusterNames", "labelSelector", "exclude")


def _rooted(path: str, exc: InvalidInput) -> InvalidInput:
    return exc if exc.path.startswith(path) else exc.under(path)


def _affinity(item: Mapping[str, object], path: str, extra: tuple[str, ...] = ()) -> ClusterAffinity:
    check_keys(item, path, (*_AFFINITY_KEYS, *extra), ("fieldSelector",))
    selector = mapping(item.get("labelSelector"), f"{path}.labelSelector")
    check_keys(selector, f"{path}.labelSelector", ("matchLabels",), ("matchExpressions",))
    return ClusterAffinity(
        cluster_names=strings(item.get("clusterNames"), f"{path}.clusterNames"),
        match_labels=string_map(selector.get("matchLabels"), f"{path}.labelSelector.matchLabels"),
        exclude=strings(item.get("exclude"), f"{path}.exclude"),
    )


def _spread(raw: object, path: str) -> SpreadConstraint:
    item = mapping(raw, path)
    check_keys(item, path, ("spreadByField", "spreadByLabel", "minGroups", "maxGroups"))
    by_label = string(item.get("spreadByLabel", ""), f"{path}.spreadByLabel")
    try:
        return SpreadConstraint(
            spread_by_field=string(item.get("spreadByField", "" if by_label else "cluster"), f"{path}.spreadByField"),
            spread_by_label=by_label,
            min_groups=integer(item.get("minGroups", 0), f"{path}.minGroups"),
            max_groups=integer(item.get("maxGroups", 0), f"{path}.maxGroups"),
        )
    except InvalidInput as exc:
        raise _rooted(path, exc) from None


def _replica_scheduling(value: object, path: str) -> ReplicaScheduling:
    item = mapping(value, path)
    check_keys(item, path, ("replicaSchedulingType", "replicaDivisionPreference", "weightPreference"))
    pref = mapping(item.get("weightPreference"), f"{path}.weightPreference")
    check_keys(pref, f"{path}.weightPreference", ("staticWeightList", "dynamicWeight"))
    weights: list[tuple[str, int]] = []
    list_path = f"{path}.weightPreference.staticWeightList"
    for i, raw in enumerate(sequence(pref.get("staticWeightList"), list_path)):
        entry = mapping(raw, f"{list_path}[{i}]")
        check_keys(entry, f"{list_path}[{i}]", ("targetCluster", "weight"))
        target = mapping(entry.get("targetCluster"), f"{list_path}[{i}].targetCluster")
        check_keys(target, f"{list_path}[{i}].targetCluster", ("clusterNames",),
                   ("labelSelector", "fieldSelector", "exclude"))
        names = strings(target.get("clusterNames"), f"{list_path}[{i}].targetCluster.clusterNames")
        if not names:
            raise InvalidInput(f"{list_path}[{i}].targetCluster.clusterNames", "at least one cluster is required")
        weight = integer(entry.get("weight"), f"{list_path}[{i}].weight")
        weights.extend((name, weight) for name in names)
    try:
        return ReplicaScheduling(
            type=string(item.get("replicaSchedulingType", "Divided"), f"{path}.replicaSchedulingType"),
            division_preference=string(item.get("replicaDivisionPreference", "Aggregated"),
                                       f"{path}.replicaDivisionPreference"),
            static_weights=tuple(weights),
            dynamic_weight=string(pref.get("dynamicWeight", ""), f"{path}.weightPreference.dynamicWeight"),
        )
    except InvalidInput as exc:
        raise _rooted(path, exc) from None


def _check_selectors(spec: Mapping[str, object], path: str, job_name: str, job_namespace: str) -> None:
    if "resourceSelectors" not in spec:
        return
    sel_path = f"{path}.spec.resourceSelectors"
    for i, raw in enumerate(sequence(spec["resourceSelectors"], sel_path)):
        sel = mapping(raw, f"{sel_path}[{i}]")
        if (sel.get("apiVersion", "batch.volcano.sh/v1alpha1") == "batch.volcano.sh/v1alpha1"
                and sel.get("kind", "Job") == "Job"
                and sel.get("name", job_name) == job_name
                and sel.get("namespace", job_namespace) == job_namespace):
            return
    raise InvalidInput(sel_path, f"does not select the Job {job_namespace}/{job_name} in this file")


def parse_propagation(doc: Mapping[str, object], path: str, job_name: str, job_namespace: str) -> PropagationPolicy:
    """A (Cluster)PropagationPolicy document (``path`` is ``documents[i]``) for the file's Job."""
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    spec = mapping(doc.get("spec"), f"{path}.spec")
    check_keys(spec, f"{path}.spec", _SPEC_KEYS)
    if doc.get("kind") == "PropagationPolicy":
        namespace = string(meta.get("namespace", "default"), f"{path}.metadata.namespace")
        if namespace != job_namespace:
            raise InvalidInput(f"{path}.metadata.namespace",
                               f"a PropagationPolicy in {namespace!r} cannot select a Job in {job_namespace!r}")
    _check_selectors(spec, path, job_name, job_namespace)
    pp = f"{path}.spec.placement"
    placement = mapping(spec.get("placement"), pp)
    check_keys(placement, pp, _PLACEMENT_KEYS, ("workloadAffinity",))
    affinity = None
    if "clusterAffinity" in placement:
        affinity = _affinity(mapping(placement["clusterAffinity"], f"{pp}.clusterAffinity"), f"{pp}.clusterAffinity")
    terms: list[ClusterAffinityTerm] = []
    for i, raw in enumerate(sequence(placement.get("clusterAffinities"), f"{pp}.clusterAffinities")):
        where = f"{pp}.clusterAffinities[{i}]"
        item = mapping(raw, where)
        name = string(item.get("affinityName", ""), f"{where}.affinityName")
        if not name:
            raise InvalidInput(f"{where}.affinityName", "is required")
        terms.append(ClusterAffinityTerm(name, _affinity(item, where, ("affinityName",))))
    scheduling = placement.get("replicaScheduling")
    try:
        return PropagationPolicy(
            name=string(meta.get("name", ""), f"{path}.metadata.name"),
            cluster_affinity=affinity,
            cluster_affinities=tuple(terms),
            cluster_tolerations=parse_tolerations(placement.get("clusterTolerations"), f"{pp}.clusterTolerations"),
            spread_constraints=tuple(
                _spread(raw, f"{pp}.spreadConstraints[{i}]")
                for i, raw in enumerate(sequence(placement.get("spreadConstraints"), f"{pp}.spreadConstraints"))
            ),
            replica_scheduling=_replica_scheduling(scheduling, f"{pp}.replicaScheduling")
            if scheduling is not None else None,
        )
    except InvalidInput as exc:
        raise _rooted(f"{path}.spec", exc) from None
