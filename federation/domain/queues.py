"""Queues: the unit of multi-tenant fairness (Volcano Queue semantics)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from federation.domain.errors import require
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
