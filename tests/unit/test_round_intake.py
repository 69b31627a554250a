"""Which pending jobs a bounded round considers: ``control.snapshot.intake`` splits the
``max_pending`` budget between queues so every queue with demand is represented."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from federation.control.snapshot import intake
from federation.domain import Job, Resources, Task
from federation.service.views import explain
from federation.store import JobRecord
from federation.v1 import jobs_pb2

T0 = datetime(2026, 1, 1, tzinfo=UTC)

CASES = [
    ("under_the_limit_everything_is_taken", {"a": 3, "b": 2}, {}, 10, {"a": 3, "b": 2}),
    ("equal_queues_split_the_limit_evenly", {"a": 100, "b": 100}, {}, 10, {"a": 5, "b": 5}),
    ("a_small_queue_leaves_its_unused_share_to_the_big_one", {"a": 100, "b": 2}, {}, 10, {"a": 8, "b": 2}),
    ("an_odd_remainder_goes_to_the_higher_priority_queue", {"lo": 100, "hi": 100}, {"hi": 5}, 5,
     {"hi": 3, "lo": 2}),
    ("a_high_priority_backlog_does_not_hide_a_low_priority_queue", {"hi": 10_000, "lo": 1}, {"hi": 9}, 4,
     {"hi": 3, "lo": 1}),
    ("equal_priority_ties_break_by_name", {"b": 9, "a": 9, "c": 9}, {}, 2, {"a": 1, "b": 1}),
    ("queues_without_demand_take_nothing", {"a": 0, "b": 4}, {}, 3, {"b": 3}),
    ("a_zero_limit_considers_nothing", {"a": 4}, {}, 0, {}),
]


@pytest.mark.parametrize(("counts", "priorities", "limit", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_intake_shares(counts: dict[str, int], priorities: dict[str, int], limit: int,
                       expected: dict[str, int]) -> None:
    assert intake(counts, priorities, limit) == expected


def test_intake_never_exceeds_the_limit_or_a_queues_demand() -> None:
    counts = {f"q{i}": i * 7 % 50 for i in range(40)}
    shares = intake(counts, {f"q{i}": i % 3 for i in range(40)}, 300)
    assert sum(shares.values()) == 300
    assert all(shares[q] <= counts[q] for q in shares)
    assert set(shares) == {q for q, n in counts.items() if n}  # every queue with demand is represented


def test_a_job_no_round_has_considered_yet_is_explained_as_queued() -> None:
    """Outside a bounded round's intake a job gets no decision; ExplainJob must not look empty."""
    job = Job("j", "q", (Task("w", 2, Resources.of(gpu=8)),))
    record = JobRecord(name="j", queue="q", tenant="t", job=job, spec_digest="", state="pending",
                       unschedulable=False, reason="", message="", cluster=None, hypernode=None, tier=None,
                       restarts=0, created_at=T0, updated_at=T0, version=1)
    resp = explain(record, None)
    assert resp.state == jobs_pb2.JOB_STATE_PENDING
    assert resp.pending.reason.startswith("queued, not yet considered")
