"""HyperNode ``regexMatch`` patterns, compiled and matched by RE2 in linear time.

Volcano matches these patterns with Go's ``regexp`` package, which is RE2: no
backreferences, no lookaround, and a match costs time linear in the input. Python's
``re`` backtracks, so a member pattern such as ``(a+)+b`` from a buggy or hostile agent
stalled the central event loop on every snapshot (issue 10). Using RE2 here gives both
the bounded time and Go's semantics: a pattern Volcano refuses is refused here too, with
RE2's reason, instead of being half-supported by a different engine.

The pattern length and RE2's compiled-program memory are capped as well
(``PATTERN_MAX_CHARS``, ``PATTERN_MAX_MEMORY``; docs/design/limits.md), so a pattern
like ``a{1000}{1000}`` cannot blow up at compile time either.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol, cast

import re2

from federation.domain.errors import InvalidInput

PATTERN_MAX_CHARS = 1024
PATTERN_MAX_MEMORY = 1 << 20  # bytes of RE2 program per pattern


class Pattern(Protocol):
    def search(self, text: str) -> object | None: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = PATTERN_MAX_MEMORY
    options.log_errors = False
    return options


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Pattern | str:
    """The compiled pattern, or RE2's reason for refusing it (cached: snapshots repeat their trees)."""
    try:
        return cast(Pattern, re2.compile(pattern, _options()))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def compile_pattern(pattern: str, path: str) -> Pattern:
    """Compile ``pattern`` with RE2 or raise ``InvalidInput`` naming ``path`` and the reason."""
    if len(pattern) > PATTERN_MAX_CHARS:
        raise InvalidInput(path, f"is {len(pattern)} characters, over the {PATTERN_MAX_CHARS}-character limit")
    compiled = _compiled(pattern)
    if isinstance(compiled, str):
        raise InvalidInput(path, f"invalid regular expression (RE2 syntax, as Go's regexp): {compiled}")
    return compiled
