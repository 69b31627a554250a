"""How command-line tools report errors: one line naming the field path, exit code 2."""

from __future__ import annotations

import sys

EXIT_USAGE = 2
EXIT_FAILURE = 1


def fail(message: str, code: int = EXIT_USAGE) -> int:
    """Print ``message`` as one line on stderr and return the exit code to use."""
    print(f"error: {message}", file=sys.stderr)
    return code
