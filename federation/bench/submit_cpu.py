"""Where the submission benchmark's CPU goes: server, client processes, database backends.

Why measure all three: on a small machine they share the same cores, so a figure of
jobs/s alone cannot say whether the service, its clients or PostgreSQL is the limit;
CPU milliseconds per job of each can. Linux ``/proc`` only (elsewhere everything reads
0.0), and the database's backends only when it runs on this machine (``None`` else).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
_BATCH_LINE = re.compile(r"submissions: (\d+) jobs in (\d+) store transactions")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0.0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jobs_per_transaction(server_log: str) -> float | None:
    """The server's mean group-commit batch, from the line it logs at shutdown."""
    match = _BATCH_LINE.search(server_log)
    if match is None or int(match.group(2)) == 0:
        return None
    return int(match.group(1)) / int(match.group(2))


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds spent in the measured window."""

    server: float
    clients: float
    database: float | None


class CpuMeter:
    """CPU of the server, the clients and (if local) the database backends over a window."""

    def __init__(self, store: Any, server: int, clients: list[int]) -> None:
        self._store = store
        self._server = server
        self._clients = clients
        self._local_db = store.dialect == "postgresql" and _is_local(store.url)
        self._before: dict[str, float] = {}
        self._backends: dict[int, float] = {}

    def _backend_pids(self) -> list[int]:
        """Backends of the service (application_name ``federation``), not this process's own.

        Through a raw DBAPI connection: only the store imports SQLAlchemy (layering rule).
        """
        conn = self._store.db.engine.raw_connection()
        try:
            cursor = conn.cursor()
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                           "AND application_name = 'federation' AND pid <> pg_backend_pid()")
            return [int(pid) for (pid,) in cursor.fetchall()]
        finally:
            conn.close()

    def start(self) -> None:
        self._before = {"server": cpu_seconds(self._server),
                        "clients": sum(cpu_seconds(p) for p in self._clients)}
        if self._local_db:
            self._backends = {pid: cpu_seconds(pid) for pid in self._backend_pids()}

    def stop(self) -> CpuUse:
        database: float | None = None
        if self._local_db:
            # A backend that appeared during the window counts whole (it started in it).
            database = sum(cpu_seconds(pid) - self._backends.get(pid, 0.0) for pid in self._backend_pids())
        return CpuUse(
            server=cpu_seconds(self._server) - self._before["server"],
            clients=sum(cpu_seconds(p) for p in self._clients) - self._before["clients"],
            database=database,
        )


def _is_local(url: str) -> bool:
    return (urlsplit(url).hostname or "localhost") in _LOCAL_HOSTS
