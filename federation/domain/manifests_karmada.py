"""Karmada ``policy.karmada.io/v1alpha1`` (Cluster)PropagationPolicy documents.

``parse_policy_object`` reads a policy applied as an object (``fedctl apply``);
``parse_propagation`` reads the inline policy ``fedctl submit -f`` accepts beside one Job.
Field meanings follow karmada-io/karmada ``pkg/apis/policy/v1alpha1/propagation_types.go``.
Each field is honoured or refused naming it ("… not supported") — the decisions and
reasons are tabled in docs/design/compatibility.md. In short, a gang lives in exactly one
cluster, so what would need a gang in several clusters is refused: ``Duplicated``,
``spreadConstraints`` with ``minGroups`` > 1, ``dynamicWeight`` (a division of replicas).
Those rules live on the domain objects (``domain/propagation.py``), so a policy sent over
gRPC is refused alike; this module only reads the document and names the YAML paths.
``Divided``/``Aggregated`` means "as few clusters as possible", which one cluster is;
``staticWeightList`` restricts the job to the listed clusters and ranks them.
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.domain.errors import InvalidInput
from federation.domain.manifests_fields import (
    INT64,
    boolean,
    check_keys,
    integer,
    mapping,
    sequence,
    string,
    string_map,
    strings,
)
from federation.domain.manifests_volcano import parse_tolerations
from federation.domain.policies import CLUSTER_WIDE, NAMESPACED, PolicyObject, ResourceSelector
from federation.domain.propagation import (
    ClusterAffinity,
    ClusterAffinityTerm,
    PropagationPolicy,
    ReplicaScheduling,
    SpreadConstraint,
)
from federation.domain.selectors import LabelRequirement, LabelSelector

# Workload kinds a policy may select: what the federation places.
SELECTABLE = {("batch.volcano.sh/v1alpha1", "Job"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")}
_SPEC_KEYS = ("resourceSelectors", "placement", "priority", "preemption", "propagateDeps", "schedulerName",
              "suspension", "association")
_SPEC_UNSUPPORTED = ("failover", "conflictResolution", "activationPreference", "dependentOverrides",
                     "preserveResourcesOnDeletion", "schedulePriority")
_PLACEMENT_KEYS = ("clusterAffinity", "clusterAffinities", "clusterTolerations", "spreadConstraints",
                   "replicaScheduling")
_AFFINITY_KEYS = ("clusterNames", "labelSelector", "exclude")


def _rooted(path: str, exc: InvalidInput) -> InvalidInput:
    return exc if exc.path.startswith(path) else exc.under(path)


def label_selector(value: object, path: str) -> LabelSelector:
    """A Kubernetes LabelSelector (matchLabels and matchExpressions)."""
    raw = mapping(value, path)
    check_keys(raw, path, ("matchLabels", "matchExpressions"))
    requirements: list[LabelRequirement] = []
    for i, item in enumerate(sequence(raw.get("matchExpressions"), f"{path}.matchExpressions")):
        where = f"{path}.matchExpressions[{i}]"
        expr = mapping(item, where)
        check_keys(expr, where, ("key", "operator", "values"))
        try:
            requirements.append(LabelRequirement(key=string(expr.get("key", ""), f"{where}.key"),
                                                 operator=string(expr.get("operator", ""), f"{where}.operator"),
                                                 values=strings(expr.get("values"), f"{where}.values")))
        except InvalidInput as exc:
            raise _rooted(where, exc) from None
    match_labels = string_map(raw.get("matchLabels"), f"{path}.matchLabels")
    try:
        return LabelSelector(tuple(match_labels.items()), tuple(requirements))
    except InvalidInput as exc:
        raise _rooted(path, exc) from None


def _affinity(item: Mapping[str, object], path: str, extra: tuple[str, ...] = ()) -> ClusterAffinity:
    check_keys(item, path, (*_AFFINITY_KEYS, *extra), ("fieldSelector", "overflowAffinities"))
    selector = label_selector(item.get("labelSelector"), f"{path}.labelSelector")
    return ClusterAffinity(
        cluster_names=strings(item.get("clusterNames"), f"{path}.clusterNames"),
        match_labels=dict(selector.match_labels),
        exclude=strings(item.get("exclude"), f"{path}.exclude"),
        match_expressions=selector.match_expressions,
    )


def _spread(raw: object, path: str) -> SpreadConstraint:
    item = mapping(raw, path)
    check_keys(item, path, ("spreadByField", "spreadByLabel", "minGroups", "maxGroups"))
    by_label = string(item.get("spreadByLabel", ""), f"{path}.spreadByLabel")
    try:
        spread = SpreadConstraint(
            spread_by_field=string(item.get("spreadByField", "" if by_label else "cluster"), f"{path}.spreadByField"),
            spread_by_label=by_label,
            min_groups=integer(item.get("minGroups", 0), f"{path}.minGroups"),
            max_groups=integer(item.get("maxGroups", 0), f"{path}.maxGroups"),
        )
    except InvalidInput as exc:
        raise _rooted(path, exc) from None
    return spread


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
        weight = integer(entry.get("weight"), f"{list_path}[{i}].weight", wire=INT64)
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


def parse_placement(spec: Mapping[str, object], path: str, name: str) -> PropagationPolicy:
    """``spec.placement`` (``path`` is the spec's path) into the placement a job carries."""
    pp = f"{path}.placement"
    placement = mapping(spec.get("placement"), pp)
    check_keys(placement, pp, _PLACEMENT_KEYS, ("workloadAffinity",))
    affinity = None
    if "clusterAffinity" in placement:
        affinity = _affinity(mapping(placement["clusterAffinity"], f"{pp}.clusterAffinity"), f"{pp}.clusterAffinity")
    terms: list[ClusterAffinityTerm] = []
    for i, raw in enumerate(sequence(placement.get("clusterAffinities"), f"{pp}.clusterAffinities")):
        where = f"{pp}.clusterAffinities[{i}]"
        item = mapping(raw, where)
        term = string(item.get("affinityName", ""), f"{where}.affinityName")
        try:
            terms.append(ClusterAffinityTerm(term, _affinity(item, where, ("affinityName",))))
        except InvalidInput as exc:
            raise _rooted(where, exc) from None
    scheduling = placement.get("replicaScheduling")
    try:
        return PropagationPolicy(
            name=name,
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
        raise _rooted(path, exc) from None


def _selector(raw: object, path: str) -> ResourceSelector:
    item = mapping(raw, path)
    check_keys(item, path, ("apiVersion", "kind", "name", "namespace", "labelSelector"))
    api = string(item.get("apiVersion", ""), f"{path}.apiVersion")
    kind = string(item.get("kind", ""), f"{path}.kind")
    if (api, kind) not in SELECTABLE:
        known = ", ".join(f"{k} ({a})" for a, k in sorted(SELECTABLE))
        raise InvalidInput(f"{path}.kind", f"{kind} ({api}) not supported: the federation places only {known}")
    selector = label_selector(item["labelSelector"], f"{path}.labelSelector") if "labelSelector" in item else None
    return ResourceSelector(api_version=api, kind=kind, name=string(item.get("name", ""), f"{path}.name"),
                            namespace=string(item.get("namespace", ""), f"{path}.namespace"),
                            label_selector=selector)


def _check_spec_scalars(spec: Mapping[str, object], sp: str) -> tuple[str, bool]:
    """The spec fields outside placement: (preemption, suspend dispatching); refusals named."""
    if spec.get("propagateDeps", False) is not False:
        boolean(spec["propagateDeps"], f"{sp}.propagateDeps")
        raise InvalidInput(f"{sp}.propagateDeps", "true not supported: the federation does not propagate the "
                           "ConfigMaps, Secrets or claims a job refers to; create them in each member cluster")
    if spec.get("association", False) is not False:
        raise InvalidInput(f"{sp}.association", "true not supported (deprecated in Karmada)")
    scheduler = string(spec.get("schedulerName", "default-scheduler"), f"{sp}.schedulerName")
    if scheduler not in ("default-scheduler", "default"):
        raise InvalidInput(f"{sp}.schedulerName", f"{scheduler!r} not supported: the federation's planner places "
                           "every job")
    suspension = mapping(spec.get("suspension"), f"{sp}.suspension")
    check_keys(suspension, f"{sp}.suspension", ("dispatching",), ("dispatchingOnClusters",))
    suspend = boolean(suspension.get("dispatching", False), f"{sp}.suspension.dispatching")
    return string(spec.get("preemption", "Never"), f"{sp}.preemption"), suspend


_FAILOVER_REASONS = {
    "application": "application failover (Karmada moves a workload whose pods stay unhealthy past "
                   "decisionConditions.tolerationSeconds) is not implemented: a job's restart policies act "
                   "inside its cluster, and only a cluster's NoExecute taints move it",
    "cluster": "cluster failover here follows the cluster's NoExecute taints and placement.clusterTolerations"
               "[].tolerationSeconds (the service's failover grace by default); a per-policy purgeMode or "
               "statePreservation is not implemented",
}


def _refuse_failover(spec: Mapping[str, object], path: str) -> None:
    """Karmada's ``spec.failover``, refused naming the behaviour (docs/design/compatibility.md)."""
    if "failover" not in spec:
        return
    failover = mapping(spec["failover"], f"{path}.failover")
    for key in sorted(failover):
        reason = _FAILOVER_REASONS.get(key, "not a Karmada failover behaviour")
        raise InvalidInput(f"{path}.failover.{key}", f"not supported: {reason}")
    raise InvalidInput(f"{path}.failover", "not supported: an empty failover behaviour means nothing; leave it out")


def parse_policy_object(doc: Mapping[str, object], path: str) -> PolicyObject:
    """A (Cluster)PropagationPolicy applied as an object (``path`` is ``documents[i]``)."""
    kind = doc.get("kind")
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    spec = mapping(doc.get("spec"), f"{path}.spec")
    sp = f"{path}.spec"
    _refuse_failover(spec, sp)
    check_keys(spec, sp, _SPEC_KEYS, _SPEC_UNSUPPORTED)
    name = string(meta.get("name", ""), f"{path}.metadata.name")
    if kind == NAMESPACED:
        namespace = string(meta.get("namespace") or "default", f"{path}.metadata.namespace")
    else:
        namespace = ""
        if meta.get("namespace"):
            raise InvalidInput(f"{path}.metadata.namespace", "a ClusterPropagationPolicy is not namespaced")
    selectors = tuple(_selector(raw, f"{sp}.resourceSelectors[{i}]")
                      for i, raw in enumerate(sequence(spec.get("resourceSelectors"), f"{sp}.resourceSelectors")))
    preemption, suspend = _check_spec_scalars(spec, sp)
    try:
        return PolicyObject(
            kind=str(kind) if kind in (NAMESPACED, CLUSTER_WIDE) else NAMESPACED, name=name, namespace=namespace,
            resource_selectors=selectors, placement=parse_placement(spec, sp, name),
            priority=integer(spec.get("priority", 0), f"{sp}.priority"), preemption=preemption,
            suspend_dispatching=suspend)
    except InvalidInput as exc:
        raise _rooted(path, exc) from None


def _check_selects(policy: PolicyObject, path: str, job_name: str, job_namespace: str,
                   job_labels: Mapping[str, str]) -> None:
    """Karmada's selector rule: a name decides alone, else a label selector must match."""
    for sel in policy.resource_selectors:
        if ((sel.api_version, sel.kind) == ("batch.volcano.sh/v1alpha1", "Job")
                and sel.name in ("", job_name) and sel.namespace in ("", job_namespace)
                and (sel.name or sel.label_selector is None or sel.label_selector.matches(job_labels))):
            return
    where = f"{job_namespace}/" if job_namespace else ""
    raise InvalidInput(f"{path}.spec.resourceSelectors", f"does not select the Job {where}{job_name} in this file")


def parse_propagation(doc: Mapping[str, object], path: str, job_name: str, job_namespace: str,
                      job_labels: Mapping[str, str]) -> PropagationPolicy:
    """The inline policy of a ``submit -f`` file; it must select the file's Job.

    ``priority``, ``preemption`` and ``suspension`` decide between stored policies; inline,
    the policy is the job's own and none of them can mean anything, so they are refused.
    """
    spec = mapping(doc.get("spec"), f"{path}.spec")
    if "resourceSelectors" not in spec:
        spec = {**spec, "resourceSelectors": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                               "name": job_name}]}
    for key in ("priority", "preemption", "suspension"):
        if key in spec:
            raise InvalidInput(f"{path}.spec.{key}", "not supported in a policy submitted with its Job; "
                               "apply the policy as an object (fedctl apply -f)")
    meta = mapping(doc.get("metadata"), f"{path}.metadata")
    if doc.get("kind") == NAMESPACED:
        # A Job naming no namespace takes its queue's default, unknown here: the policy
        # then names none either (it is the job's own, wherever the job lands).
        namespace = string(meta.get("namespace", job_namespace), f"{path}.metadata.namespace")
        if namespace != job_namespace:
            job_in = (f"in {job_namespace!r}" if job_namespace
                      else "with no namespace (it takes its queue's default namespace)")
            raise InvalidInput(f"{path}.metadata.namespace",
                               f"a PropagationPolicy in {namespace!r} cannot select a Job {job_in}")
    policy = parse_policy_object({**doc, "spec": spec, "metadata": {**meta, "name": meta.get("name") or job_name}},
                                 path)
    _check_selects(policy, path, job_name, job_namespace, job_labels)
    return policy.placement
