"""Run the test suite as three pytest processes at once and report them one after another.

Most of the suite's wall clock is waiting: for servers to start, leases to expire and
grace periods to pass (a single pytest process used about two thirds of one core). Three
shards on the machine's two cores finish in about half the time of one process.

The shards are whole directories or whole files, so each process collects a fixed set:
``tests/e2e`` (its own conftest and control plane) with every other directory of tests
(``tests/unit``, ``tests/perf``), and the files of ``tests/integration`` split in two by
alternation in name order. The e2e and integration conftests are both top-level
``conftest`` modules and are never collected in the same process. Each shard's output is
held in a file and printed whole when it ends, so failures read as in a single run; the
exit status is the first failing shard's.

Usage: ``python hack/pytest_shards.py [pytest arguments...]`` (for example ``-m "not perf"``).
Arguments that name test paths (``tests/unit/test_x.py::test_y``) run as one ordinary
pytest process over just those paths: there is nothing to shard.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shards() -> list[list[str]]:
    """The test paths of each shard, relative to the repository's root.

    Every test file under ``tests/`` is in exactly one shard: a new directory of tests
    joins the first shard rather than going unrun.
    """
    tests = ROOT / "tests"
    integration = sorted(str(p.relative_to(ROOT)) for p in (tests / "integration").rglob("test_*.py"))
    rest = sorted(str(p.relative_to(ROOT)) for p in tests.iterdir()
                  if p.name not in ("e2e", "integration")
                  and ((p.is_dir() and any(p.rglob("test_*.py"))) or p.match("test_*.py")))
    return [["tests/e2e", *rest], integration[0::2], integration[1::2]]


def names_paths(pytest_args: list[str]) -> bool:
    """Whether the arguments name test paths of their own (then there is nothing to shard)."""
    return any(not a.startswith("-") and (ROOT / a.split("::")[0]).exists() for a in pytest_args)


def main(pytest_args: list[str]) -> int:
    if names_paths(pytest_args):
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pytest-shards-") as tmp:
        running = []
        for index, paths in enumerate(shards()):
            log = Path(tmp) / f"shard-{index}.log"
            with log.open("wb") as out:
                process = subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args, *paths],
                                           cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            running.append((paths, log, process))
        codes: list[int] = []
        try:
            for index, (paths, log, process) in enumerate(running):
                codes.append(process.wait())
                print(f"===== shard {index} ({' '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}): "
                      f"exit {codes[-1]} =====", flush=True)
                sys.stdout.write(log.read_text(errors="replace"))
                sys.stdout.flush()
        finally:
            for _, _, process in running:
                if process.poll() is None:
                    process.terminate()
                    process.wait()
    failed = [index for index, code in enumerate(codes) if code]
    print(f"===== {len(codes)} shards in {time.monotonic() - started:.0f} s; "
          f"{'failed: ' + ', '.join(map(str, failed)) if failed else 'all passed'} =====")
    return codes[failed[0]] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
