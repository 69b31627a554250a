"""The job's runtime state as saved on its Service: round trip, bounds, hostile input, versions."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from agentkit import job, work

from agents.core.checkpoints import (
    CHECKPOINT_FORMAT,
    MAX_CHECKPOINT_BYTES,
    Checkpoint,
    CheckpointError,
    checkpoint_of,
    decode,
    encode,
    restore,
)
from agents.core.recovery import POD_EVICTED, JobRuntimeState, PodEvent, PodRef

JOB = job(tasks=(("master", 1, 0), ("worker", 8, 8)))
WORK = work(JOB, version=3)


def ref(task: str, index: int, node: str = "") -> PodRef:
    return PodRef(f"train-{task}-{index}", task, index, node)


def body(**changes: object) -> str:
    fields: dict[str, object] = {"v": CHECKPOINT_FORMAT, "work": WORK.work_id, "version": 3, "retries": 1,
                                 "phase": "Running", "reason": "", "live": {"worker": [[0, 3]]}, "evicted": []}
    fields.update(changes)
    return json.dumps(fields)


def test_round_trip_resumes_retries_phase_live_pods_and_unacted_deletions() -> None:
    live = (ref("master", 0, "n1"), *(ref("worker", i, "n2") for i in (0, 1, 2, 5, 7)))
    gone = PodEvent(POD_EVICTED, "worker", (ref("worker", 4, "n3"),), None, 1712.5, "n3", deleted=True)
    acted = PodEvent(POD_EVICTED, "worker", (ref("worker", 6),), None, 1700.0, deleted=True)
    state = JobRuntimeState(phase="Failed", retries=2, reason="maxRetry 3 exhausted", evicted=(gone, acted),
                            handled=frozenset({acted.key}))
    text = encode(checkpoint_of(WORK, state, live))
    assert json.loads(text)["live"] == {"master": [0], "worker": [[0, 2], 5, 7]}  # runs, not names
    back = restore(JobRuntimeState(), decode(text), WORK)
    assert (back.retries, back.phase, back.reason) == (2, "Failed", "maxRetry 3 exhausted")
    assert back.live == tuple(replace(r, node="") for r in live)  # nodes are not kept
    assert back.evicted == (replace(gone, node="", pods=(ref("worker", 4),)),)  # the acted-on one is not kept
    assert back.handled == frozenset()


def test_ten_thousand_live_pods_take_a_few_bytes() -> None:
    big = job(tasks=(("worker", 10_000, 1),))
    live = tuple(PodRef(f"train-worker-{i}", "worker", i) for i in range(10_000))
    text = encode(checkpoint_of(work(big), JobRuntimeState(retries=1), live))
    assert len(text) < 200
    assert len(restore(JobRuntimeState(), decode(text), work(big)).live) == 10_000


def test_a_record_too_big_to_store_keeps_retries_and_verdict_without_pods() -> None:
    big = job(tasks=(("worker", 10_000, 1),))
    live = tuple(PodRef(f"train-worker-{i}", "worker", i) for i in range(0, 10_000, 2))  # no runs at all
    state = JobRuntimeState(retries=2, phase="Failed", reason="r" * 5000)
    evicted = tuple(PodEvent(POD_EVICTED, "worker", (PodRef(f"train-worker-{i}", "worker", i),), None,
                             float(i), deleted=True) for i in range(1, 10_000, 2))
    text = encode(checkpoint_of(work(big), replace(state, evicted=evicted), live))
    assert len(text.encode()) <= MAX_CHECKPOINT_BYTES
    back = restore(JobRuntimeState(), decode(text), work(big))
    assert (back.retries, back.phase, back.live, back.evicted) == (2, "Failed", (), ())
    assert back.reason == "r" * 4096  # clipped as central clips it


@pytest.mark.parametrize("text, field", [
    pytest.param(" " * (MAX_CHECKPOINT_BYTES + 1), "over the limit", id="oversized-refused-before-parsing"),
    pytest.param("é" * (MAX_CHECKPOINT_BYTES // 2 + 1), "over the limit", id="oversized-in-bytes-not-chars"),
    pytest.param("{not json", "not JSON", id="not-json"),
    pytest.param("[" * 20_000 + "]" * 20_000, "not JSON", id="nested-too-deep"),
    pytest.param("[1, 2]", "JSON object", id="not-an-object"),
    pytest.param(body(v=2), "v: format 2 not supported", id="newer-format"),
    pytest.param(body(v=True), "v: format", id="format-is-a-bool"),
    pytest.param(json.dumps({"work": "w"}), "v: format", id="no-format"),
    pytest.param(body(extra=1), "extra: unknown field", id="unknown-field"),
    pytest.param(json.dumps({"v": 1}), "evicted: missing", id="missing-fields"),
    pytest.param(body(retries=-1), "retries: must be an integer", id="negative-retries"),
    pytest.param(body(retries=True), "retries: must be an integer", id="bool-retries"),
    pytest.param(body(retries=1.5), "retries: must be an integer", id="float-retries"),
    pytest.param(body(version="3"), "version: must be an integer", id="string-version"),
    pytest.param(body(phase="Exploded"), "phase: 'Exploded' is not a job phase", id="unknown-phase"),
    pytest.param(body(reason="x" * 4097), "reason: must be a string", id="reason-too-long"),
    pytest.param(body(work=""), "work: must be a string", id="empty-work-id"),
    pytest.param(body(live=[0, 1]), "live: must be an object", id="live-not-an-object"),
    pytest.param(body(live={"worker": [[0, 2_000_000_000]]}), "live.worker[0]: must be an index",
                 id="run-past-any-job-not-expanded"),
    pytest.param(body(live={f"t{i}": [[0, 9_999]] for i in range(3)}), "more than 20000 pods",
                 id="too-many-pods-in-all"),
    pytest.param(body(live={"worker": [[3, 1]]}), "live.worker[0]: must be an index", id="run-backwards"),
    pytest.param(body(live={"worker": [5, 2]}), "ascending", id="runs-out-of-order"),
    pytest.param(body(live={"worker": [[0, 1, 2]]}), "live.worker[0]", id="run-of-three"),
    pytest.param(body(live={"": [0]}), "task name", id="empty-task-name"),
    pytest.param(body(evicted=[[float("nan"), {}]]), "evicted[0][0]: must be a finite time", id="nan-time"),
    pytest.param(body(evicted=[[1.0]]), "evicted[0]: must be [detected at, pods]", id="eviction-without-pods"),
    pytest.param(body(evicted=[[1.0, {}]] * 1001), "evicted: must be a list of at most 1000", id="too-many-evictions"),
])
def test_a_malformed_record_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(CheckpointError, match=field.replace("[", r"\[").replace("]", r"\]")):
        decode(text)


@pytest.mark.parametrize("live, field", [
    pytest.param({"ps": [0]}, "live.ps: job train has no such task", id="unknown-task"),
    pytest.param({"worker": [8]}, "live.worker: index 8 is past the task's 8 replicas", id="index-past-replicas"),
])
def test_pods_that_are_not_the_jobs_replicas_are_refused(live: dict[str, list[int]], field: str) -> None:
    with pytest.raises(CheckpointError, match=field):
        restore(JobRuntimeState(), decode(body(live=live)), WORK)


def test_an_older_version_gives_only_its_retries_as_a_new_work_version_does() -> None:
    saved = Checkpoint(WORK.work_id, 2, retries=2, phase="Failed", reason="x", live={"worker": (0,)})
    assert restore(JobRuntimeState(), saved, WORK) == JobRuntimeState(retries=2)


@pytest.mark.parametrize("saved", [
    pytest.param(Checkpoint(WORK.work_id, 4, retries=2, phase="Failed"), id="newer-version"),
    pytest.param(Checkpoint("w-another-life", 3, retries=2, phase="Failed"), id="another-work-of-the-same-version"),
])
def test_a_record_of_a_newer_or_another_work_gives_nothing(saved: Checkpoint) -> None:
    assert restore(JobRuntimeState(), saved, WORK) == JobRuntimeState()
