"""Run ``federation serve`` and ``fedctl`` as real processes, the way users do."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "tests" / "fixtures" / "manifests"
_SERVING = re.compile(r"^federation serving on (\S+)$")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("FEDCTL_TOKEN", "FEDCTL_SERVER")}
    out.update(extra)
    return out


def fedctl(server: str, *args: str, token: str | None = None, **extra: str) -> Result:
    """``fedctl --server SERVER [--token T] ARGS`` in a subprocess (blocking)."""
    argv = [sys.executable, "-m", "federation.cli.fedctl", "--server", server, *(["--token", token] if token else []),
            *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env(**extra), cwd=REPO)
    return Result(proc.returncode, proc.stdout, proc.stderr)


async def afedctl(server: str, *args: str, token: str | None = None) -> Result:
    """The same without blocking the event loop (for servers running in the test's loop)."""
    argv = ["-m", "federation.cli.fedctl", "--server", server, *(["--token", token] if token else []), *args]
    proc = await asyncio.create_subprocess_exec(sys.executable, *argv, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, env=env(), cwd=REPO)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return Result(proc.returncode or 0, out.decode(), err.decode())


def federation(*args: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "federation.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=env(), cwd=REPO)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Serve:
    proc: subprocess.Popen[str]
    address: str
    log: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


@contextmanager
def serve(db: str, workdir: Path, *extra: str) -> Iterator[Serve]:
    """``federation serve --listen 127.0.0.1:0 --db DB``; yields once it prints its address."""
    log = workdir / f"serve-{time.monotonic_ns()}.log"
    argv = [sys.executable, "-m", "federation.cli.main", "serve", "--listen", "127.0.0.1:0", "--db", db,
            "--round-debounce-seconds", "0.05", *extra]
    with open(log, "w") as errors:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True, env=env(), cwd=workdir)
    try:
        address = _address(proc, log)
        yield Serve(proc, address, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _address(proc: subprocess.Popen[str], log: Path) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"federation serve exited ({proc.wait()}):\n{log.read_text()}")
        match = _SERVING.match(line.strip())
        if match:
            return match.group(1)
    raise AssertionError(f"federation serve did not start:\n{log.read_text()}")


def one_line_error(result: Result, *, code: int, path: str) -> None:
    """The CLI contract: exit ``code`` and exactly one stderr line naming ``path``."""
    lines = result.err.strip().splitlines()
    assert result.code == code, (result.code, result.err)
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"error: {path}"), lines[0]


def args(*parts: str | Path) -> Sequence[str]:
    return [str(p) for p in parts]
