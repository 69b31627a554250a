"""The central's leader lease on PostgreSQL, and the fence on every write (docs/design/standby.md).

One row per lease name holds the holder, an ``epoch`` and an expiry. Every time is the
database's ``statement_timestamp()``: one clock for every replica, so no replica compares
its own clock with another's.

- **Acquire**: a plain read first (a standby's poll takes no lock while the lease is
  held); when the lease has expired (or was released), ``SELECT … FOR UPDATE`` of the
  expired row, then bump the epoch and take it, in one transaction. Exactly one of
  several racing candidates gets the row (the others find it unexpired once they get
  the lock). The very first leader creates the row (``ON CONFLICT DO NOTHING``).
- **Renew** succeeds only for the same holder and epoch while the lease is unexpired.
- **Release** (graceful stop) expires the lease now, so a standby takes over at its
  next poll instead of waiting out the lease.
- **Fence.** ``LeaseFence.check`` runs first in every write transaction of a replica
  started with ``--leader-election``: ``SELECT … FOR KEY SHARE`` of the lease row, which
  must still carry this replica's epoch and be unexpired. The lock is held until the
  transaction ends, and a new leader's acquisition (``FOR UPDATE`` of that row) waits
  for it. So a write of the old leader either commits before the new leader's term
  starts, or sees the new epoch and is refused: no round of an old leader commits after
  a new one began. Why KEY SHARE and not SHARE: the leader's renewals (an UPDATE that
  changes no key, so a ``FOR NO KEY UPDATE`` lock) do not conflict with it, so a long
  write transaction never delays a renewal; on a loaded host the SHARE version made
  leaders miss renewals and lose their lease (measured in the takeover test).
  Single-statement writes outside a transaction (the submission hot path)
  only check the local term; they record user intent, not leadership decisions.

SQLite has one writer process by construction; leader election is refused there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, TextClause, text

from federation.store.engine import Database, translated
from federation.store.errors import Unavailable

CENTRAL = "central"


class NotLeader(Unavailable):
    """This replica does not hold the lease (a standby, or a leader whose term ended)."""


@dataclass(frozen=True)
class LeaseState:
    name: str
    holder: str
    epoch: int
    expires_at: datetime
    expired: bool


_PEEK = text("SELECT expires_at <= statement_timestamp() FROM leases WHERE name = :name")
_CREATE = text("""
INSERT INTO leases (name, holder, epoch, acquired_at, renewed_at, expires_at)
VALUES (:name, :holder, 1, statement_timestamp(), statement_timestamp(),
        statement_timestamp() + make_interval(secs => :seconds))
ON CONFLICT (name) DO NOTHING
RETURNING epoch
""")
_LOCK_EXPIRED = text("""
SELECT epoch FROM leases WHERE name = :name AND expires_at <= statement_timestamp() FOR UPDATE
""")
_TAKE = text("""
UPDATE leases SET holder = :holder, epoch = epoch + 1, acquired_at = statement_timestamp(),
                  renewed_at = statement_timestamp(),
                  expires_at = statement_timestamp() + make_interval(secs => :seconds)
 WHERE name = :name
RETURNING epoch
""")
_RENEW = text("""
UPDATE leases SET renewed_at = statement_timestamp(),
                  expires_at = statement_timestamp() + make_interval(secs => :seconds)
 WHERE name = :name AND holder = :holder AND epoch = :epoch AND expires_at > statement_timestamp()
RETURNING epoch
""")
_RELEASE = text("""
UPDATE leases SET holder = '', expires_at = statement_timestamp()
 WHERE name = :name AND holder = :holder AND epoch = :epoch
RETURNING epoch
""")
_FENCE = text("""
SELECT epoch FROM leases
 WHERE name = :name AND epoch = :epoch AND expires_at > statement_timestamp()
   FOR KEY SHARE
""")
_READ = text("""
SELECT name, holder, epoch, expires_at, expires_at <= statement_timestamp() AS expired
  FROM leases WHERE name = :name
""")


class LeaseRepository:
    """Acquire, renew, release and read one named lease (PostgreSQL only)."""

    def __init__(self, db: Database, name: str = CENTRAL) -> None:
        if not db.postgres:
            raise ValueError("leader election needs PostgreSQL: SQLite is single-replica")
        self._db = db
        self.name = name

    def _row(self, statement: TextClause, params: dict[str, Any]) -> Row[Any] | None:
        # Unfenced on purpose: the lease's own statements decide who may write.
        with translated(), self._db.engine.begin() as conn:
            return conn.execute(statement, params).first()

    def try_acquire(self, holder: str, seconds: float) -> int | None:
        """The new epoch if this call took the lease, else None (someone holds it)."""
        params = {"name": self.name, "holder": holder, "seconds": seconds}
        peek = self._row(_PEEK, params)
        if peek is None:  # the first leader ever: create the row (one of several racing wins)
            created = self._row(_CREATE, params)
            return None if created is None else int(created[0])
        if not peek[0]:
            return None  # held: a standby's poll costs one read, and takes no lock
        with translated(), self._db.engine.begin() as conn:
            if conn.execute(_LOCK_EXPIRED, params).first() is None:
                return None  # renewed (or taken) while we waited for the lock
            return int(conn.execute(_TAKE, params).scalar_one())

    def renew(self, holder: str, epoch: int, seconds: float) -> bool:
        """Extend the lease; False when it is no longer ours (expired or taken)."""
        params = {"name": self.name, "holder": holder, "epoch": epoch, "seconds": seconds}
        return self._row(_RENEW, params) is not None

    def release(self, holder: str, epoch: int) -> None:
        """Expire our lease now (graceful stop): a standby takes over at its next poll."""
        self._row(_RELEASE, {"name": self.name, "holder": holder, "epoch": epoch})

    def read(self) -> LeaseState | None:
        row = self._row(_READ, {"name": self.name})
        if row is None:
            return None
        values = tuple(row)
        return LeaseState(str(values[0]), str(values[1]), int(values[2]), values[3], bool(values[4]))


class LeaseFence:
    """The write fence a replica installs on its ``Database`` (see the module docstring).

    ``epoch`` is the callable the elector keeps current: this replica's epoch while its
    term lasts, 0 otherwise.
    """

    def __init__(self, epoch: Callable[[], int], name: str = CENTRAL) -> None:
        self._epoch = epoch
        self._name = name

    def check(self, conn: Connection | None) -> None:
        epoch = self._epoch()
        if epoch <= 0:
            raise NotLeader("this replica is a standby (not the leader); retry: the Service routes to the leader")
        if conn is not None and conn.execute(_FENCE, {"name": self._name, "epoch": epoch}).first() is None:
            raise NotLeader(f"the leader lease of epoch {epoch} is over; this replica no longer leads")
