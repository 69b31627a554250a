#!/usr/bin/env bash
# mypy --strict over tests/, with [tool.mypy]'s settings (pyproject.toml).
#
# Why three runs: pytest imports each test folder's helpers (fleetkit, agentkit, ...) as
# top-level modules (rootdir-relative imports, folders without __init__.py), so mypy needs
# those folders on MYPYPATH; and tests/integration and tests/e2e each have a conftest.py,
# which one mypy run cannot hold as two top-level modules named `conftest`. tests/perf
# imports helpers of both, so it is checked on its own with both folders on the path.
set -euo pipefail
cd "$(dirname "$0")/.."
MYPY=${MYPY:-.venv/bin/mypy}
UNIT=tests/integration:tests/unit:tests/unit/agents:tests/unit/sim:tests/unit/metrics:tests/unit/placement
MYPYPATH=$UNIT "$MYPY" --explicit-package-bases tests/unit tests/integration tests/fixtures
MYPYPATH=tests/e2e "$MYPY" --explicit-package-bases tests/e2e
MYPYPATH=tests/integration:tests/e2e "$MYPY" --explicit-package-bases tests/perf
