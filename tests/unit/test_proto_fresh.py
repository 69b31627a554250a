"""The committed stubs in federation/v1 must be exactly what hack/gen-proto.sh produces.

Generated code is committed (so installs need no protoc), which means a .proto edit
without regeneration would silently ship stale stubs; this test regenerates into a temp
dir and compares byte for byte.
"""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "federation" / "v1"


def _generated(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.is_file() and "_pb2" in p.name}


def test_committed_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        [str(ROOT / "hack" / "gen-proto.sh"), str(tmp_path)], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    fresh = tmp_path / "federation" / "v1"
    fresh_names, committed_names = _generated(fresh), _generated(COMMITTED)
    assert fresh_names, "generation produced no stubs"
    assert fresh_names == committed_names, (
        f"missing: {sorted(fresh_names - committed_names)}, stale: {sorted(committed_names - fresh_names)}; "
        "run `make proto`"
    )
    differing = [n for n in sorted(fresh_names) if not filecmp.cmp(fresh / n, COMMITTED / n, shallow=False)]
    assert not differing, f"stale generated files {differing}; run `make proto` and commit federation/v1"


def test_stubs_import_as_federation_v1() -> None:
    from federation.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2, jobs_pb2_grpc

    assert jobs_pb2.DESCRIPTOR.package == "federation.v1"
    assert hasattr(jobs_pb2_grpc, "JobServiceServicer")
    assert hasattr(agent_pb2_grpc, "add_AgentServiceServicer_to_server")
    assert agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="a")).WhichOneof("body") == "hello"
