"""Durable state of the federation: SQLAlchemy 2 models, repositories and the audit.

The only package that imports SQLAlchemy. Callers use ``Store`` (or ``create_store``)
and get frozen records back; errors are the plain classes in ``federation.store.errors``.
Design notes: docs/design/store.md.
"""

from federation.store.errors import (
    AlreadyExists,
    Conflict,
    IllegalTransition,
    NotFound,
    StaleEpoch,
    StoreError,
    Unavailable,
    WorkInactive,
)
from federation.store.records import (
    ClusterLoss,
    ClusterRecord,
    Decision,
    DecisionRecord,
    EventPage,
    JobEvent,
    JobRecord,
    JobUpdate,
    Page,
    QueueUsage,
    Registration,
    RoundRecord,
    RoundResult,
    SnapshotSummary,
    Submitted,
    WorkRecord,
)
from federation.store.store import Store, create_store

__all__ = [
    "AlreadyExists",
    "ClusterLoss",
    "ClusterRecord",
    "Conflict",
    "Decision",
    "DecisionRecord",
    "EventPage",
    "IllegalTransition",
    "JobEvent",
    "JobRecord",
    "JobUpdate",
    "NotFound",
    "Page",
    "QueueUsage",
    "Registration",
    "RoundRecord",
    "RoundResult",
    "SnapshotSummary",
    "StaleEpoch",
    "Store",
    "StoreError",
    "Submitted",
    "Unavailable",
    "WorkInactive",
    "WorkRecord",
    "create_store",
]
