"""One job's control loop on one cluster: recovery, then reconcile, in a single pass.

This is the glue the agent runtime (and the demo's simulated agents) call on every
trigger — a watch event, a timer for a delayed action, a new Work. It holds the only
state that cannot be re-read from the pods (restart counts, handled events, the local
job phase, the pods live at the end of the last pass), saves what of it must outlive
the process on the job's Service and takes it up again on its first pass
(agents/core/checkpoints.py), and delegates every decision to the pure functions:

    observe_job -> pod_events -> decide/record -> ops_for_actions -> apply
                -> reconcile -> apply -> PassReport

Recovery runs first so a restart's deletions are seen by the same pass's reconcile on
the next read. Events of one pass are decided in order against the state left by the
previous ones, and an event whose pods are already covered by an earlier action of the
pass is skipped (two failed pods under ``RestartJob`` restart the job once, as Volcano's
controller would after its first restart). Tentative state is kept only if the cluster
accepted the operations; otherwise the next pass sees the same conditions and decides
again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agents.backend import BackendError, ClusterBackend, NotFound
from agents.core.apply import Applied, apply_ops, observe_job
from agents.core.checkpoints import (
    ANNOTATION_CHECKPOINT,
    CheckpointError,
    checkpoint_of,
    decode,
    encode,
    restore,
    without,
)
from agents.core.events import job_pods, live_pods, observe, pod_events, track_deletions
from agents.core.operations import BindPod, CreatePod, CreateService, DeletePod, Op
from agents.core.plugins import secret_refs
from agents.core.priority import (
    NONE,
    ClusterPriority,
    ensure_priority_class,
    for_cluster,
    priority_warning,
    retry_delay,
)
from agents.core.reconcile import Observed, ops_for_actions, reconcile
from agents.core.records import LABEL_JOB, PodRecord, ServiceManifest
from agents.core.recovery import (
    RESTART_POD,
    RESTART_TASK,
    RUNNING,
    SETTLING,
    TASK_COMPLETED,
    TERMINAL_JOB_PHASES,
    Action,
    JobEvent,
    JobRuntimeState,
    PodEvent,
    PodRef,
    Room,
    decide,
    record,
)
from agents.core.render import render_claims, render_service
from agents.core.view import ClusterViews
from agents.core.volumes import job_claims
from agents.core.workloads import reconcile_workload, workload_refs
from federation.domain.plans import PodAssignment
from federation.domain.states import WorkPhase
from federation.domain.topology import HyperNodeTree
from federation.domain.works import Work

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassReport:
    """What one pass did, for ``WorkStatus`` (federation.v1) and the job's event log."""

    work_id: str
    job: str
    version: int
    phase: WorkPhase
    message: str
    # The current version's pods as the pass leaves them: a pass that bound, created or
    # deleted pods re-reads them, so a report names the node each pod is actually bound to
    # (central records it as the job's placement).
    pods: tuple[PodRecord, ...]
    actions: tuple[Action, ...]  # recovery actions executed this pass
    events: tuple[JobEvent, ...]  # their records
    wake_at: float | None  # when a delayed action falls due (re-run the pass then)
    error: str = ""  # an operation the cluster refused (retried at ``wake_at``, or on a watch event)
    generation: int = 0  # the Work generation this pass converged to (a grown elastic job)


class JobController:
    """The per-job loop. Not thread-safe; the runtime serialises passes per job."""

    def __init__(self, work: Work, *, label_keys: Sequence[str] = (), views: ClusterViews | None = None) -> None:
        self.work = work
        self.label_keys = tuple(label_keys)
        self.views = views  # shared with the other jobs of the runtime (view.py); None: read afresh
        self.state = JobRuntimeState()
        self.hints: tuple[PodAssignment, ...] = ()
        self.priority: ClusterPriority | None = None  # the class as this cluster holds it, once ensured
        self._priority_failures = 0  # consecutive failed attempts to ensure it
        self._priority_retry_at: float | None = None  # when a failed attempt is tried again
        self._refusals = 0  # consecutive passes the cluster refused an operation of
        self._resumed = False  # the first pass has read the job's checkpoint
        self._saved: str | None = None  # the checkpoint text the job's Service holds, as last seen or written

    def update(self, work: Work) -> bool:
        """Accept a newer Work (or a cancel); stale or duplicate versions are ignored
        (docs/design/work-protocol.md). A new version keeps the retry counts: a re-plan
        moves the job, it does not forgive its failures."""
        if work.job.name != self.work.job.name or work.version < self.work.version:
            return False
        if work.version == self.work.version and work.generation < self.work.generation:
            return False  # an older pod set of this version (reordered after a growth)
        if work.version > self.work.version:
            self.state = replace(self.state, phase=RUNNING, handled=frozenset(), reason="", live=(), evicted=())
            self.hints = ()
        self.work = work
        return True

    async def sync(self, backend: ClusterBackend, now: float, tree: HyperNodeTree | None) -> PassReport:
        notes = await self._ensure_priority(backend, now)
        work = for_cluster(self.work, self.priority or NONE)
        observed = await self._observe(backend, tree)
        pods = tuple(job_pods(work.job, observed.pods, work.version))
        executed: list[Action] = []
        wake_at: float | None = None if self.work.cancelled else self._priority_retry_at
        error = ""
        recovering = not work.cancelled and work.job.workload is None  # a workload's controller repairs its pods
        if recovering:
            observed, error = await self._ensure_service(backend, work, observed)
            self._saved = self._seen_checkpoint(observed.services, self._saved)
            if not self._resumed:
                self._resume(work)
            self.state = track_deletions(self.state, pods, now)
            executed, due, applied = await self._recover(backend, work, observed, pods, now)
            wake_at = due if wake_at is None or (due is not None and due < wake_at) else wake_at
            error = error or applied.error
            if executed and applied.ok:
                observed = await self._observe(backend, tree)
        if work.job.workload is not None:
            result = reconcile_workload(work, observed)
        else:
            result = reconcile(work, observed, job_phase=self.state.phase, hints=self.hints)
        ops = result.ops
        if recovering:
            ops = self._with_checkpoint(ops)
            live = {p.name for p in live_pods(pods)}
            deleting = {op.name for op in ops if isinstance(op, DeletePod)}
            if deleting & live:  # saved as not live before they go
                fresh = job_pods(work.job, observed.pods, work.version)
                refused = await self._save(backend, work, without(live_pods(fresh), deleting))
                if refused:  # they wait for the record that says the agent deleted them
                    error = error or refused
                    ops = tuple(op for op in ops if not (isinstance(op, DeletePod) and op.name in live))
        applied = await apply_ops(backend, ops)
        error = error or applied.error
        if log.isEnabledFor(logging.DEBUG):  # a pass runs per job on every watch event: build nothing unasked
            log.debug("pass for %s: saw %s; recovery %s; %d op(s), %s", work.name,
                      [(p.name, p.phase, p.node, p.deleting) for p in pods], [a.kind for a in executed],
                      len(result.ops), applied.error or "applied")
        if executed or any(isinstance(op, _POD_OPS) for op in applied.done):
            pods = await _pods_now(backend, work)
        if recovering:  # what is live now, after this pass's own deletions
            self.state = replace(self.state, live=live_pods(pods))
            error = error or await self._save(backend, work, self.state.live)
        phase, message = result.phase, result.message
        if self.state.phase in TERMINAL_JOB_PHASES and self.state.reason and not work.cancelled:
            # Report why the job ended, on every pass (not only the one that ended it): the
            # JobEvent is sent once, but central takes a job's reason from the terminal
            # WorkStatus message, so "job Failed" alone would lose e.g. maxRetry exhaustion.
            message = f"job {self.state.phase}: {self.state.reason}"
        if error:
            phase, message, wake_at = self._refused(ops, applied, phase, message, error, now, wake_at)
        else:
            self._refusals = 0
        replans = [a for a in executed if a.kind == WorkPhase.REPLAN]
        if replans:
            phase, message = WorkPhase.REPLAN, replans[-1].record.message
        return PassReport(work.work_id, work.name, work.version, phase, message, pods, (*executed, *notes),
                          tuple(a.record for a in executed), wake_at, error, work.generation)

    def _refused(self, ops: Sequence[Op], applied: Applied, phase: WorkPhase, message: str, error: str,
                 now: float, wake_at: float | None) -> tuple[WorkPhase, str, float | None]:
        """The report of a pass the cluster refused an operation of, and when to try again.

        The refusal is the report's message, so the job says why it does not start (a
        namespace the cluster lacks, a name it refuses). The phase is what the cluster
        holds: a pass stopped before its pods were created or bound has not bound the gang.
        The retry backs off (``retry_delay``: 1 s doubling to 5 min) instead of running
        again at once: a refusal that lasts would otherwise make the agent re-run every
        job's pass back to back, as fast as the apiserver answers.
        """
        self._refusals += 1
        retry = now + retry_delay(self._refusals)
        wake_at = retry if wake_at is None else min(wake_at, retry)
        undone = ops[len(applied.done):]
        if phase in (WorkPhase.BOUND, WorkPhase.RUNNING) and any(isinstance(op, (CreatePod, BindPod))
                                                                 for op in undone):
            phase = WorkPhase.PENDING
        return phase, f"{message}; {error}" if message else error, wake_at

    def _seen_checkpoint(self, services: Sequence[ServiceManifest], held: str | None) -> str | None:
        """The checkpoint the job's Service holds now; ``held`` while the Service is missing,
        so the one reconcile creates again carries it (``_with_checkpoint``)."""
        job = self.work.job
        for svc in services:
            if svc.name == job.name and svc.namespace == job.namespace:
                return svc.annotations.get(ANNOTATION_CHECKPOINT)
        return held

    def _resume(self, work: Work) -> None:
        """On the first pass, take up the state a previous agent saved for this job (a new
        leader, or this one restarted). A record that cannot be used is logged once and
        ignored: the job starts fresh, and the next save replaces it."""
        self._resumed = True
        if self._saved is None:
            return
        try:
            self.state = restore(self.state, decode(self._saved), work)
        except CheckpointError as exc:
            log.warning("job %s: ignored the runtime state saved on its Service (%s): %s; starting fresh",
                        work.name, ANNOTATION_CHECKPOINT, exc)
            return
        log.info("job %s: resumed from its saved runtime state: %d retries, phase %s, %d live pods, "
                 "%d deletions to act on", work.name, self.state.retries, self.state.phase, len(self.state.live),
                 len(self.state.evicted))

    async def _ensure_service(self, backend: ClusterBackend, work: Work, observed: Observed) -> tuple[Observed, str]:
        """``observed`` with the job's Service, made first when it is missing (deleted by
        someone, or the job's first pass) carrying the state held now; the refusal, if any.

        Every save of the pass goes onto it, and a restart is carried out only once its
        record is saved: a Service left for reconcile to make at the end of the pass would
        let the pass delete pods with their record nowhere (an agent killed in between
        left a new leader with a fresh ``maxRetry``). It is the job's own object, which
        reconcile would make in the same pass anyway. The Services are read again after
        the create: the Kubernetes backend takes an identical Service that already exists
        (one this agent's cache had not seen yet) for created, and its record is then the
        one to resume from."""
        job = work.job
        if any(s.name == job.name and s.namespace == job.namespace for s in observed.services):
            return observed, ""
        service = render_service(job)
        text = encode(checkpoint_of(work, self.state, self.state.live))
        try:
            await backend.create_service(replace(service, annotations={**service.annotations,
                                                                       ANNOTATION_CHECKPOINT: text}))
        except BackendError as exc:  # its reason names the Service already
            return observed, exc.reason
        return replace(observed, services=tuple(await backend.list_services({LABEL_JOB: job.name}))), ""

    def _with_checkpoint(self, ops: Sequence[Op]) -> tuple[Op, ...]:
        """A Service reconcile creates (again) carries the saved checkpoint: replacing the
        Service on a new spec hash must not lose it. The annotation is outside the hash."""
        saved = self._saved
        if saved is None:
            return tuple(ops)
        return tuple(replace(op, manifest=replace(op.manifest, annotations={**op.manifest.annotations,
                                                                           ANNOTATION_CHECKPOINT: saved}))
                     if isinstance(op, CreateService) and op.manifest.name == self.work.name else op for op in ops)

    async def _save(self, backend: ClusterBackend, work: Work, live: Sequence[PodRef],
                    state: JobRuntimeState | None = None) -> str:
        """Write the job's checkpoint onto its Service when it changed; the refusal, if any.

        Called before a pass deletes pods (which are saved as no longer live, so a new
        leader never takes the agent's own deletions for someone else's) and at the end of
        the pass. A restart is thus counted before it is carried out: a leader lost in
        between costs the job one retry more, never one less. A refused save holds the
        deletions back (the caller's rule): carried out unsaved, a restart would be
        forgotten by the next leader, and a leader per failure would restart for ever."""
        text = encode(checkpoint_of(work, self.state if state is None else state, live))
        if text == self._saved:
            return ""
        try:
            await backend.annotate_service(work.namespace, work.name, ANNOTATION_CHECKPOINT, text)
        except NotFound:  # deleted since the pass began (``_ensure_service``): made again next pass
            return f"save runtime state on service {work.namespace}/{work.name}: the service is gone"
        except BackendError as exc:
            return f"save runtime state on service {work.namespace}/{work.name}: {exc.reason}"
        self._saved = text
        return ""

    async def _ensure_priority(self, backend: ClusterBackend, now: float) -> list[Action]:
        """Ensure the job's class in the cluster on the first pass, and again after a
        failed attempt once its back-off has passed (agents/core/priority.py). A warning
        is reported when it first appears or changes, not on every retry."""
        due = self.priority is None or (self._priority_retry_at is not None and now >= self._priority_retry_at)
        if self.work.cancelled or not due:
            return []
        before = self.priority.warning if self.priority is not None else ""
        self.priority = await ensure_priority_class(backend, self.work.job)
        self._priority_failures = self._priority_failures + 1 if self.priority.failed else 0
        self._priority_retry_at = now + retry_delay(self._priority_failures) if self.priority.failed else None
        if self.priority.warning and self.priority.warning != before:
            return [priority_warning(self.work.name, self.priority.warning, now)]
        return []

    async def _observe(self, backend: ClusterBackend, tree: HyperNodeTree | None) -> Observed:
        job = self.work.job
        return await observe_job(backend, job.name, tree=tree, label_keys=self.label_keys,
                                 secrets=secret_refs(job), workloads=workload_refs(job), views=self.views,
                                 namespace=job.namespace, claims=job_claims(job), pod_count=len(job.pods()),
                                 made_claims=[c.name for c in render_claims(job)])

    async def _recover(
        self, backend: ClusterBackend, work: Work, observed: Observed, pods: Sequence[PodRecord], now: float
    ) -> tuple[list[Action], float | None, Applied]:
        job = work.job
        state = observe(self.state, job, pods)
        domain = observed.tree.domains.get(work.placement.hypernode) if observed.tree is not None else None
        room = Room(domain, observed.nodes) if domain is not None else None
        covered: set[str] = set()
        job_wide = False
        ready: list[Action] = []
        wake_at: float | None = None
        for event in pod_events(job, pods, observed.nodes, now, state.evicted, ready=observed.ready):
            if job_wide or _covered(event, covered):
                continue
            if event.event in SETTLING and (ready or wake_at is not None):
                continue  # a restart (or one waiting for its timeout) comes before the verdict
            for action in decide(job, state, event, now, room=room):
                if not action.ready(now):
                    wake_at = action.due if wake_at is None else min(wake_at, action.due)
                    continue
                ready.append(action)
                state = record(job, state, [action], now)
                covered.update(action.pods)
                job_wide = job_wide or action.kind not in (RESTART_POD, RESTART_TASK, WorkPhase.REPLAN)
        ops = ops_for_actions(work, observed, ready, now)
        deleting = {op.name for op in ops if isinstance(op, DeletePod)}
        refused = await self._save(backend, work, without(live_pods(pods), deleting), state) if ops else ""
        if refused:  # the record first: nothing is carried out that a new leader would not know of
            return [], wake_at, Applied((), ops[0], refused)
        applied = await apply_ops(backend, ops)
        if applied.ok:
            self.state = state
            targets = tuple(t for a in ready for t in a.targets)
            if targets:
                self.hints = targets
        return (ready if applied.ok else []), wake_at, applied


_POD_OPS = (BindPod, CreatePod, DeletePod)


async def _pods_now(backend: ClusterBackend, work: Work) -> tuple[PodRecord, ...]:
    return tuple(job_pods(work.job, await backend.list_pods({LABEL_JOB: work.name}), work.version))


def _covered(event: PodEvent, covered: set[str]) -> bool:
    if event.event == TASK_COMPLETED:
        return False
    return bool(event.pods) and all(p.name in covered for p in event.pods)
