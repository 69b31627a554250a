"""The part of a job's ``JobRuntimeState`` that must outlive the agent process, kept on
the cluster next to the job: an annotation on its headless Service ``<job>``. (A
Deployment or StatefulSet job has neither: its controller restarts the pods, and the
agent holds no state for it; docs/design/agent.md.)

Why on the cluster: the agent runs as a DaemonSet with leader election, and a new leader
used to start every job from nothing. A crash-looping job under a flapping leader got a
fresh ``maxRetry`` budget at every takeover (it restarted for ever), and a pod deleted
by someone else while no agent ran was only recreated, never raised as ``PodEvicted``.
Volcano keeps the equivalent (``status.retryCount``, ``status.state``) in the Job
object's status on the apiserver for the same reason (volcano-sh/volcano
pkg/controllers/job/state/*.go updates them through ``UpdateJobStatus``).

What is kept (and why nothing more):

- ``retries``: the restarts spent against ``maxRetry``;
- ``phase`` and ``reason`` of a finished job, so a new leader neither revives it nor
  loses why it ended;
- ``live``: the job's pods that were live when the record was written and that the agent
  is not deleting, so a new leader sees the ones gone since as deleted by someone else;
- ``evicted``: such deletions not yet acted on (a ``PodEvicted`` policy with a timeout).

Handled event keys are not kept: every other condition is re-derived from the pods, and
an event that was acted on is gone from them (its pods deleted, or the job finished).
Failed and completed pods are observed, never remembered.

The record names the Work it was written for (id and version) because
``JobController.update`` keeps only the retry count when a new version arrives: a record
of an older version gives its retries and nothing else, one of another Work of the same
version (another life of the job's name) or of a newer version gives nothing.

Encoding, version 1: compact JSON, pods as index ranges per task (10,000 pods in a few
bytes when they are all live), nodes left out. Read back as hostile input: at most
``MAX_CHECKPOINT_BYTES`` before parsing, an exact set of keys and types, every count
bounded before anything is expanded, every pod a replica of the job. Anything else is
refused with the field path and the rule, and the caller starts fresh.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agents.core.records import pod_name
from agents.core.recovery import (
    POD_EVICTED,
    RUNNING,
    TERMINAL_JOB_PHASES,
    JobRuntimeState,
    PodEvent,
    PodRef,
)
from federation.domain.jobs import Job
from federation.domain.works import Work

# On the job's headless Service ``<job>`` (agents/core/render.py), which every Volcano
# job has (made first when missing, JobController._ensure_service); outside its spec
# hash, so writing it never makes reconcile replace the Service.
ANNOTATION_CHECKPOINT = "federation.io/runtime-state"
CHECKPOINT_FORMAT = 1
# An annotation's share of a Service: the apiserver allows 256 KiB for all of them.
MAX_CHECKPOINT_BYTES = 64 * 1024
MAX_REASON_CHARS = 4096  # what central keeps of a job's reason (docs/design/limits.md)
MAX_CHECKPOINT_PODS = 20_000  # twice the replicas a job may have
MAX_CHECKPOINT_EVICTIONS = 1_000  # distinct detection times of deletions not yet acted on
_MAX_COUNT = 2**31 - 1
_KEYS = frozenset({"v", "work", "version", "retries", "phase", "reason", "live", "evicted"})

PodSet = dict[str, tuple[int, ...]]  # task -> sorted replica indices


class CheckpointError(ValueError):
    """A stored record that cannot be used; ``str()`` names the field and the rule."""


@dataclass(frozen=True)
class Checkpoint:
    """One job's persisted runtime state, for the Work ``work_id`` at ``version``."""

    work_id: str
    version: int
    retries: int = 0
    phase: str = RUNNING
    reason: str = ""
    live: PodSet | None = None
    evicted: tuple[tuple[float, PodSet], ...] = ()  # (detected at, pods deleted then)


def checkpoint_of(work: Work, state: JobRuntimeState, live: Iterable[PodRef]) -> Checkpoint:
    """What to persist for ``work`` in ``state``, with ``live`` the pods the agent leaves
    live (the state's own ``live`` is only known at the end of a pass)."""
    pending = [e for e in state.evicted if e.key not in state.handled and e.event == POD_EVICTED and e.pods]
    by_time: dict[float, list[PodRef]] = {}
    for event in pending:
        by_time.setdefault(event.since, []).extend(event.pods)
    return Checkpoint(work.work_id, work.version, state.retries, state.phase, state.reason[:MAX_REASON_CHARS],
                      _pod_set(live), tuple((since, _pod_set(refs)) for since, refs in sorted(by_time.items())))


def encode(checkpoint: Checkpoint) -> str:
    """The annotation's value; past ``MAX_CHECKPOINT_BYTES`` the pods are left out (the
    retry budget and a finished job's verdict always fit: deletions made while no agent
    runs then go unseen, as before there was a record)."""
    text = _dump(checkpoint)
    if len(text.encode()) > MAX_CHECKPOINT_BYTES:
        text = _dump(replace(checkpoint, live=None, evicted=()))
    return text


def _dump(c: Checkpoint) -> str:
    body = {"v": CHECKPOINT_FORMAT, "work": c.work_id, "version": c.version, "retries": c.retries,
            "phase": c.phase, "reason": c.reason, "live": None if c.live is None else _ranges(c.live),
            "evicted": [[since, _ranges(pods)] for since, pods in c.evicted]}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def decode(text: str) -> Checkpoint:
    """The record in ``text``; ``CheckpointError`` for anything but a well-formed one."""
    if len(text) > MAX_CHECKPOINT_BYTES or len(text.encode()) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{len(text.encode())} bytes is over the limit of {MAX_CHECKPOINT_BYTES}")
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"not JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise CheckpointError("must be a JSON object")
    if "v" not in body or body["v"] != CHECKPOINT_FORMAT or isinstance(body["v"], bool):
        raise CheckpointError(f"v: format {str(body.get('v'))[:20]} not supported (this agent reads "
                              f"{CHECKPOINT_FORMAT})")
    if set(body) != _KEYS:
        odd = sorted(set(body) ^ _KEYS)
        raise CheckpointError(f"{odd[0][:64]}: {'unknown field' if odd[0] in body else 'missing'}")
    work_id = body["work"]
    if not isinstance(work_id, str) or not 0 < len(work_id) <= 64:
        raise CheckpointError("work: must be a string of 1 to 64 characters")
    phase = body["phase"]
    if phase != RUNNING and phase not in TERMINAL_JOB_PHASES:
        raise CheckpointError(f"phase: {str(phase)[:32]!r} is not a job phase")
    reason = body["reason"]
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise CheckpointError(f"reason: must be a string of at most {MAX_REASON_CHARS} characters")
    budget = [MAX_CHECKPOINT_PODS]
    live = None if body["live"] is None else _pod_set_from(body["live"], "live", budget)
    evicted_raw = body["evicted"]
    if not isinstance(evicted_raw, list) or len(evicted_raw) > MAX_CHECKPOINT_EVICTIONS:
        raise CheckpointError(f"evicted: must be a list of at most {MAX_CHECKPOINT_EVICTIONS} entries")
    evicted = []
    for i, entry in enumerate(evicted_raw):
        path = f"evicted[{i}]"
        if not isinstance(entry, list) or len(entry) != 2:
            raise CheckpointError(f"{path}: must be [detected at, pods]")
        since = entry[0]
        if isinstance(since, bool) or not isinstance(since, int | float) or not math.isfinite(since) or since < 0:
            raise CheckpointError(f"{path}[0]: must be a finite time >= 0")
        evicted.append((float(since), _pod_set_from(entry[1], f"{path}[1]", budget)))
    return Checkpoint(work_id, _count(body, "version"), _count(body, "retries"), phase, reason, live,
                      tuple(evicted))


def restore(state: JobRuntimeState, checkpoint: Checkpoint, work: Work) -> JobRuntimeState:
    """``state`` resumed from ``checkpoint`` for ``work``, by ``JobController.update``'s
    rule for versions: the same Work gives everything, an older version only its retries,
    anything else nothing. ``CheckpointError`` when its pods are not the job's replicas."""
    if checkpoint.version < work.version:
        return replace(state, retries=checkpoint.retries)
    if checkpoint.version > work.version or checkpoint.work_id != work.work_id:
        return state
    job = work.job
    live = _refs(job, checkpoint.live or {}, "live")
    evicted = tuple(PodEvent(POD_EVICTED, ref.task, (ref,), None, since, deleted=True)
                    for i, (since, pods) in enumerate(checkpoint.evicted)
                    for ref in _refs(job, pods, f"evicted[{i}]"))
    return replace(state, retries=checkpoint.retries, phase=checkpoint.phase, reason=checkpoint.reason,
                   live=live, evicted=evicted)


def _count(body: Mapping[str, Any], key: str) -> int:
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        raise CheckpointError(f"{key}: must be an integer from 0 to {_MAX_COUNT}")
    return value


def _pod_set(refs: Iterable[PodRef]) -> PodSet:
    tasks: dict[str, set[int]] = {}
    for ref in refs:
        tasks.setdefault(ref.task, set()).add(ref.index)
    return {task: tuple(sorted(indices)) for task, indices in sorted(tasks.items())}


def _ranges(pods: PodSet) -> dict[str, list[int | list[int]]]:
    """Indices as runs: ``[first, last]`` for a run, a bare index for a run of one."""
    out: dict[str, list[int | list[int]]] = {}
    for task, indices in pods.items():
        runs: list[list[int]] = []
        for i in indices:
            if runs and i == runs[-1][1] + 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        out[task] = [first if first == last else [first, last] for first, last in runs]
    return out


def _pod_set_from(raw: object, path: str, budget: list[int]) -> PodSet:
    """Index runs back to indices, refusing more than ``budget[0]`` pods in all before
    expanding any run (``[0, 2000000000]`` is eight bytes)."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: must be an object of task -> index runs")
    out: PodSet = {}
    for task, runs in raw.items():
        where = f"{path}.{task[:64]}"
        if not 0 < len(task) <= 63:
            raise CheckpointError(f"{where}: a task name has 1 to 63 characters")
        if not isinstance(runs, list):
            raise CheckpointError(f"{where}: must be a list of index runs")
        indices: list[int] = []
        for j, run in enumerate(runs):
            first, last = _run(run, f"{where}[{j}]")
            budget[0] -= last - first + 1
            if budget[0] < 0:
                raise CheckpointError(f"{where}[{j}]: more than {MAX_CHECKPOINT_PODS} pods")
            if indices and first <= indices[-1]:
                raise CheckpointError(f"{where}[{j}]: runs must be ascending and apart")
            indices.extend(range(first, last + 1))
        out[task] = tuple(indices)
    return out


def _run(run: object, path: str) -> tuple[int, int]:
    bounds = run if isinstance(run, list) else [run, run]
    if len(bounds) == 2:
        first, last = bounds
        if (isinstance(first, int) and isinstance(last, int) and not isinstance(first, bool)
                and not isinstance(last, bool) and 0 <= first <= last < MAX_CHECKPOINT_PODS):
            return first, last
    raise CheckpointError(f"{path}: must be an index or [first, last] with 0 <= first <= last < "
                          f"{MAX_CHECKPOINT_PODS}")


def _refs(job: Job, pods: PodSet, path: str) -> tuple[PodRef, ...]:
    refs: list[PodRef] = []
    for task, indices in pods.items():
        replicas = next((t.replicas for t in job.tasks if t.name == task), None)
        if replicas is None:
            raise CheckpointError(f"{path}.{task}: job {job.name} has no such task")
        if indices and indices[-1] >= replicas:
            raise CheckpointError(f"{path}.{task}: index {indices[-1]} is past the task's {replicas} replicas")
        refs.extend(PodRef(pod_name(job.name, task, i), task, i) for i in indices)
    return tuple(refs)


def without(refs: Sequence[PodRef], names: Iterable[str]) -> tuple[PodRef, ...]:
    """``refs`` less the pods in ``names`` (those a pass is about to delete itself)."""
    drop = set(names)
    return tuple(r for r in refs if r.name not in drop)
