"""A port already in use is one ``error:`` line naming the flag and exit 1, not a traceback
(`federation serve --listen` / `--metrics-listen`, `federation-agent --metrics-listen`)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.fixture
def taken() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flag", ["--listen", "--metrics-listen"])
def test_serve_on_a_taken_port_says_which_flag(taken: int, flag: str, tmp_path: Path) -> None:
    extra = [] if flag == "--listen" else ["--listen", "127.0.0.1:0"]
    out = _run("federation", "serve", flag, f"127.0.0.1:{taken}", *extra, "--db", f"sqlite:///{tmp_path}/f.db")
    assert out.returncode == 1
    assert f"error: {flag} 127.0.0.1:{taken}: cannot listen" in out.stderr
    assert "Traceback" not in out.stderr


def test_agent_metrics_on_a_taken_port_says_which_flag(taken: int) -> None:
    out = _run("federation-agent", "--cluster", "east", "--server", "127.0.0.1:1", "--token", "tok-east-12345",
               "--metrics-listen", f"127.0.0.1:{taken}")
    assert out.returncode == 1, out.stderr
    assert f"error: --metrics-listen 127.0.0.1:{taken}: cannot listen" in out.stderr
    assert "Traceback" not in out.stderr
