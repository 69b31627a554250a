"""Two replicas running ``federation db upgrade`` at once (a rollout whose migration Job
is retried while the first still runs, or two hosts sharing a SQLite file): both must
succeed, and the schema is created once."""

from __future__ import annotations

import subprocess
import sys
import time

from federation.store import migrate as migrations

_UPGRADE = """
import sys, time
from federation.store import migrate
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
migrate.upgrade(sys.argv[1])
print("ok", flush=True)
"""


def test_two_replicas_upgrading_at_once_both_succeed(db_url: str) -> None:
    start = str(time.time() + 3.0)  # both processes have imported everything by then
    children = [subprocess.Popen([sys.executable, "-c", _UPGRADE, db_url, start], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [child.communicate(timeout=180) for child in children]
    for child, (out, err) in zip(children, results, strict=True):
        assert (child.returncode, out.strip()) == (0, "ok"), err[-2000:]
    assert migrations.is_at_head(db_url)
