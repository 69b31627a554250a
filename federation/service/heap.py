"""Keep the process's startup heap out of the garbage collector's full collections.

Why: a full (generation 2) collection walks every object the collector tracks while it
holds the GIL, so it stalls the event loop whichever thread triggers it. A started server
tracks about 140,000 objects that live as long as the process (the modules, functions and
classes of grpc, SQLAlchemy, protobuf and OR-Tools), and under load (a ListJobs loop,
agents reporting) full collections came every second or two: at 10,000 jobs on 100
clusters each took about 130 ms, half of it walking that startup heap
(docs/benchmarks.md, "Central event loop under a large fleet"). ``gc.freeze`` moves the
objects tracked at that moment into a permanent generation the collector never walks;
reference counting still frees any of them that is dropped. One full collection first,
so no garbage is frozen (what the ``gc.freeze`` documentation advises for pre-fork
servers). What the fleet itself holds (snapshots, the last plan) is created later and
still walked.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> bool:
    """Freeze what the collector tracks now, once per process; True if this call froze it."""
    if gc.get_freeze_count():
        return False
    gc.collect()
    gc.freeze()
    return True
