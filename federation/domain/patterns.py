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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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


# Every distinct pattern of one snapshot is matched by one RE2 Set: a single DFA pass per
# node name, whatever the number of patterns (modelled on RE2::Set, re2/set.h). Matching
# each pattern on its own cost one pass over the node names per pattern: a real tree of
# 1,000 leaves, one ``^rack-N-`` pattern each, over 20,000 nodes took over a minute of
# CPU; the Set answers it in a tenth of a second.
PATTERN_SET_MAX_MEMORY = 32 << 20  # bytes of RE2 program for a snapshot's patterns together
MAX_PATTERNS_PER_NAME = 64  # distinct patterns one node name may match
_ALWAYS = ""  # index 0 of every Set: it matches any name, so an empty answer means RE2 gave up


@dataclass(frozen=True)
class MatchBudget:
    """The CPU time matching one snapshot's patterns may take, read from ``clock``
    (``time.thread_time`` at the wire edge): checked after each node name."""

    seconds: float
    clock: Callable[[], float]


class PatternCostError(Exception):
    """The patterns break a matching bound; ``index`` is the pattern to blame."""

    def __init__(self, index: int, rule: str) -> None:
        super().__init__(rule)
        self.index, self.rule = index, rule


def _set_options() -> re2.Options:
    options = _options()
    options.max_mem = PATTERN_SET_MAX_MEMORY
    return options


def select_names(patterns: Sequence[str], names: Iterable[str],
                 budget: MatchBudget | None = None) -> list[frozenset[str]]:
    """For each pattern (each already accepted by ``compile_pattern``), the names it finds.

    Why the bounds: a Set's cost per name grows with how many pattern positions the name
    keeps alive at once, so a few dozen patterns such as ``a[ab]{100}c`` cost ~0.1 s per
    253-character name (minutes for a cluster). No count of patterns or characters
    separates those from a real tree of thousands of simple patterns, so the matching
    itself is bounded: the patterns' RE2 program together (``PATTERN_SET_MAX_MEMORY``),
    the patterns one name may match (``MAX_PATTERNS_PER_NAME``: each match is a set
    entry, and patterns matching every name multiplied them), and, where ``budget`` is
    given, its CPU time. A breach raises ``PatternCostError`` naming the longest pattern
    (or the one that tipped a name over), for the caller to report with its field path.
    """
    if not patterns:
        return []
    longest = max(range(len(patterns)), key=lambda i: len(patterns[i]))
    matcher = re2.Set.SearchSet(_set_options())
    matcher.Add(_ALWAYS)
    try:
        for pattern in patterns:
            matcher.Add(pattern)
        matcher.Compile()
    except re2.error:
        raise PatternCostError(longest, f"the snapshot's {len(patterns)} distinct regexMatch patterns need more "
                                        f"than {PATTERN_SET_MAX_MEMORY >> 20} MiB of RE2 program together") from None
    found: list[list[str]] = [[] for _ in patterns]
    started = budget.clock() if budget is not None else 0.0
    for name in names:
        hits = matcher.Match(name) or _one_by_one(patterns, name)
        if len(hits) > MAX_PATTERNS_PER_NAME + 1:
            raise PatternCostError(sorted(hits)[MAX_PATTERNS_PER_NAME + 1] - 1,
                                   f"node {name[:80]!r} is matched by {len(hits) - 1} distinct regexMatch patterns, "
                                   f"over the limit of {MAX_PATTERNS_PER_NAME}")
        for hit in hits:
            if hit:
                found[hit - 1].append(name)
        if budget is not None and budget.clock() - started > budget.seconds:
            raise PatternCostError(longest, f"matching the snapshot's {len(patterns)} distinct regexMatch patterns "
                                            f"against its node names took over {budget.seconds:g} s of CPU (the "
                                            "limit); use exactMatch or simpler patterns")
    return [frozenset(names_found) for names_found in found]


def _one_by_one(patterns: Sequence[str], name: str) -> list[int]:
    """Set indices of the patterns finding ``name``, one search each: RE2's Set has no
    fallback when its DFA runs out of memory and answers nothing, which the always-matching
    index 0 exposes, so that name is matched the slow, exact way instead."""
    return [0, *(i + 1 for i, pattern in enumerate(patterns) if compile_pattern(pattern, "pattern").search(name))]
