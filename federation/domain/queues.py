"""Queues: the unit of multi-tenant fairness (Volcano Queue semantics)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from federation.domain.errors import InvalidInput, require
from federation.domain.names import dns_label, is_system_namespace
from federation.domain.pod_security import DEFAULT_LEVEL, LEVELS
from federation.domain.resources import Resources

ROOT_QUEUE = "root"  # Volcano's implicit root queue: parent "root" == no parent
_QUEUE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Queue:
    """A queue with Volcano's capacity semantics.

    ``capability`` is a hard cap, ``guarantee`` a floor never lent to others,
    ``deserved`` an explicit share (else water-filled by ``weight``), ``reclaimable``
    whether capacity it borrowed may be taken back. ``owners`` are the tenants allowed to
    submit to, see and cancel its jobs. Queue ``priority`` orders queues before job
    priority and fairness.

    Where its pods may go (docs/design/limits.md, "Safe pods"): ``namespaces`` lists the
    namespaces its jobs may use (empty = only ``default_namespace``), a job naming none
    gets ``default_namespace``, and Kubernetes' own namespaces (``kube-*``) may be listed
    only with ``allow_system_namespaces`` — an admin's explicit choice, since only admins
    create queues. ``pod_security`` is the Pod Security Standard every pod template of
    the queue must meet (``baseline`` unless the admin says ``restricted`` or ``privileged``).
    """

    name: str
    weight: int = 1
    priority: int = 0
    capability: Resources | None = None
    guarantee: Resources = Resources()
    deserved: Resources | None = None
    reclaimable: bool = True
    parent: str | None = None
    owners: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    default_namespace: str = "default"
    pod_security: str = DEFAULT_LEVEL
    allow_system_namespaces: bool = False
    # Default topology wait for its jobs that carry a networkTopology (placement/intent.py).
    topology_wait_seconds: float | None = None

    def __post_init__(self) -> None:
        require(bool(_QUEUE_NAME.match(self.name or "")) and len(self.name) <= 63, "name",
                "must be a DNS label (lowercase letters, digits, '-'; at most 63 characters)")
        require(1 <= self.weight <= 65535, "weight", "must be between 1 and 65535")
        if self.capability is not None:
            require(self.guarantee.fits_in(self.capability), "guarantee", "must not exceed capability")
        require(self.name != ROOT_QUEUE, "name", "'root' is the implicit root of the queue tree (Volcano); "
                "set parent: root, or no parent, on top-level queues")
        require(self.parent != self.name, "parent", "a queue cannot be its own parent")
        if self.parent == ROOT_QUEUE:
            object.__setattr__(self, "parent", None)  # root is implicit: the same as no parent
        if self.topology_wait_seconds is not None:
            require(0 <= self.topology_wait_seconds <= 30 * 86_400.0,
                    "topologyWaitSeconds", "must be between 0 and 30 days")
        require(self.pod_security in LEVELS, "podSecurity", f"must be one of {', '.join(LEVELS)}")
        require(len(self.namespaces) <= 256, "namespaces", "at most 256 namespaces per queue")
        for i, ns in enumerate((*self.namespaces, self.default_namespace)):
            path = f"namespaces[{i}]" if i < len(self.namespaces) else "defaultNamespace"
            dns_label(ns, path)
            if is_system_namespace(ns) and not self.allow_system_namespaces:
                raise InvalidInput(path, f"{ns} is a Kubernetes system namespace; a queue may use it only "
                                         f"with allowSystemNamespaces: true")
        if self.namespaces and self.default_namespace not in self.namespaces:
            raise InvalidInput("defaultNamespace", f"{self.default_namespace!r} is not in namespaces")

    @property
    def allowed_namespaces(self) -> tuple[str, ...]:
        """Where this queue's jobs may put pods (the default namespace alone when none are listed)."""
        return self.namespaces or (self.default_namespace,)
