"""The store facade: one object holding the engine and every repository.

``Store(url)`` (or ``create_store(url)``) is what the service, the CLI and tests open.
It does not create or migrate the schema: production schemas change only through
``federation db upgrade`` (``federation.store.migrate``); the embedded SQLite default
is upgraded explicitly by whoever opens it (the service does so for SQLite).
"""

from __future__ import annotations

from federation.store.audit import AuditRepository
from federation.store.clusters import ClusterRepository
from federation.store.engine import DEFAULT_URL, Clock, Database, make_engine, utc_now
from federation.store.job_expiry import JobExpiryRepository
from federation.store.jobs import JobRepository
from federation.store.objects import PolicyRepository, PriorityClassRepository
from federation.store.queues import QueueRepository
from federation.store.stats import StatsRepository
from federation.store.works import WorkRepository


class Store:
    """Repositories over one engine; every method call is one short transaction."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        clock: Clock = utc_now,
        pool_size: int = 10,
        max_overflow: int = 20,
        pre_ping: bool = True,
        ping_idle_seconds: float = 5.0,
        echo: bool = False,
    ) -> None:
        self.url = url
        self.db = Database(make_engine(url, pool_size=pool_size, max_overflow=max_overflow, pre_ping=pre_ping,
                                   ping_idle_seconds=ping_idle_seconds, echo=echo), clock)
        self.queues = QueueRepository(self.db)
        self.jobs = JobRepository(self.db)
        self.expiry = JobExpiryRepository(self.db)
        self.clusters = ClusterRepository(self.db)
        self.works = WorkRepository(self.db)
        self.audit = AuditRepository(self.db)
        self.policies = PolicyRepository(self.db)
        self.priority_classes = PriorityClassRepository(self.db)
        self.stats = StatsRepository(self.db)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.db.dialect

    def ping(self) -> None:
        """Round-trip to the database; raises ``Unavailable`` when it cannot be reached."""
        self.db.ping()

    def dispose(self) -> None:
        """Close every pooled connection (at shutdown; the store reconnects if used again)."""
        self.db.engine.dispose()

    close = dispose

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()


def create_store(url: str = DEFAULT_URL, **kwargs: object) -> Store:
    """Open a store (see ``Store`` for the keyword arguments)."""
    return Store(url, **kwargs)  # type: ignore[arg-type]  # Store checks its own keywords
