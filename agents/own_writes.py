"""What this agent's own pod writes did to a backend's pods, for the shared cluster view.

Why: in a pass where every job creates and binds pods, each job must see the room the job
before it took, and rebuilding the whole view for that cost one build per job (200 new
jobs on 4,000 nodes: 38 s of a worker thread; docs/benchmarks.md, "Agent pass where every
job writes"). The view only needs to know which pods changed and how, and only this agent's
own writes can be known that way: a backend records each of them here as it lands in what
``list_pods`` returns (the pod before and after, and the revisions it moved the backend
between), so ``agents/core/view.py`` can bring a view forward by exactly those changes. A
watch event or any other change is not recorded, so it leaves a gap in the chain of
revisions and the view is rebuilt, as before.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from agents.core.records import PodRecord

# Own writes remembered: a view more than this many writes behind is rebuilt instead.
# A pass applies a few writes per job and the view follows every job, so this is ample.
OWN_WRITES_KEPT = 4096


@dataclass(frozen=True)
class PodChange:
    """One own pod write as the backend's pods show it: the pod before and after (None:
    absent), which moved the backend's revision from ``since`` to ``until``."""

    since: int
    until: int
    before: PodRecord | None
    after: PodRecord | None


class OwnPodWrites:
    """A backend's log of its own pod writes (the last ``OWN_WRITES_KEPT``)."""

    def __init__(self, kept: int = OWN_WRITES_KEPT) -> None:
        self._log: deque[PodChange] = deque(maxlen=kept)

    @contextlib.contextmanager
    def landing(self, revision: Callable[[], int], pod: Callable[[], PodRecord | None]) -> Iterator[None]:
        """Around the synchronous step in which an own write changes the backend's pods
        (never around an ``await``: a watch event landing there would pass for ours).
        ``pod`` reads the written pod as ``list_pods`` would return it."""
        since, before = revision(), pod()
        yield
        until = revision()
        if until != since:
            self._log.append(PodChange(since, until, before, pod()))

    def between(self, since: int, until: int) -> Sequence[PodChange] | None:
        """The own writes that took the revision from ``since`` to ``until``, oldest first,
        when nothing else moved it in between; None otherwise (or when the log no longer
        reaches back that far)."""
        if since == until:
            return ()
        chain: list[PodChange] = []
        cursor = until
        for change in reversed(self._log):
            if change.until > cursor:
                continue  # after ``until``: written since the caller read the revision
            if change.until != cursor:
                return None  # something other than our writes moved the revision here
            chain.append(change)
            cursor = change.since
            if cursor == since:
                chain.reverse()
                return chain
            if cursor < since:
                return None
        return None
