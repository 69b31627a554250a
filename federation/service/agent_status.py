"""Apply an agent's ``WorkStatus`` to the store: work state, job steps, restart events.

Split from the hub so the stream plumbing and the meaning of a report live apart. The
meaning itself is the pure ``propagation.status.effect``; this adapter performs it:

- a report is bounded first (``wire.limits.check_status``: text lengths, pods, events);
  a refused one (a bound, a malformed work id, another cluster's Work, a job, version,
  generation or pod the named Work does not have) raises
  ``InvalidInput`` and the hub answers ``Ack{what: "status-rejected"}``;

- a report about a Work that is no longer active (withdrawn: cancelled, preempted,
  re-planned, or its cluster was lost) is answered with a ``Cancel`` again — idempotent,
  and it converges an agent that missed the first one. Every job change a report makes
  re-checks, in its own transaction, that the Work is still the job's active one
  (``work_id=``): a Work withdrawn while its report was being handled (the job evicted
  and re-placed) changes nothing in the job, which may run under its next Work by then;
- restart actions the agent took become ``Restarted`` job events (and the restart count),
  warnings ``Warning`` events, all of one report in one transaction; a job keeps at most
  ``--max-job-events`` of them, since reports about one Work may come without end;
- the job steps along its state machine first (an illegal step is logged and ignored,
  never forced), then the Work's state is written with the agent's epoch (a deposed
  agent is refused with ``StaleEpoch`` and fenced by the hub). Why this order: a central
  killed between the two leaves the Work active, so the agent is sent it again at its
  next sync and its next report writes the Work; the other order left a finished Work
  behind a job stuck in ``dispatched`` for good (found by the standby takeover test);
- ``Replan`` requeues the job first and withdraws the Work second, so a crash in between
  leaves a pending job whose old Work the next placement supersedes — never a job that
  looks placed with nothing behind it;
- a report of a bound gang carries the node of every pod; when that differs from the
  Work's recorded placement (the agent re-packed the gang inside its HyperNode or
  replaced a pod), the placement is updated (``WorkRepository.record_pods``), so
  ``fedctl explain`` and the next planning round see where the pods really are. Only a
  report of the Work's newest generation counts (a grown elastic job's older reports
  describe the pod set before the growth).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job
from federation.domain.states import RESTARTED_EVENT, WARNING_EVENT, WorkPhase, WorkState
from federation.domain.works import payload_generation, placement_from_payload
from federation.logs import fields
from federation.propagation.status import ReportedPod, actual_pods, effect
from federation.store import Conflict, IllegalTransition, JobRecord, NotFound, Store, WorkInactive, WorkRecord
from federation.v1 import agent_pb2
from federation.wire.convert import work_phase_from_proto
from federation.wire.limits import DEFAULT_LIMITS, Limits, check_status

log = logging.getLogger(__name__)

RESTART_ACTIONS = frozenset({"RestartPod", "RestartTask", "RestartJob"})
Call = Callable[..., Awaitable[Any]]


def event_message(event: agent_pb2.WorkEvent) -> str:
    pod = f" (pod {event.task}-{event.index})" if event.task else ""
    return f"{event.action} after {event.reason}{pod}" if event.reason else f"{event.action}{pod}"


def _cancel_again(work: WorkRecord, phase: WorkPhase | None) -> list[agent_pb2.CentralMessage]:
    """The ``Cancel`` a report about a withdrawn Work is answered with (none once the agent
    says it cancelled, nor for a Work that finished): converges an agent that missed it."""
    if work.state != WorkState.WITHDRAWN or phase is WorkPhase.CANCELLED:
        return []
    return [agent_pb2.CentralMessage(cancel=agent_pb2.Cancel(
        work_id=str(work.id), job=work.job, version=work.version, reason=work.message or "withdrawn"))]


WORK_ID_MAX = 2**63 - 1  # ids are int64 in both databases


def parse_work_id(text: str) -> int:
    """A Work id as central sends it (``str(id)``: ASCII digits, no sign, padding or
    leading zero, at most int64). ``int()`` alone took ``" 5"``, ``"1_0"``, ``"-5"`` and
    non-ASCII digits, and an id past int64 reached SQLite, which raised OverflowError:
    the report was never answered."""
    if not (text.isascii() and text.isdigit()) or text.startswith("0") or int(text) > WORK_ID_MAX:
        raise InvalidInput("status.work_id", f"{text[:64]!r} is not a work id (a positive int64 in decimal)")
    return int(text)


def _check_describes(msg: agent_pb2.WorkStatus, work: WorkRecord) -> None:
    """The report's job, version and generation are those of the Work it names (the agent
    copies them from the Work it holds): a report saying otherwise is refused, not applied
    to the Work's job with those fields ignored."""
    if msg.job != work.job:
        raise InvalidInput("status.job", f"is {msg.job[:80]!r}; work {work.id} is of job {work.job!r}")
    if msg.version != work.version:
        raise InvalidInput("status.version", f"is {msg.version}; work {work.id} is version {work.version}")
    generation = payload_generation(work.payload)
    if not 0 <= msg.generation <= generation:
        raise InvalidInput("status.generation", f"is {msg.generation}; work {work.id} is at generation {generation}")


def _check_pods(msg: agent_pb2.WorkStatus, job: Job) -> None:
    """Every reported pod is of a task the job has, with an index below twice the task's
    replicas (a Deployment's pods are ranked by name, and a surge or a replacement pod
    while the old one terminates ranks past the replicas for a while). A bound report's
    pods become the Work's recorded placement, which every planning round reads: a pod
    of task ``ghost`` there made each round of the whole federation fail for as long as
    the job ran, and made-up indices would charge the job's queue for pods it lacks."""
    replicas = {t.name: t.replicas for t in job.tasks}
    for i, pod in enumerate(msg.pods):
        if pod.task not in replicas:
            raise InvalidInput(f"status.pods[{i}].task", f"{pod.task[:63]!r} is not a task of job {job.name!r}")
        if not 0 <= pod.index < 2 * replicas[pod.task]:
            raise InvalidInput(f"status.pods[{i}].index", f"{pod.index} is not an index of task {pod.task!r} "
                                                          f"(0 to twice its {replicas[pod.task]} replicas)")


class StatusHandler:
    def __init__(self, store: Store, call: Call, trigger: Callable[[str], None],
                 notify: Callable[[str], None], *, limits: Limits = DEFAULT_LIMITS) -> None:
        self._store = store
        self._limits = limits
        self._call = call
        self._trigger = trigger
        self._notify = notify

    async def handle(self, cluster: str, epoch: int, msg: agent_pb2.WorkStatus) -> list[agent_pb2.CentralMessage]:
        """Apply one report; returns messages to send back (a repeated Cancel). Bounded
        before any store work (``check_status``); every refusal is ``InvalidInput``, which
        the hub sends back as ``status-rejected``."""
        check_status(msg, self._limits)
        work_id = parse_work_id(msg.work_id)
        try:
            work = await self._call(self._store.works.get, work_id)
        except NotFound:
            log.warning("cluster %s reported on unknown work %s (job %s)", cluster, msg.work_id, msg.job,
                        extra=fields(cluster=cluster, work=msg.work_id))
            return []
        if work.cluster != cluster:
            raise InvalidInput("status.work_id", f"work {work_id} belongs to cluster {work.cluster}, not {cluster}")
        _check_describes(msg, work)
        phase = work_phase_from_proto(msg.phase)
        if not work.active:
            return _cancel_again(work, phase)
        try:
            record: JobRecord = await self._call(self._store.jobs.get, work.job)
            _check_pods(msg, record.job)
            record = await self._record_events(record, msg, work_id, cluster, epoch)
            change = effect(phase, record.state)
            if change.replan:
                await self._call(self._store.clusters.heartbeat, cluster, epoch)  # refuses a deposed agent
                await self._steps(record, change.job_steps, msg.message or "the cluster cannot honour the placement",
                                  work_id)
                await self._work_state(work_id, WorkState.WITHDRAWN, f"replan: {msg.message}", epoch)
                self._notify(cluster)
                self._trigger("replan")
                return []
            await self._record_pods(work_id, phase, msg, work.payload, epoch)
            if change.job_steps:
                await self._call(self._store.clusters.heartbeat, cluster, epoch)  # refuses a deposed agent
            await self._steps(record, change.job_steps, msg.message, work_id)
        except WorkInactive as exc:
            # Withdrawn since the check above (re-placed, evicted, cancelled): the job may
            # already run under a newer Work, so this report changes nothing in it.
            log.info("work %d: report about a work no longer active ignored: %s", work_id, exc,
                     extra=fields(cluster=cluster, work=work_id, job=work.job))
            try:
                work = await self._call(self._store.works.get, work_id)
            except NotFound:  # deleted with its queue meanwhile: nothing left to cancel
                return []
            return _cancel_again(work, phase)
        if change.work_state is not None and change.work_state != work.state:
            await self._work_state(work_id, change.work_state, msg.message, epoch)
        return []

    async def _record_pods(self, work_id: int, phase: WorkPhase | None, msg: agent_pb2.WorkStatus,
                           payload: Mapping[str, Any], epoch: int) -> None:
        """Record where the pods are; a report of an older generation (before a growth the
        agent has not applied yet) is skipped, and a bound report of the newest one
        settles the growth even when the pods are where they were planned."""
        if msg.generation < payload_generation(payload):
            return
        recorded = placement_from_payload(msg.job, payload).pods
        reported = (ReportedPod(p.task, p.index, p.node, p.phase) for p in msg.pods)
        pods = actual_pods(phase, reported, recorded)
        if pods is None and payload.get("growing") and phase in (WorkPhase.BOUND, WorkPhase.RUNNING):
            pods = recorded
        if pods is None:
            return
        try:
            await self._call(self._store.works.record_pods, work_id, pods, epoch=epoch, generation=msg.generation)
        except Conflict as exc:
            log.info("work %d: actual pods not recorded: %s", work_id, exc, extra=fields(work=work_id))

    async def _work_state(self, work_id: int, state: str, message: str, epoch: int) -> None:
        try:
            await self._call(self._store.works.update_status, work_id, state, message=message, epoch=epoch)
        except Conflict as exc:
            log.info("work %d: %s", work_id, exc, extra=fields(work=work_id))

    async def _steps(self, record: JobRecord, steps: tuple[str, ...], message: str, work_id: int) -> None:
        """Each step is conditional on the job's version and on ``work_id`` still being its
        active Work, checked in the step's transaction (``WorkInactive`` propagates)."""
        for step in steps:
            try:
                record = await self._call(self._store.jobs.transition, record.name, step, reason=message or None,
                                          expected_version=record.version, work_id=work_id)
            except WorkInactive:
                raise
            except (IllegalTransition, Conflict) as exc:
                log.info("job %s: status step to %s ignored: %s", record.name, step, exc,
                         extra=fields(job=record.name, queue=record.queue))
                return

    async def _record_events(self, record: JobRecord, msg: agent_pb2.WorkStatus, work_id: int,
                             cluster: str, epoch: int) -> JobRecord:
        """Warnings and restarts become job events, in one transaction and only while
        ``work_id`` is still the job's active Work (``WorkInactive`` propagates) and the
        reporting agent is the cluster's current one (``StaleEpoch``: the hub fences it). A job
        keeps at most ``max_job_events`` of them (``store.reported_events``); past that the
        restarts are still counted and the tenant is told once that events were dropped."""
        events = reported_events(msg.events)
        if not events:
            return record
        cap = self._limits.max_job_events
        notice = (f"further restarts and warnings from cluster {cluster} are not recorded as events: the job "
                  f"reached the limit of {cap} events reported by clusters (--max-job-events); its restart "
                  "count and state stay exact")
        record, dropped = await self._call(
            self._store.jobs.record_reported, record.name, events, work_id=work_id, cluster=cluster, epoch=epoch,
            max_events=cap, notice=notice,
            restarts=sum(1 for type_, _ in events if type_ == RESTARTED_EVENT))
        if dropped:
            log.info("job %s: %d event(s) from cluster %s not recorded (limit of %d per job)", record.name, dropped,
                     cluster, cap, extra=fields(job=record.name, queue=record.queue, cluster=cluster))
        return record


def reported_events(events: Iterable[agent_pb2.WorkEvent]) -> list[tuple[str, str]]:
    """The job events (type, message) a report's events stand for: warnings, and the
    restarts the agent made; job-ending actions and Replan are recorded by the state
    change they cause."""
    out: list[tuple[str, str]] = []
    for event in events:
        if event.action == WARNING_EVENT:  # the cluster could not honour part of the job; it runs on
            out.append((WARNING_EVENT, event.reason))
        elif event.action in RESTART_ACTIONS:
            out.append((RESTARTED_EVENT, event_message(event)))
    return out
