"""Crash injection for recovery tests: off unless ``FEDERATION_AGENT_CRASH_AFTER_BINDS`` is set.

Why it exists: the agent promises that a process killed halfway through binding a gang
leaves no duplicate pod and no half-started gang once a successor takes over. A SIGKILL
sent from outside races the binding and usually lands before or after it, so the real
binary is made to die at a known point instead: right after its Nth successful bind
(before any bind for 0) it calls ``os._exit(137)`` — no ``finally`` blocks, no Lease
release, no goodbye to central, which is exactly what SIGKILL leaves behind. The idea is
etcd's ``gofail`` failpoints; nothing here runs unless the variable is set.
"""

from __future__ import annotations

import os
import sys
from typing import Any, cast

from agents.backend import ClusterBackend

CRASH_AFTER_BINDS = "FEDERATION_AGENT_CRASH_AFTER_BINDS"
KILLED = 137  # the exit status a shell reports for SIGKILL


class _CrashAfterBinds:
    """Delegates everything to ``inner``; ``bind_pod`` kills the process after ``binds``."""

    def __init__(self, inner: ClusterBackend, binds: int) -> None:
        self._inner = inner
        self._left = binds

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _die(self) -> None:
        sys.stderr.write(f"federation-agent: failpoint {CRASH_AFTER_BINDS} reached, exiting {KILLED}\n")
        sys.stderr.flush()
        os._exit(KILLED)

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        if self._left <= 0:
            self._die()
        await self._inner.bind_pod(namespace, name, node)
        self._left -= 1
        if self._left <= 0:
            self._die()


def with_failpoints(backend: ClusterBackend) -> ClusterBackend:
    """``backend`` itself, or wrapped when a failpoint is set in the environment."""
    value = os.environ.get(CRASH_AFTER_BINDS, "").strip()
    if not value:
        return backend
    if not value.isdigit():
        raise SystemExit(f"federation-agent: {CRASH_AFTER_BINDS} must be a number of binds, got {value!r}")
    return cast(ClusterBackend, _CrashAfterBinds(backend, int(value)))
