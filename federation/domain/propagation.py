"""Karmada-style propagation policy attached to a job (policy.karmada.io/v1alpha1 semantics).

Follows Karmada's PropagationPolicy placement fields (karmada-io/karmada
pkg/apis/policy/v1alpha1/propagation_types.go): clusterAffinity, ordered
clusterAffinities fallback, clusterTolerations, spreadConstraints, replicaScheduling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from federation.domain.errors import require
from federation.domain.names import qualified_name
from federation.domain.nodes import Taint, Toleration, untolerated
from federation.domain.selectors import LabelRequirement


@dataclass(frozen=True)
class ClusterAffinity:
    cluster_names: tuple[str, ...] = ()
    match_labels: Mapping[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    match_expressions: tuple[LabelRequirement, ...] = ()

    def __hash__(self) -> int:
        return hash((self.cluster_names, tuple(sorted(self.match_labels.items())), self.exclude,
                     self.match_expressions))

    def matches(self, cluster: str, labels: Mapping[str, str]) -> bool:
        if cluster in self.exclude:
            return False
        if self.cluster_names and cluster not in self.cluster_names:
            return False
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(r.matches(labels) for r in self.match_expressions))


AFFINITY_NAME_MAX = 32


@dataclass(frozen=True)
class ClusterAffinityTerm:
    """One entry of ``clusterAffinities``: tried in order, the next only if none fits."""

    name: str
    affinity: ClusterAffinity

    def __post_init__(self) -> None:
        # Karmada requires affinityName: it is how the scheduler reports which term placed a workload.
        require(bool(self.name), "affinityName", "is required")
        # The CRD caps it at 32 characters and the webhook wants a label key
        # (karmada pkg/apis/policy/v1alpha1/propagation_types.go ClusterAffinityTerm,
        # pkg/util/validation/validation.go ValidateClusterAffinities).
        require(len(self.name) <= AFFINITY_NAME_MAX, "affinityName", f"must be at most {AFFINITY_NAME_MAX} characters")
        qualified_name(self.name, "affinityName", "label key")


@dataclass(frozen=True)
class SpreadConstraint:
    spread_by_field: str = "cluster"
    spread_by_label: str = ""
    min_groups: int = 0
    max_groups: int = 0

    def __post_init__(self) -> None:
        require(self.spread_by_field in ("", "cluster", "region", "zone", "provider"), "spreadByField",
                "must be cluster, region, zone or provider")
        # Karmada's spread filter rules out a cluster without the property; ours report none.
        require(self.spread_by_field in ("", "cluster"), "spreadByField",
                f"{self.spread_by_field} not supported: member clusters report no region, zone or provider "
                "(spread by cluster, or select clusters by their labels with clusterAffinity)")
        require(not (self.spread_by_field and self.spread_by_label), "spreadByLabel",
                "spreadByField and spreadByLabel are mutually exclusive")
        require(self.min_groups >= 0 and self.max_groups >= 0, "minGroups", "must be >= 0")
        require(self.max_groups == 0 or self.min_groups <= self.max_groups, "maxGroups", "must be >= minGroups")
        # Refused here, not in one parser, so YAML and gRPC share the rule (compatibility.md).
        require(self.min_groups <= 1, "minGroups", f"{self.min_groups} not supported: a gang runs in exactly one "
                "cluster, so it can never span several groups")
        # Karmada's scheduler groups clusters only by cluster and region
        # (pkg/scheduler/core/spreadconstraint/select_clusters.go): a policy spread by a label
        # alone is never scheduled there, and beside a cluster constraint the label one is
        # ignored. Honouring it as "one cluster" would place what Karmada never places.
        require(not self.spread_by_label, "spreadByLabel", "not supported: Karmada's scheduler spreads only by "
                "cluster or region, so a label spread is never satisfied there (spread by cluster, or select "
                "clusters by label with clusterAffinity)")


@dataclass(frozen=True)
class ReplicaScheduling:
    type: str = "Divided"  # Divided | Duplicated
    division_preference: str = "Aggregated"  # Aggregated | Weighted
    static_weights: tuple[tuple[str, int], ...] = ()
    dynamic_weight: str = ""  # "" | "AvailableReplicas"

    def __post_init__(self) -> None:
        require(self.type in ("Divided", "Duplicated"), "replicaSchedulingType", "must be Divided or Duplicated")
        # Both refusals live here so YAML and gRPC share them (compatibility.md): the planner
        # reads only static_weights, and either would need one gang in several clusters.
        require(self.type != "Duplicated", "replicaSchedulingType", "Duplicated not supported: it would run a "
                "full copy of the gang in every selected cluster; the federation runs each job once, in one cluster")
        require(self.division_preference in ("Aggregated", "Weighted"), "replicaDivisionPreference",
                "must be Aggregated or Weighted")
        require(self.dynamic_weight in ("", "AvailableReplicas"), "weightPreference.dynamicWeight",
                "must be AvailableReplicas")
        require(not self.dynamic_weight, "weightPreference.dynamicWeight", f"{self.dynamic_weight} not supported: "
                "it divides replicas by each cluster's free capacity; a gang runs in exactly one cluster")
        for i, (_, weight) in enumerate(self.static_weights):
            require(weight >= 1, f"weightPreference.staticWeightList[{i}].weight", "must be >= 1")


@dataclass(frozen=True)
class PropagationPolicy:
    name: str = ""
    cluster_affinity: ClusterAffinity | None = None
    cluster_affinities: tuple[ClusterAffinityTerm, ...] = ()
    cluster_tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    replica_scheduling: ReplicaScheduling | None = None

    def __post_init__(self) -> None:
        require(not (self.cluster_affinity is not None and self.cluster_affinities), "placement.clusterAffinities",
                "clusterAffinity and clusterAffinities are mutually exclusive")
        self._check_unique_affinity_names()
        self._check_one_constraint_per_field()
        self._check_cluster_spread_bounded()

    def _check_one_constraint_per_field(self) -> None:
        """Karmada's webhook refuses two spread constraints on one field
        (``ValidateSpreadConstraint`` in pkg/util/validation/validation.go): the scheduler keys
        them by field, so one of the two would be dropped without a word."""
        seen: set[str] = set()
        for i, spread in enumerate(self.spread_constraints):
            require(spread.spread_by_field not in seen, f"placement.spreadConstraints[{i}].spreadByField",
                    f"a second {spread.spread_by_field} constraint: at most one spread constraint per field")
            seen.add(spread.spread_by_field)

    def _check_cluster_spread_bounded(self) -> None:
        """Karmada selects ``min(clusters, maxGroups)`` clusters for a ``cluster`` spread
        (pkg/scheduler/core/spreadconstraint/select_clusters_by_cluster.go), so one without
        ``maxGroups`` selects none and the binding is never scheduled. Its webhook accepts
        it, and placing it here would run what Karmada never runs. The exception is the one
        Karmada makes itself: a statically weighted division ignores spread constraints
        (``shouldIgnoreSpreadConstraint`` in select_clusters.go)."""
        if self._spread_ignored():
            return
        for i, spread in enumerate(self.spread_constraints):
            require(spread.spread_by_field != "cluster" or spread.max_groups >= 1,
                    f"placement.spreadConstraints[{i}].maxGroups",
                    "must be >= 1 for a cluster spread: Karmada's scheduler picks at most maxGroups clusters, "
                    "so a cluster spread without it is never scheduled")

    def _spread_ignored(self) -> bool:
        """Karmada ignores spread constraints under a Divided, Weighted preference with a
        static weight list (or none) and no dynamic weight. An empty list here stands for
        Karmada's absent ``weightPreference``."""
        rs = self.replica_scheduling
        return (rs is not None and rs.type == "Divided" and rs.division_preference == "Weighted"
                and not rs.dynamic_weight)

    def _check_unique_affinity_names(self) -> None:
        """Karmada refuses two ``clusterAffinities`` terms of one name: the name is how a
        placement reports which term it used, so a repeat would make that ambiguous."""
        seen: set[str] = set()
        for i, term in enumerate(self.cluster_affinities):
            require(term.name not in seen, f"placement.clusterAffinities[{i}].affinityName",
                    f"duplicate affinityName {term.name!r}")
            seen.add(term.name)

    def affinity_groups(self) -> tuple[ClusterAffinity | None, ...]:
        """The affinity terms in fallback order; ``(None,)`` means any cluster.

        A ``staticWeightList`` ranks clusters: each term is split into one group per weight,
        heaviest first, so a gang (which lives in one cluster) goes to the heaviest listed
        cluster that can hold it — Karmada gives heavier clusters more replicas — and falls
        back to lighter ones only when none of them can.
        """
        terms = tuple(t.affinity for t in self.cluster_affinities) if self.cluster_affinities \
            else (self.cluster_affinity,)
        weights = self.weighted_clusters()
        if not weights:
            return terms
        ranked = sorted(set(weights.values()), reverse=True)
        out: list[ClusterAffinity | None] = []
        for term in terms:
            base = term or ClusterAffinity()
            for weight in ranked:
                names = tuple(sorted(c for c, w in weights.items() if w == weight
                                     and (not base.cluster_names or c in base.cluster_names)))
                if names:
                    out.append(replace(base, cluster_names=names))
        return tuple(out) or terms

    def weighted_clusters(self) -> dict[str, int]:
        """``staticWeightList`` as cluster -> weight (empty: no list, every cluster allowed)."""
        if self.replica_scheduling is None:
            return {}
        return dict(self.replica_scheduling.static_weights)

    @property
    def placement_tolerations(self) -> tuple[Toleration, ...]:
        """The cluster tolerations that admit a *new* placement: one bounded by
        ``tolerationSeconds`` (NoExecute) would only let the job onto a cluster to be
        evicted again when it runs out (propagation/taints.py), so it admits none."""
        return tuple(t for t in self.cluster_tolerations if t.seconds is None)

    def tolerates(self, taints: tuple[Taint, ...]) -> bool:
        return not untolerated(taints, self.placement_tolerations)
