"""Audit retention on SQLite and real PostgreSQL: old rounds pruned in bounded batches,
never the latest decision of a live job, a watermark that ``fedctl audit`` reports, and
the background pass of a running service."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conftest import ManualClock
from fedctlkit import afedctl
from fleetkit import eventually
from servicekit import running

from federation.control.retention import AuditRetention
from federation.domain import Job, Plan, Queue, Resources, Task, Unplaced
from federation.store import Store
from federation.store.plan_records import decisions_from_plan, round_from_plan

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _submit(store: Store, *names: str) -> None:
    store.queues.create(Queue("research"))
    for name in names:
        store.jobs.submit(Job(name=name, queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))


def _round(store: Store, ended: datetime, *unplaced: tuple[str, str]) -> int:
    """A round that left ``unplaced`` (job, reason) pending, ended at ``ended``."""
    plan = Plan(unplaced=tuple(Unplaced(job, reason, "capacity") for job, reason in unplaced), status="OPTIMAL")
    round_ = round_from_plan(plan, started_at=ended, ended_at=ended, trigger="test", policy="cpsat")
    return store.audit.record_round(round_, decisions_from_plan(plan)).round_id


def _rounds(store: Store) -> list[int]:
    return sorted(r.id for r in store.audit.list_rounds(page_size=1000).items)


def test_old_rounds_go_but_a_live_jobs_latest_decision_stays(store: Store) -> None:
    _submit(store, "waiting", "done", "fresh")
    r1 = _round(store, T0, ("waiting", "a"), ("done", "a"))
    r2 = _round(store, T0 + HOUR, ("waiting", "b"))  # waiting's latest: kept while it is pending
    r3 = _round(store, T0 + 2 * HOUR, ("done", "b"))
    store.jobs.cancel("done")  # finished: retention applies to it in full
    r4 = _round(store, T0 + 10 * HOUR, ("fresh", "a"))
    assert store.audit.pruning() is None

    batch = store.audit.prune_batch(T0 + 5 * HOUR, batch=100)
    assert (batch.rounds, batch.decisions, batch.kept_rounds) == (2, 3, 1)
    assert _rounds(store) == [r2, r4] and r1 not in _rounds(store) and r3 not in _rounds(store)
    assert [(d.round.id, d.decision.reason) for d in store.audit.job_audit("waiting")] == [(r2, "b")]
    assert store.audit.job_audit("done") == []
    assert [d.round.id for d in store.audit.job_audit("fresh")] == [r4]
    mark = store.audit.pruning()
    assert mark is not None and mark.pruned_before == T0 + 5 * HOUR
    assert (mark.rounds_pruned, mark.decisions_pruned) == (2, 3)

    r5 = _round(store, T0 + 11 * HOUR, ("waiting", "c"))  # a newer decision: r2 is no longer protected
    again = store.audit.prune_batch(T0 + 12 * HOUR, batch=100)
    assert (again.rounds, again.kept_rounds) == (1, 2)  # r2 goes; r4 and r5 hold fresh's and waiting's latest
    assert _rounds(store) == [r4, r5]
    mark = store.audit.pruning()
    assert mark is not None and mark.pruned_before == T0 + 12 * HOUR and mark.rounds_pruned == 3


async def test_a_pass_prunes_in_bounded_batches_and_gets_past_rounds_it_must_keep(
        store: Store, clock: ManualClock) -> None:
    live = [f"live-{i}" for i in range(7)]
    _submit(store, "old", *live)
    for i in range(23):
        _round(store, T0 + i * timedelta(minutes=1), ("old", f"r{i}"))
    for i, job in enumerate(live):  # seven rounds each holding a live job's only decision
        _round(store, T0 + timedelta(hours=1, minutes=i), (job, "waiting"))
    store.jobs.cancel("old")
    clock.advance(2 * 86_400)  # the store's now: every round above ended more than an hour ago
    retention = AuditRetention(store, 3600, batch=5, pause_seconds=0)
    result = await retention.prune_now()
    assert (result.rounds, result.kept_rounds, result.batches) == (23, 7, 6)  # ceil(30 / 5) transactions
    assert len(_rounds(store)) == 7
    assert all(len(store.audit.job_audit(job)) == 1 for job in live)
    assert (await retention.prune_now()).rounds == 0  # idempotent; kept rounds are examined, not deleted


async def test_fedctl_audit_says_older_rounds_were_pruned_and_the_service_prunes_in_the_background(
        store: Store, clock: ManualClock) -> None:
    _submit(store, "early")
    _round(store, T0, ("early", "first"))
    kept = _round(store, T0 + HOUR, ("early", "second"))
    clock.advance(2 * 86_400)  # the store's now: two days after the job was submitted
    async with running(store, audit_retention_seconds=86_400) as server:
        assert server.retention is not None
        await eventually(lambda: store.audit.pruning() is not None, what="the first background pass")
        assert [d.round.id for d in store.audit.job_audit("early")] == [kept]  # pending: its latest stays
        text = await afedctl(server.address, "audit", "early")
        as_json = await afedctl(server.address, "audit", "early", "-o", "json")
    assert text.code == 0, text.err
    assert "note: audit retention pruned the rounds that ended before" in text.out, text.out
    assert "older decisions about early are no longer kept" in text.out
    assert as_json.code == 0 and '"prunedBefore"' in as_json.out, as_json.out


async def test_a_job_submitted_after_the_pruned_rounds_gets_no_note(store: Store) -> None:
    _submit(store, "early")
    _round(store, T0, ("early", "first"))
    store.audit.prune_batch(T0 + HOUR, batch=10)
    store.jobs.submit(Job(name="late", queue="research", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
    store.jobs.cancel("early")
    _round(store, T0 + 2 * HOUR, ("late", "waiting"))
    async with running(store) as server:
        late = await afedctl(server.address, "audit", "late", "-o", "json")
    assert late.code == 0 and "prunedBefore" not in late.out
