"""The third-party Go clients the tests drive the service with (hack/build-tools.sh).

``go_tools()`` builds them on first use (cached under ~/.cache/federation/tools) and
returns their directory. A tool that cannot be built FAILS the test that needs it: a
missing client must never turn into a skipped test.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "build-tools.sh"


@functools.cache
def _build() -> Path | str:
    proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        return f"{SCRIPT} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


def go_tools() -> Path:
    built = _build()
    if isinstance(built, str):
        pytest.fail(built, pytrace=False)
    return built


def run_tool(name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a tool from ``go_tools()``; the caller checks the exit code and output."""
    return subprocess.run([str(go_tools() / name), *args], capture_output=True, text=True, timeout=timeout)


async def arun_tool(name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``run_tool`` off the event loop (the server under test runs on the same loop)."""
    import asyncio

    return await asyncio.to_thread(run_tool, name, *args, timeout=timeout)
