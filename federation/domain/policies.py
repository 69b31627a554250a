"""Objects applied to the federation once and used by many jobs: Karmada
(Cluster)PropagationPolicies and Kubernetes PriorityClasses.

A ``PolicyObject`` is a Karmada ``policy.karmada.io/v1alpha1`` PropagationPolicy (namespaced)
or ClusterPropagationPolicy (``namespace == ""``): which workloads it selects
(``resource_selectors``), its explicit ``priority``, whether it may take over workloads
another policy already claimed (``preemption == "Always"``), whether dispatching is
suspended, and the placement (``PropagationPolicy``) it gives them. A ``PriorityClass`` is
``scheduling.k8s.io/v1`` PriorityClass: ``priorityClassName`` resolves through them.
"""

from __future__ import annotations

from dataclasses import dataclass

from federation.domain.errors import require
from federation.domain.names import dns_label, dns_subdomain
from federation.domain.propagation import PropagationPolicy
from federation.domain.selectors import LabelSelector

NAMESPACED, CLUSTER_WIDE = "PropagationPolicy", "ClusterPropagationPolicy"
PREEMPTIONS = ("Never", "Always")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
# Kubernetes reserves values above this for system classes (scheduling/v1 validation).
HIGHEST_USER_PRIORITY = 1_000_000_000


@dataclass(frozen=True)
class ResourceSelector:
    """Karmada ResourceSelector: apiVersion and kind must match; a non-empty name wins over
    the label selector (which is then ignored); neither selects every object of the kind."""

    api_version: str
    kind: str
    name: str = ""
    namespace: str = ""
    label_selector: LabelSelector | None = None

    def __post_init__(self) -> None:
        require(bool(self.api_version), "apiVersion", "is required")
        require(bool(self.kind), "kind", "is required")


@dataclass(frozen=True)
class PolicyObject:
    kind: str
    name: str
    namespace: str
    resource_selectors: tuple[ResourceSelector, ...]
    placement: PropagationPolicy
    priority: int = 0
    preemption: str = "Never"
    suspend_dispatching: bool = False

    def __post_init__(self) -> None:
        require(self.kind in (NAMESPACED, CLUSTER_WIDE), "kind", f"must be {NAMESPACED} or {CLUSTER_WIDE}")
        require(bool(self.name), "metadata.name", "is required")
        require((self.kind == NAMESPACED) == bool(self.namespace), "metadata.namespace",
                "a PropagationPolicy has a namespace, a ClusterPropagationPolicy none")
        dns_subdomain(self.name, "metadata.name")  # what Kubernetes accepts as an object name
        if self.kind == NAMESPACED:
            dns_label(self.namespace, "metadata.namespace")
        require(bool(self.resource_selectors), "spec.resourceSelectors", "at least one selector is required")
        require(self.preemption in PREEMPTIONS, "spec.preemption", "must be Never or Always")
        self._check_selectors()

    def _check_selectors(self) -> None:
        """The two selector rules of Karmada's policy webhook (``validateResourceSelectors`` and
        ``validateResourceSelectorsIfPreemptionEnabled``, pkg/util/validation/validation.go):
        a PropagationPolicy selects only in its own namespace, so a selector naming another
        would select nothing, without a word; and a policy that may take workloads over
        (``preemption: Always``) names each one, so it cannot seize every workload of a kind."""
        for i, sel in enumerate(self.resource_selectors):
            if self.kind == NAMESPACED:
                require(sel.namespace in ("", self.namespace), f"spec.resourceSelectors[{i}].namespace",
                        f"{sel.namespace!r} is not the policy's namespace {self.namespace!r}: a PropagationPolicy "
                        "selects only in its own namespace (a ClusterPropagationPolicy selects in any)")
            if self.preemption == "Always":
                require(bool(sel.name), f"spec.resourceSelectors[{i}].name",
                        "is required when spec.preemption is Always (a policy that takes workloads over must "
                        "name each one)")

    @property
    def ref(self) -> str:
        """``propagationpolicy/NS/NAME`` or ``clusterpropagationpolicy/NAME`` (what users see)."""
        if self.kind == NAMESPACED:
            return f"propagationpolicy/{self.namespace}/{self.name}"
        return f"clusterpropagationpolicy/{self.name}"


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    description: str = ""
    preemption_policy: str = "PreemptLowerPriority"

    def __post_init__(self) -> None:
        require(bool(self.name), "metadata.name", "is required")
        require(-2_147_483_648 <= self.value <= HIGHEST_USER_PRIORITY, "value",
                f"must be at most {HIGHEST_USER_PRIORITY} (higher values are reserved for system classes)")
        require(self.preemption_policy in PREEMPTION_POLICIES, "preemptionPolicy",
                "must be PreemptLowerPriority or Never")
