"""``JobEventBatch`` messages built from events serialized once, without re-serializing them.

Why: with 200 watchers, sending every event as its own message cost 400 grpc.aio writes
per submission (two events each) at ~60-80 us apiece on the one event loop, and SubmitJob's
p50 grew 2.2-2.6x server-side (docs/benchmarks.md, issue 10). ``WatchJobBatches`` sends one
message per watcher per feed turn instead. A protobuf message is the concatenation of its
fields' encodings, so ``JobEventBatch { repeated JobEvent events = 1; }`` is exactly the
concatenation of each event's field-1 framing: the tag byte 0x0A (field 1, wire type 2 =
length-delimited), the event's length as a base-128 varint, then the event's bytes. The
event feed computes that framing once per event (``frame``); each watcher's batch is one
``bytes.join`` of the framings of the events it may see.

Bounds (docs/design/limits.md): at most ``MAX_BATCH_EVENTS`` events and ``MAX_BATCH_BYTES``
bytes per message, so a watcher that resumes far back, or a burst of thousands of events,
never builds one huge message (clients' default receive limit is 4 MiB). An event larger
than the byte bound on its own still goes, alone in its message: an event is never split
or dropped (a JobSpec is itself limited to 1 MiB serialized, so such an event is only
slightly larger than the bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

MAX_BATCH_EVENTS = 256
MAX_BATCH_BYTES = 1024 * 1024
_TAG = b"\x0a"  # field 1, wire type 2 (length-delimited)


def varint(n: int) -> bytes:
    """``n`` (>= 0) as a protobuf base-128 varint: 7 bits a byte, least significant first."""
    if n < 0:
        raise ValueError("varint: negative length")
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(event: bytes) -> bytes:
    """A serialized ``JobEvent`` as field 1 of ``JobEventBatch`` (module doc)."""
    return _TAG + varint(len(event)) + event


def pack(frames: Iterable[bytes], *, max_events: int = MAX_BATCH_EVENTS,
         max_bytes: int = MAX_BATCH_BYTES) -> Iterator[bytes]:
    """Serialized ``JobEventBatch`` messages holding ``frames`` in order, each within the bounds.

    A batch is never empty; a frame over ``max_bytes`` by itself is sent alone.
    """
    if max_events < 1 or max_bytes < 1:
        raise ValueError("pack: max_events and max_bytes must be positive")
    batch: list[bytes] = []
    size = 0
    for f in frames:
        if batch and (len(batch) >= max_events or size + len(f) > max_bytes):
            yield b"".join(batch)
            batch, size = [], 0
        batch.append(f)
        size += len(f)
    if batch:
        yield b"".join(batch)
