"""The planning audit against SQLite and real PostgreSQL: one round, one transaction —
the round, its decisions, the job changes and the Works of the jobs it placed."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete, func, select

from federation.domain import Job, Placement, Plan, PodAssignment, Preemption, Queue, Resources, Task, Unplaced
from federation.domain.plans import FederationSnapshot, PendingJob
from federation.store import Decision, IllegalTransition, JobUpdate, NotFound, RoundRecord, Store
from federation.store import lifecycle as lifecycle_module
from federation.store import works as works_module
from federation.store.models import DecisionRow, JobEventRow, RoundQueueRow, RoundRow, WorkRow
from federation.store.plan_records import decisions_from_plan, queue_counts, round_from_plan, updates_from_plan

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def make_job(name: str) -> Job:
    return Job(name=name, queue="research", tasks=(Task("worker", 2, Resources.of(gpu=4)),))


@pytest.fixture
def pending(store: Store) -> Store:
    store.queues.create(Queue("research"))
    for cluster in ("east", "west"):
        store.clusters.register(cluster, 1)
    for name in ("big", "small", "huge"):
        store.jobs.submit(make_job(name))
    return store


PLAN = Plan(
    placements=(Placement("big", "east", "leaf-0", 1, (PodAssignment("worker", 0, "n0"),
                                                        PodAssignment("worker", 1, "n1"))),
                Placement("small", "west", "spine", 2)),
    unplaced=(Unplaced("huge", "needs 64 GPUs in one tier-1 domain", "topology", "east", unschedulable=False),),
    status="OPTIMAL",
    objective=42.0,
    bound=42.0,
    solve_seconds=0.25,
    score_terms={"big": {"priority": 10.0, "tier": -1.0}},
)


def _round(plan: Plan = PLAN) -> RoundRecord:
    return round_from_plan(plan, started_at=T0, ended_at=T0, trigger="submit", policy="cpsat",
                           input_digest="abc", pending_count=3)


def _counts(store: Store) -> tuple[int, int, int, int]:
    with store.db.read() as session:
        return (
            int(session.scalar(select(func.count()).select_from(RoundRow)) or 0),
            int(session.scalar(select(func.count()).select_from(DecisionRow)) or 0),
            int(session.scalar(select(func.count()).select_from(JobEventRow)) or 0),
            int(session.scalar(select(func.count()).select_from(WorkRow)) or 0),
        )


def test_a_round_records_decisions_and_job_changes_together(pending: Store) -> None:
    versions = {r.name: r.version for r in pending.jobs.in_states(["pending"])}
    result = pending.audit.record_round(_round(), decisions_from_plan(PLAN), updates_from_plan(PLAN, versions))
    assert result.applied == ("big", "small", "huge")
    assert result.skipped == ()
    big = pending.jobs.get("big")
    assert (big.state, big.cluster, big.hypernode, big.tier) == ("placed", "east", "leaf-0", 1)
    huge = pending.jobs.get("huge")
    assert (huge.state, huge.reason) == ("pending", "needs 64 GPUs in one tier-1 domain")
    types = [(e.job, e.type) for e in pending.jobs.events_since(0).events][3:]
    assert types == [("big", "Placed"), ("small", "Placed"), ("huge", "Waiting")]  # unschedulable=False

    recorded = pending.audit.get_round(result.round_id)
    assert (recorded.solver_status, recorded.placed_count, recorded.unplaced_count, recorded.policy) == (
        "OPTIMAL", 2, 1, "cpsat")
    latest = pending.audit.latest_decision("big")
    assert latest is not None
    assert latest.round.id == result.round_id
    assert latest.decision.pods == PLAN.placements[0].pods
    assert latest.decision.score_terms == {"priority": 10.0, "tier": -1.0}
    explain = pending.audit.latest_decision("huge")
    assert explain is not None
    assert (explain.decision.constraint, explain.decision.closest_cluster) == ("topology", "east")
    # The placed jobs' Works were written in the same transaction: the live placement.
    assert [(w.job, w.cluster, w.version, w.state) for w in result.created_works] == [
        ("big", "east", 1, "pending"), ("small", "west", 1, "pending")]
    [work] = pending.works.list(job="big")
    assert work.payload["pods"] == [["worker", 0, "n0"], ["worker", 1, "n1"]]
    assert pending.works.list(job="huge") == []


def test_an_unchanged_reason_writes_no_new_event_and_no_new_decision(pending: Store) -> None:
    plan = Plan(unplaced=(Unplaced("huge", "no room", "capacity"),), status="FEASIBLE")
    first = pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan))
    for _ in range(2):
        pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan))
    assert [e.type for e in pending.jobs.events_since(0, job="huge").events] == ["Submitted", "Waiting"]
    assert [d.round.id for d in pending.audit.job_audit("huge")] == [first.round_id]  # the last word stands
    moved = Plan(unplaced=(Unplaced("huge", "no room", "capacity", "east"),), status="FEASIBLE")
    pending.audit.record_round(_round(moved), decisions_from_plan(moved), updates_from_plan(moved))
    assert len(pending.audit.job_audit("huge")) == 2  # a new closest cluster is a new decision


def test_no_room_now_is_waiting_and_only_never_holdable_is_unschedulable(pending: Store) -> None:
    """Tools show ``Unschedulable`` as impossible; "no room right now" or "allowed clusters
    unavailable" must not look like that."""
    verdicts = [Unplaced("huge", "no room right now", "capacity", "east"),
                Unplaced("huge", "larger than any allowed cluster", "unschedulable", "east", unschedulable=True),
                Unplaced("huge", "allowed clusters unavailable: east (lost)", "capacity", "east")]
    for verdict in verdicts:
        plan = Plan(unplaced=(verdict,), status="FEASIBLE")
        pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan))
    events = pending.jobs.events_since(0, job="huge").events
    expected = [("Unschedulable" if v.unschedulable else "Waiting", v.reason) for v in verdicts]
    assert [(e.type, e.message) for e in events][1:] == expected
    assert not pending.jobs.get("huge").unschedulable


def test_a_job_changed_during_the_round_is_skipped_not_clobbered(pending: Store) -> None:
    versions = {r.name: r.version for r in pending.jobs.in_states(["pending"])}
    pending.jobs.cancel("big")  # the user cancels while the solver runs
    result = pending.audit.record_round(_round(), decisions_from_plan(PLAN), updates_from_plan(PLAN, versions))
    assert result.skipped == ("big",)
    assert pending.jobs.get("big").state == "cancelled"
    assert pending.works.list(job="big") == []  # a skipped placement gets no Work
    assert pending.jobs.get("small").state == "placed"
    assert [w.job for w in result.created_works] == ["small"]
    assert pending.audit.latest_decision("big") is None  # a decision that did not take effect is not on record


@pytest.mark.parametrize("failure", ["illegal-transition", "unknown-job", "unknown-cluster", "placed-without-work",
                                     "crash-mid-way", "crash-after-a-work"])
def test_a_failure_mid_round_leaves_nothing_written(pending: Store, failure: str, monkeypatch: Any) -> None:
    """Whatever step fails, no job is left placed without its Work and no Work without
    its placement: the round, decisions, job changes and Works go together or not at all."""
    pending.jobs.cancel("huge")
    before = _counts(pending)
    updates = [JobUpdate("big", state="placed", cluster="east", work={"cluster": "east"}),
               JobUpdate("small", state="placed", cluster="west", work={"cluster": "west"})]
    expected: type[Exception]
    if failure == "illegal-transition":
        updates.append(JobUpdate("huge", state="placed", cluster="east", work={}))  # cancelled, no version: refused
        expected = IllegalTransition
    elif failure == "unknown-job":
        updates.append(JobUpdate("ghost", state="placed", cluster="east", work={}))
        expected = NotFound
    elif failure == "unknown-cluster":
        updates[1] = JobUpdate("small", state="placed", cluster="gone", work={"cluster": "gone"})
        expected = NotFound
    elif failure == "placed-without-work":
        updates[1] = JobUpdate("small", state="placed", cluster="west")
        expected = ValueError
    elif failure == "crash-after-a-work":
        real_add = works_module.add_work
        added = []

        def exploding_add(*args: Any, **kwargs: Any) -> Any:
            added.append(real_add(*args, **kwargs))  # the first Work is flushed, then the crash
            raise RuntimeError("simulated crash after a Work was written")

        monkeypatch.setattr("federation.store.audit.add_work", exploding_add)
        expected = RuntimeError
    else:
        real_move = lifecycle_module.move
        calls = []

        def exploding_move(*args: Any, **kwargs: Any) -> None:
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("simulated crash after the first job was changed")
            real_move(*args, **kwargs)

        monkeypatch.setattr("federation.store.audit.move", exploding_move)
        expected = RuntimeError
    decisions = [Decision("big", "placed", cluster="east"), Decision("small", "placed", cluster="west")]
    with pytest.raises(expected):
        pending.audit.record_round(_round(), decisions, updates)
    assert _counts(pending) == before
    assert pending.jobs.get("big").state == "pending"
    assert pending.jobs.get("small").state == "pending"
    assert pending.audit.list_rounds().items == ()
    assert pending.works.list() == []


def test_preemption_requeues_the_victim_and_withdraws_its_work(pending: Store) -> None:
    pending.jobs.transition("small", "placed", cluster="east")
    pending.jobs.transition("small", "dispatched")
    pending.jobs.transition("small", "running")
    work = pending.works.create("small", "east", {})
    plan = Plan(placements=(Placement("big", "east", "leaf-0", 1),),
                preemptions=(Preemption("small", "room for higher priority big", "big"),), status="OPTIMAL")
    result = pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan))
    assert result.withdrawn_works == (work.id,)
    small = pending.jobs.get("small")
    assert (small.state, small.cluster) == ("pending", None)
    assert pending.jobs.events_since(0, job="small").events[-1].type == "Preempted"
    decision = pending.audit.latest_decision("small")
    assert decision is not None
    assert (decision.decision.outcome, decision.decision.preemptor) == ("preempted", "big")


def test_a_job_preempted_and_replaced_in_one_round(pending: Store) -> None:
    pending.jobs.transition("small", "placed", cluster="east")
    version = pending.jobs.get("small").version
    plan = Plan(placements=(Placement("small", "west", "spine", 2),),
                preemptions=(Preemption("small", "moved to defragment east"),), status="OPTIMAL")
    result = pending.audit.record_round(_round(plan), decisions_from_plan(plan),
                                        updates_from_plan(plan, {"small": version}))
    assert result.skipped == ()
    assert pending.jobs.get("small").cluster == "west"


def test_a_placement_into_a_victims_room_waits_when_the_victim_was_skipped(pending: Store) -> None:
    """The planner gave "big" the GPUs of "small" (preempted), but "small" moved on while
    the solver ran (its agent reported it running): its preemption is skipped, so it keeps
    its GPUs and "big" must not be placed onto them as well (two gangs on one set of
    GPUs), nor the round recorded as having preempted "small"."""
    pending.jobs.transition("small", "placed", cluster="east")
    pending.works.create("small", "east", {})
    pending.jobs.transition("small", "dispatched")
    versions = {r.name: r.version for r in pending.jobs.in_states(["pending", "placed", "dispatched", "running"])}
    pending.jobs.transition("small", "running")  # the agent's report lands while the solver runs
    plan = Plan(placements=(Placement("big", "east", "leaf-0", 1), Placement("huge", "west", "spine", 2)),
                preemptions=(Preemption("small", "room for higher priority big", "big"),), status="OPTIMAL")
    result = pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan, versions))
    assert result.skipped == ("small", "big")
    assert (pending.jobs.get("small").state, pending.jobs.get("big").state) == ("running", "pending")
    assert [w.job for w in pending.works.list(states=["pending", "acknowledged", "running"])] == ["small", "huge"]
    assert [w.job for w in result.created_works] == ["huge"]  # a placement elsewhere does not depend on it
    assert pending.jobs.get("huge").state == "placed"
    # The audit says what happened: neither the preemption nor big's placement took effect.
    assert pending.audit.latest_decision("small") is None
    assert pending.audit.latest_decision("big") is None


def test_job_audit_is_oldest_first_and_rounds_page_newest_first(pending: Store) -> None:
    ids = []
    for i in range(5):
        plan = Plan(unplaced=(Unplaced("huge", f"reason {i}", "capacity"),), status="FEASIBLE")
        result = pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan))
        ids.append(result.round_id)
    assert [d.round.id for d in pending.audit.job_audit("huge")] == ids
    assert [d.decision.reason for d in pending.audit.job_audit("huge", limit=2)] == ["reason 3", "reason 4"]
    first = pending.audit.list_rounds(page_size=2)
    second = pending.audit.list_rounds(page_size=2, page_token=first.next_token)
    third = pending.audit.list_rounds(page_size=2, page_token=second.next_token)
    assert [r.id for p in (first, second, third) for r in p.items] == ids[::-1]
    assert third.next_token == ""
    assert len(pending.audit.decisions(ids[0])) == 1
    assert pending.audit.job_audit("nobody") == []
    pruned = pending.audit.prune_batch(T0 + timedelta(seconds=1), batch=10)  # all five ended before
    assert (pruned.rounds, pruned.kept_rounds) == (4, 1)  # the pending job's latest decision stays
    assert [r.id for r in pending.audit.list_rounds().items] == ids[4:]
    assert [d.round.id for d in pending.audit.job_audit("huge")] == ids[4:]
    with pytest.raises(NotFound):
        pending.audit.get_round(ids[0])


def test_a_bad_outcome_is_refused(pending: Store) -> None:
    with pytest.raises(ValueError, match="outcome"):
        pending.audit.record_round(_round(), [Decision("big", "maybe")])
    assert pending.audit.list_rounds().items == ()


_KILLED_MID_ROUND = """
import os, sys
from federation.domain import Placement, Plan
from federation.store import Store
from federation.store import audit
from federation.store.plan_records import decisions_from_plan, round_from_plan, updates_from_plan
from datetime import UTC, datetime

real_add = audit.add_work

def add_then_die(*args, **kwargs):
    real_add(*args, **kwargs)  # the Work row is flushed to the database, not committed
    print("work written", flush=True)
    os._exit(9)  # killed: no rollback, no commit, the connection just drops

audit.add_work = add_then_die
store = Store(sys.argv[1])
plan = Plan(placements=(Placement("big", "east", "leaf-0", 1), Placement("small", "west", "spine", 2)))
t0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
store.audit.record_round(round_from_plan(plan, started_at=t0, ended_at=t0), decisions_from_plan(plan),
                         updates_from_plan(plan))
"""


def test_a_process_killed_mid_round_leaves_no_job_placed_without_its_work(
        pending: Store, migrated_url: str) -> None:
    """A real kill (the process exits inside the transaction, after a job was moved and
    its Work flushed) leaves nothing: the job is not placed, no Work, no round."""
    before = _counts(pending)
    child = subprocess.run([sys.executable, "-c", _KILLED_MID_ROUND, migrated_url], capture_output=True,
                           text=True, timeout=120)
    assert (child.returncode, child.stdout.strip()) == (9, "work written"), child.stderr
    assert _counts(pending) == before
    assert [pending.jobs.get(n).state for n in ("big", "small")] == ["pending", "pending"]
    assert pending.works.list() == [] and pending.audit.list_rounds().items == ()
    # The next round (here: the same plan recorded whole) places both with their Works.
    plan = Plan(placements=(Placement("big", "east", "leaf-0", 1), Placement("small", "west", "spine", 2)))
    pending.audit.record_round(_round(plan), decisions_from_plan(plan), updates_from_plan(plan))
    assert sorted((w.job, w.cluster) for w in pending.works.list()) == [("big", "east"), ("small", "west")]


def test_a_tenants_rounds_count_only_its_own_queues(store: Store) -> None:
    """Issue 10: ListRounds showed every tenant the round's totals. Each round records its
    counts per queue; ``list_rounds(queues=…)`` sums those queues alone and skips rounds
    that counted none of them; the totals stay for admins (``queues=None``)."""
    store.queues.create(Queue("research"))
    store.queues.create(Queue("vision"))
    for name in ("big", "small", "huge"):
        store.jobs.submit(make_job(name))
    store.jobs.submit(Job(name="eye", queue="vision", tasks=(Task("worker", 1, Resources.of(gpu=1)),)))
    snapshot = FederationSnapshot(clusters=(), queues=(Queue("research"), Queue("vision")), pending=tuple(
        PendingJob(r.job) for r in store.jobs.in_states(["pending"])))
    both = Plan(placements=PLAN.placements, unplaced=(*PLAN.unplaced, Unplaced("eye", "no room", "capacity")),
                status="OPTIMAL", objective=7.0, bound=7.0)
    counts = queue_counts(both, snapshot)
    assert [(q.queue, q.pending, q.placed, q.unplaced, q.preempted) for q in counts] == [
        ("research", 3, 2, 1, 0), ("vision", 1, 0, 1, 0)]
    first = store.audit.record_round(round_from_plan(both, started_at=T0, ended_at=T0, pending_count=4,
                                                     queue_counts=counts), decisions_from_plan(both)).round_id
    research_only = Plan(unplaced=(Unplaced("huge", "still no room", "capacity"),), status="OPTIMAL")
    second = store.audit.record_round(round_from_plan(
        research_only, started_at=T0, ended_at=T0, pending_count=1,
        queue_counts=queue_counts(research_only, replace(snapshot, pending=snapshot.pending[2:3]))),
        decisions_from_plan(research_only)).round_id

    admin = store.audit.list_rounds().items
    assert [(r.id, r.pending_count, r.placed_count, r.unplaced_count) for r in admin] == [
        (second, 1, 0, 1), (first, 4, 2, 2)]
    vision = store.audit.list_rounds(queues=["vision"]).items
    assert [(r.id, r.pending_count, r.placed_count, r.unplaced_count) for r in vision] == [(first, 1, 0, 1)]
    research = store.audit.list_rounds(queues=["research"], page_size=1)
    assert [(r.id, r.pending_count) for r in research.items] == [(second, 1)]
    rest = store.audit.list_rounds(queues=["research"], page_size=1, page_token=research.next_token)
    assert [(r.id, r.pending_count, r.placed_count) for r in rest.items] == [(first, 3, 2)] and not rest.next_token
    assert store.audit.list_rounds(queues=[]).items == ()
    # deleting a round (retention) deletes its counts
    with store.db.write() as session:
        session.execute(delete(RoundRow).where(RoundRow.id == first))
    with store.db.read() as session:
        assert session.scalar(select(func.count()).select_from(RoundQueueRow)) == 1
