"""JobEventBatch messages joined from each event's precomputed framing (service/event_batches.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.service.event_batches import MAX_BATCH_BYTES, MAX_BATCH_EVENTS, frame, pack, varint
from federation.service.event_feed import FeedItem
from federation.v1 import jobs_pb2


def _event(i: int, message: str = "") -> jobs_pb2.JobEvent:
    ev = jobs_pb2.JobEvent(event_id=i, type=jobs_pb2.JOB_EVENT_TYPE_SUBMITTED, message=message)
    ev.job.id = f"job-{i}"
    ev.job.spec.labels["team"] = "nlp"
    return ev


def _decode(batch: bytes) -> list[jobs_pb2.JobEvent]:
    return list(jobs_pb2.JobEventBatch.FromString(batch).events)


@pytest.mark.parametrize("n", [1, 127, 128, 300, 16_383, 16_384, 2**21, 2**35])
def test_varint_matches_protobufs_own_encoding_at_every_byte_boundary(n: int) -> None:
    # an int64 field's varint is protobuf's encoding of the same number: field 1, tag 0x08
    assert b"\x08" + varint(n) == jobs_pb2.JobEvent(event_id=n).SerializeToString()


def test_zero_is_one_byte_and_a_negative_length_is_refused() -> None:
    assert varint(0) == b"\x00"  # protobuf omits a zero int64, so compare it here instead
    with pytest.raises(ValueError):
        varint(-1)


@pytest.mark.parametrize("size", [0, 100, 127, 128, 20_000, 300_000], ids=lambda s: f"message-{s}-chars")
def test_one_framed_event_is_the_batch_protobuf_would_serialize(size: int) -> None:
    ev = _event(7, "x" * size)
    framed = frame(ev.SerializeToString())
    assert framed == jobs_pb2.JobEventBatch(events=[ev]).SerializeToString()
    assert _decode(framed) == [ev]


@given(st.lists(st.tuples(st.integers(1, 2**40), st.text(max_size=300)), max_size=40))
def test_joined_frames_round_trip_to_the_same_events_in_order(spec: list[tuple[int, str]]) -> None:
    events = [_event(i, m) for i, m in spec]
    joined = b"".join(frame(e.SerializeToString()) for e in events)
    assert _decode(joined) == events
    assert joined == jobs_pb2.JobEventBatch(events=events).SerializeToString()


def test_pack_splits_by_event_count_and_keeps_order() -> None:
    events = [_event(i) for i in range(1, 2 * MAX_BATCH_EVENTS + 11)]
    batches = list(pack(frame(e.SerializeToString()) for e in events))
    assert [len(_decode(b)) for b in batches] == [MAX_BATCH_EVENTS, MAX_BATCH_EVENTS, 10]
    assert [e for b in batches for e in _decode(b)] == events


def test_pack_splits_by_bytes_and_an_oversized_event_goes_alone() -> None:
    small = [_event(i, "s" * 100) for i in range(1, 4)]
    big = _event(4, "b" * (MAX_BATCH_BYTES + 10))
    tail = [_event(i, "t" * 400_000) for i in range(5, 9)]
    events = [*small, big, *tail]
    batches = list(pack(frame(e.SerializeToString()) for e in events))
    assert [[e.event_id for e in _decode(b)] for b in batches] == [[1, 2, 3], [4], [5, 6], [7, 8]]
    assert all(len(b) <= MAX_BATCH_BYTES for i, b in enumerate(batches) if i != 1)


def test_pack_of_nothing_sends_nothing_and_bounds_must_be_positive() -> None:
    assert list(pack([])) == []
    with pytest.raises(ValueError):
        list(pack([b"x"], max_events=0))
    with pytest.raises(ValueError):
        list(pack([b"x"], max_bytes=0))


def test_small_bounds_are_honoured_exactly() -> None:
    frames = [frame(_event(i).SerializeToString()) for i in range(1, 8)]
    assert [len(_decode(b)) for b in pack(frames, max_events=3)] == [3, 3, 1]
    one = len(frames[0])
    assert [len(_decode(b)) for b in pack(frames, max_bytes=2 * one)] == [2, 2, 2, 1]


def test_every_feed_item_carries_its_framing_computed_once() -> None:
    wire = _event(3, "m").SerializeToString()
    item = FeedItem(3, "nlp-q", wire)
    assert item.framed == frame(wire) and _decode(item.framed) == [item.view]
