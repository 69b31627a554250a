"""Keep the garbage collector's full collections rare and short in the central service.

Why: a full (generation 2) collection walks every object the collector tracks while it
holds the GIL, so it stalls the event loop whichever thread triggers it
(docs/benchmarks.md, "Central event loop under a large fleet", twenty-sixth and
twenty-seventh stops). Three things keep them down:

- **The startup heap is frozen.** A started server tracks about 140,000 objects that live
  as long as the process (the modules, functions and classes of grpc, SQLAlchemy,
  protobuf and OR-Tools). ``gc.freeze`` moves the objects tracked at that moment into a
  permanent generation the collector never walks; reference counting still frees any of
  them that is dropped. One full collection first, so no garbage is frozen (what the
  ``gc.freeze`` documentation advises for pre-fork servers). Nothing created later is
  frozen: snapshots and plans are replaced, and a frozen cycle would never be freed.
- **The fleet's records are fewer objects.** What the fleet holds is walked: at 100
  clusters of 100 nodes and 10,000 jobs, 99,000 objects after the first round, a quarter
  of them resource vectors that repeat; the store decodes one shared vector per distinct
  value (``Resources.shared``), 74,000 objects.
- **Full collections are considered less often** (``space_full_collections``). CPython
  considers one after every 10 middle-generation collections, and runs it once the objects
  promoted to the old generation since the last one exceed a quarter of it. Each planning
  round holds what it read and decided (store rows, Works, its input and plan) for
  seconds in worker threads, so those objects are promoted and a full collection followed
  almost every round: 13 in one probe of the agents phase, 79-721 ms each, which freed
  642 objects in all against 100,000-220,000 walked each time (reference counting frees
  the rest the moment it is dropped). Every 100 middle collections: one, which freed
  the same garbage. Young cycles are collected as often as before (generations 0 and 1
  keep their thresholds); a cycle that reached the old generation waits up to ~700,000
  tracked allocations instead of ~70,000. ``tests/unit/test_collector_heap.py`` replaces
  snapshots and plans in reference cycles thousands of times and checks that what is
  tracked stays within that bound (docs/design/garbage-collector.md).
"""

from __future__ import annotations

import gc

# Middle-generation collections between two chances of a full one (CPython's default: 10).
FULL_COLLECTION_EVERY = 100


def freeze_startup_heap() -> bool:
    """Freeze what the collector tracks now, once per process; True if this call froze it."""
    if gc.get_freeze_count():
        return False
    gc.collect()
    gc.freeze()
    return True


def space_full_collections() -> None:
    """Consider a full collection every ``FULL_COLLECTION_EVERY`` middle collections (the
    young thresholds are left as they are)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
