"""Nodes and taints as a member cluster reports them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from federation.domain.errors import InvalidInput, require
from federation.domain.resources import Resources

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A cluster toleration's tolerationSeconds: ten years is "for ever" in practice, and the
# wire carries int64 (a larger value would fail conversion instead of being refused).
MAX_TOLERATION_SECONDS = 10 * 365 * 86_400


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"
    # When a NoExecute taint was put on (seconds since the epoch), as Kubernetes' and
    # Karmada's ``timeAdded``: a toleration's ``tolerationSeconds`` counts from it
    # (propagation/taints.py). None for taints that never evict.
    time_added: float | None = None

    def __post_init__(self) -> None:
        require(bool(self.key), "key", "taint key must not be empty")
        require(self.effect in TAINT_EFFECTS, "effect", f"must be one of {', '.join(TAINT_EFFECTS)}")


@dataclass(frozen=True)
class Toleration:
    """Kubernetes toleration semantics (operator Equal or Exists; an empty key matches any key)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    # How long a job may stay on a cluster once a NoExecute taint it tolerates is put on
    # (Karmada clusterTolerations[].tolerationSeconds); None: for ever. Cluster tolerations only.
    seconds: int | None = None

    def __post_init__(self) -> None:
        require(self.operator in ("Equal", "Exists"), "operator", "must be Equal or Exists")
        require(self.effect in ("", *TAINT_EFFECTS), "effect", f"must be empty or one of {', '.join(TAINT_EFFECTS)}")
        if self.seconds is not None:  # Kubernetes' rule (ValidateTolerations), bounded
            require(self.effect == "NoExecute", "tolerationSeconds", "is only allowed with effect NoExecute")
            require(abs(self.seconds) <= MAX_TOLERATION_SECONDS, "tolerationSeconds",
                    f"must be between -{MAX_TOLERATION_SECONDS} and {MAX_TOLERATION_SECONDS} (ten years; "
                    "0 or less leaves at once, as in Kubernetes)")
        if self.operator == "Exists":
            require(self.value == "", "value", "must be empty when operator is Exists")

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint`` (k8s.io/api/core/v1/toleration.go), which
        Karmada's cluster taint filter uses too: an empty key or effect matches any; then
        Exists matches, Equal compares the values. Pod tolerations with an empty key and
        Equal are refused at the edge (the API server refuses them); Karmada's cluster
        tolerations allow them (its example ``clusterTolerations: [{effect: NoSchedule}]``
        tolerates every NoSchedule taint without a value)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


def untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> tuple[Taint, ...]:
    """Taints that block scheduling (NoSchedule/NoExecute) and no toleration covers."""
    return tuple(
        t for t in taints if t.effect != "PreferNoSchedule" and not any(tol.tolerates(t) for tol in tolerations)
    )


@dataclass(frozen=True)
class Node:
    """One node: ``free`` is allocatable minus the requests of pods bound there."""

    name: str
    allocatable: Resources
    free: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInput("name", "node name must not be empty")

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def usable(self) -> bool:
        """Healthy and not cordoned: the only nodes a placement may use."""
        return self.ready and not self.unschedulable
