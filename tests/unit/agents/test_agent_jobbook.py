"""The runtime's job book: a finished job leaves the active set once central has applied
its final report, and only a tombstone (job → version) remains, so the per-pass cost
follows the active jobs, not the agent's history, while stale Works are still ignored."""

from __future__ import annotations

from dataclasses import replace

from agentkit import job, work

from agents.runtime_jobs import JobBook, JobSlot
from federation.domain.states import WorkPhase
from federation.domain.works import Work


def _work(name: str, version: int = 1, *, cancelled: bool = False) -> Work:
    w = work(job(name), version=version, cancelled=cancelled)
    return replace(w, work_id=f"{name}@{version}")


def _report(slot: JobSlot, phase: WorkPhase, message: str = "") -> None:
    """What the runtime does when a status is put on the stream."""
    slot.sent += 1
    slot.final = slot.is_final(phase, message)


def test_a_finished_job_is_retired_only_once_central_applied_its_final_report() -> None:
    book = JobBook()
    assert book.accept(_work("a")) and book.accept(_work("b"))
    a = book.slots["a"]
    _report(a, WorkPhase.RUNNING)
    _report(a, WorkPhase.SUCCEEDED, "job Completed")
    assert not book.acked("a@1")  # the Running report: the final one is not applied yet
    assert "a" in book.slots
    assert book.acked("a@1")
    assert set(book.slots) == {"b"} and book.tombstones["a"].version == 1
    assert book.keep() == {"a", "b"}  # a finished job's terminal pods stay for inspection


def test_a_tombstone_ignores_replays_and_a_newer_version_revives_the_job() -> None:
    book = JobBook()
    book.accept(_work("a", 2))
    slot = book.slots["a"]
    _report(slot, WorkPhase.FAILED, "job Failed")
    book.acked("a@2")
    assert not book.accept(_work("a", 2)) and not book.accept(_work("a", 1))
    assert "a" not in book.slots
    assert book.accept(_work("a", 3))  # placed again after it finished here
    assert book.slots["a"].work.version == 3 and "a" not in book.tombstones


def test_a_withdrawn_job_retires_without_lingering_and_a_sync_or_cancel_ends_lingering() -> None:
    book = JobBook()
    book.accept(_work("gone"))
    book.accept(_work("done"))
    assert book.cancel("gone", 1)
    gone = book.slots["gone"]
    _report(gone, WorkPhase.CANCELLED, "withdrawing 3 objects")
    book.acked("gone@1")
    assert "gone" in book.slots  # still withdrawing
    _report(gone, WorkPhase.CANCELLED, "withdrawn")
    assert book.acked("gone@1") and not book.tombstones["gone"].linger
    done = book.slots["done"]
    _report(done, WorkPhase.SUCCEEDED)
    book.acked("done@1")
    assert book.keep() == {"done"}
    assert not book.cancel("done", 0) and book.cancel("done", 1)
    assert book.keep() == set()
    book.accept(_work("kept"))
    _report(book.slots["kept"], WorkPhase.SUCCEEDED)
    book.acked("kept@1")
    book.sync([])  # a new stream's desired set without it: its leftovers are orphans
    assert book.keep() == set()


def test_acks_of_an_old_stream_never_count_and_unacked_final_reports_are_resent() -> None:
    book = JobBook()
    book.accept(_work("a"))
    slot = book.slots["a"]
    _report(slot, WorkPhase.SUCCEEDED)
    book.sync([_work("a")])  # the stream broke before the ack: re-report on the new one
    assert slot.reported is None and (slot.sent, slot.acked) == (0, 0) and not slot.retirable
    _report(slot, WorkPhase.SUCCEEDED)
    assert book.acked("a@1") and not book.slots


def test_an_ack_for_an_unknown_or_superseded_work_changes_nothing() -> None:
    book = JobBook()
    assert not book.acked("nobody@1")
    book.accept(_work("a", 1))
    book.accept(_work("a", 2))
    slot = book.slots["a"]
    _report(slot, WorkPhase.RUNNING)
    _report(slot, WorkPhase.SUCCEEDED)
    assert not book.acked("a@1")  # the v1 report applied; v2's final one not yet
    assert book.acked("a@2") and book.tombstones["a"].version == 2
