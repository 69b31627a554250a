"""Planning rounds: debounce triggers, plan off the event loop, record in one transaction.

A round is, step by step (``run_once``):

1. **load** the federation from the store (``control.snapshot``);
2. **fail over and repair**: requeue jobs whose cluster taints they no longer tolerate (lost
   clusters included) and placed jobs that have no Work, and settle JobFlow holds; re-load
   if anything changed;
3. **plan** with the pure planner, mark what only an unavailable cluster could hold as
   waiting, and refuse (as unplaced) any placement its propagation policy forbids;
4. **record** the round, its decisions, the job changes they cause AND the Work of every
   placed job in ONE store transaction (``AuditRepository.record_round``);
5. **dispatch**: tell the agent hub which clusters have new or withdrawn works.

docs/design/rounds.md explains the choices; in short:

- **Triggers coalesce.** A submission, a snapshot, a cancel or a lost cluster calls
  ``trigger(reason)``; the loop waits ``debounce_seconds`` after the first trigger and
  runs one round for the whole burst, so 1,000 submissions in a second cost a handful of
  rounds, not 1,000.
- **The solver runs off the event loop** (``asyncio.to_thread``): CP-SAT releases the GIL
  while it searches, so heartbeats, status reports and RPCs keep flowing during a solve.
  So does every step of a round whose cost grows with its jobs or the clusters: the checks
  after the plan, building the audit records, and the per-Work dispatch log (``_decide``,
  ``_record``, ``_dispatched``); what stays on the loop is constant per round.
  A process pool would also free the greedy Python parts but costs pickling the whole
  snapshot every round; threads are enough at our sizes. Store calls (synchronous
  SQLAlchemy) run in threads too.
- **Nothing is half-written.** If the store is unavailable or the planner raises, the
  round is logged, nothing was recorded, and it is retried on the next trigger (and after
  a short back-off, so a pending job is not stranded when no trigger comes). A placed
  job's Work is written in the round's transaction, so the works table is the live record
  of where each job runs (the job row's cluster/HyperNode/tier is a cache written with it)
  and no crash leaves a placed job without its Work. A placed job found without one all
  the same (a row from before this rule, or a manual transition) was never dispatched, so
  ``_repair`` requeues it to be planned again; nothing is read from the audit, which
  retention prunes.
- **Placed jobs stay put.** Placed, dispatched and running jobs enter the planner as
  ``RunningJob`` with their placement, so a later round never moves them (only an explicit
  preemption does, recorded as such).
- **A round plans a bounded intake** of at most ``max_pending`` pending jobs
  (``control.snapshot.intake``), so its cost does not grow with the backlog; the jobs
  outside it keep their last decision. An ``unplaced`` decision is written only when its
  reason, constraint or closest cluster changed (``record_round``), so a steady backlog
  does not write a row per job per round.
- **Jobs leave a tainted cluster when their tolerations run out** (Karmada's taint
  manager, ``propagation.taints``): each round requeues those whose time has come before
  planning, and asks for a round at the next such time.
- **Unavailable is not impossible.** A job that only a lost, unhealthy or not yet
  reporting cluster could hold is recorded as waiting ("allowed clusters unavailable"),
  not unschedulable (``propagation.availability``): it is placed when the cluster returns.
- **Running elastic jobs grow** (``Plan.growths``): a round also runs when nothing is
  pending but such a job runs short of its replicas, and each growth adds pods to the
  job's active Work under the same version and the next generation (``_grow``,
  docs/design/elastic-gangs.md).
  Pending jobs' reason changes are ``Waiting`` events; ``Unschedulable`` is kept for jobs
  no allowed cluster could ever hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime

from federation.control.snapshot import PlanningInput, load
from federation.domain.jobflows import STOP
from federation.domain.plans import FederationSnapshot, Placement, Plan, PlanLimits
from federation.domain.states import WAITING_EVENT, JobState
from federation.domain.works import DEFAULT_DISPATCH_TIMEOUT_SECONDS, payload_generation
from federation.logs import fields
from federation.metrics.gauges import Observed
from federation.metrics.instruments import NO_METRICS, ServiceMetrics
from federation.placement import plan as plan_round
from federation.placement.growth import growable
from federation.propagation.availability import with_availability
from federation.propagation.taints import DEFAULT_FAILOVER_GRACE_SECONDS
from federation.propagation.works import refuse_inadmissible
from federation.store import RoundResult, Store, StoreError, WorkRecord
from federation.store.plan_records import decisions_from_plan, queue_counts, round_from_plan, updates_from_plan

log = logging.getLogger(__name__)

DEFAULT_LIMITS = PlanLimits()
POLICY = "cpsat"
RETRY_MIN_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
DEFAULT_MAX_PENDING = 5_000  # jobs one round considers; see "Bounded rounds" in docs/design/rounds.md

WorksListener = Callable[[str], None]


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


class RoundScheduler:
    """Runs planning rounds when something changed (submission, snapshot, lost cluster)."""

    def __init__(
        self,
        store: Store,
        *,
        debounce_seconds: float = 0.2,
        limits: PlanLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
        on_plan: Callable[[Plan], Awaitable[None]] | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        metrics: ServiceMetrics = NO_METRICS,
        failover_grace_seconds: float = DEFAULT_FAILOVER_GRACE_SECONDS,
        dispatch_timeout_seconds: float = DEFAULT_DISPATCH_TIMEOUT_SECONDS,
    ) -> None:
        """``failover_grace_seconds``: how long a job without a toleration of its own stays
        on a cluster tainted unreachable or not-ready (propagation/taints.py);
        ``dispatch_timeout_seconds``: how long a reachable cluster may leave a job's Work
        unacknowledged before the job is re-planned (control/snapshot.py)."""
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self._store = store
        self._max_pending = max_pending
        self._failover_grace = failover_grace_seconds
        self._dispatch_timeout = dispatch_timeout_seconds
        # When this scheduler began to lead (``start``): no agent could acknowledge a Work
        # before, so a dispatch timeout counts from then at the earliest.
        self._leading_since = clock()
        self._eviction_timer: asyncio.TimerHandle | None = None
        self._eviction_at: float | None = None
        self._debounce = debounce_seconds
        self._limits = limits
        self._clock = clock
        self._on_plan = on_plan
        self._planner: Callable[..., Plan] = plan_round
        self._wake = asyncio.Event()
        self._reasons: list[str] = []
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._previous: Plan | None = None
        self._listeners: list[WorksListener] = []
        self._failures = 0
        self._retry_soon = False
        self._last_digest = ""
        self.rounds_run = 0
        self.last_error: str = ""
        self._metrics = metrics
        # What the last round read and decided, for the scrape-time gauges (metrics.gauges):
        # one reference swap per round; a scrape reads it from the exporter's thread.
        self.observed: Observed | None = None

    # ------------------------------------------------------------------ wiring
    def on_works_changed(self, listener: WorksListener) -> None:
        """Call ``listener(cluster)`` after a round created or withdrew works there (the hub)."""
        self._listeners.append(listener)

    def set_planner(self, planner: Callable[..., Plan]) -> None:
        """Replace the planner (tests inject failures; the demo may pick a baseline)."""
        self._planner = planner

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the background loop; one round runs at once to pick up work left pending
        by a previous process (a restart must not wait for the next submission)."""
        if self._task is None:
            self._leading_since = self._clock()
            self._task = asyncio.create_task(self._loop(), name="planning-rounds")
            self.trigger("startup")

    async def stop(self) -> None:
        """Stop the loop; a round in flight finishes first (its transaction is never cut)."""
        task, self._task = self._task, None
        if self._eviction_timer is not None:
            self._eviction_timer.cancel()
        if task is None:
            return
        async with self._lock:  # wait for the round in flight
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def trigger(self, reason: str) -> None:
        """Ask for a round soon; bursts within the debounce interval coalesce into one."""
        if reason not in self._reasons:
            self._reasons.append(reason)
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            timeout = None
            if self._failures:
                timeout = min(RETRY_MAX_SECONDS, RETRY_MIN_SECONDS * 2 ** (self._failures - 1))
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for(event.wait()) swallows a
            # cancellation that arrives as the event is set, and a stopped loop must stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            await asyncio.sleep(self._debounce)
            self._wake.clear()
            reasons, self._reasons = self._reasons, []
            trigger = ",".join(reasons) or "retry"
            try:
                await self.run_once(trigger)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # logged, nothing half-written, retried
                self._failures += 1
                self._metrics.round_failed()
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("planning round (%s) failed, will retry: %s", trigger, self.last_error,
                            exc_info=not isinstance(exc, StoreError), extra=fields(trigger=trigger))
            else:  # a round that left work undone (a repair not recorded) retries after the back-off too
                self._failures, self._retry_soon = (1 if self._retry_soon else 0), False

    # ------------------------------------------------------------------ one round
    async def run_once(self, trigger: str) -> int:
        """Run one round now and return its id (0 when nothing was pending: no round is
        recorded then, so idle snapshots do not flood the audit)."""
        metrics = self._metrics
        async with self._lock:
            started = self._clock()
            with metrics.phase("load"):
                data: PlanningInput = await asyncio.to_thread(load, self._store, started, self._max_pending,
                                                              self._failover_grace, self._dispatch_timeout,
                                                              self._leading_since)
            with metrics.phase("repair"):
                repaired = (await self._evict(data) | await self._repair(data)
                            | await self._hold_flows(data))
            if repaired:  # re-read what changed
                with metrics.phase("load"):
                    data = await asyncio.to_thread(load, self._store, started, self._max_pending,
                                                   self._failover_grace, self._dispatch_timeout,
                                                   self._leading_since)
            self._wake_for_eviction(data.next_eviction, started)
            snapshot = data.snapshot
            if not snapshot.pending and not growable(snapshot):
                self.observed = Observed(snapshot, Plan())
                return 0
            if data.digest == self._last_digest and trigger in ("snapshot", "retry"):
                return 0  # nothing the plan depends on changed since the last round
            with metrics.phase("plan"):
                plan, refused = await asyncio.to_thread(self._decide, data)
            for job_name, cluster_name, blocked in refused:  # never expected: the planner honours the policy
                log.error("placement of %s in %s violates its propagation policy (%s); not recorded", job_name,
                          cluster_name, blocked, extra=fields(job=job_name, cluster=cluster_name))
            if not snapshot.pending and not plan.growths:  # only growth was possible, and none fits:
                self.observed, self._last_digest = Observed(snapshot, plan), data.digest  # record nothing
                return 0
            ended = self._clock()
            with metrics.phase("audit"):
                result = await asyncio.to_thread(self._record, plan, data, _utc(started), _utc(ended), trigger)
            self._previous, self._last_digest = plan, data.digest
            self.observed = Observed(snapshot, plan)
            self.rounds_run += 1
            metrics.round_recorded(plan.status)
            if result.skipped:
                log.info("round %d: %d job(s) changed while planning, skipped: %s", result.round_id,
                         len(result.skipped), ", ".join(result.skipped), extra=fields(round=result.round_id))
            changed = {data.running_clusters[v.job] for v in plan.preemptions
                       if v.job in result.applied and v.job in data.running_clusters}
            if result.created_works:  # this round's load could not see their dispatch deadline
                due = self._clock() + self._dispatch_timeout
                if self._eviction_at is None or due < self._eviction_at:
                    self._wake_for_eviction(due, self._clock())
            with metrics.phase("dispatch"):
                changed |= await asyncio.to_thread(self._dispatched, plan, snapshot, result.created_works,
                                                   result.round_id)
                changed |= await self._grow(plan.growths, result.round_id)
                self._notify(changed)
            log.info("round %d (%s): %d pending, %d placed, %d unplaced, %d preempted, %s in %.3fs",
                     result.round_id, trigger, len(snapshot.pending), len(plan.placements), len(plan.unplaced),
                     len(plan.preemptions), plan.status, plan.solve_seconds,
                     extra=fields(round=result.round_id, trigger=trigger))
        if self._on_plan is not None:
            try:
                await self._on_plan(plan)
            except Exception:
                log.exception("on_plan callback failed")
        return result.round_id

    def _decide(self, data: PlanningInput) -> tuple[Plan, tuple[tuple[str, str, str], ...]]:
        """The plan as the round records it, and the placements its propagation policy refused.

        Runs in a worker thread, the planner and the checks after it alike: besides the
        solve, marking what only unavailable clusters could hold and re-checking every
        placement against its policy grow with the round's jobs and the clusters (5,000
        jobs on 100 clusters: about 0.3 s of CPU for these and ``_record``'s records),
        which on the event loop stalled every RPC and agent stream for that long.
        """
        snapshot = data.snapshot
        plan = self._planner(snapshot, self._limits, self._previous)
        plan = with_availability(plan, snapshot, data.unknown, data.unavailable)  # unavailable ≠ impossible
        return refuse_inadmissible(plan, snapshot)

    def _record(self, plan: Plan, data: PlanningInput, started: datetime, ended: datetime,
                trigger: str) -> RoundResult:
        """Build the round's audit records (one decision and one job change per job) and
        write them in one transaction; in a worker thread, since both grow with the round's
        jobs (``_decide``)."""
        snapshot = data.snapshot
        round_ = round_from_plan(
            plan, started_at=started, ended_at=ended, trigger=trigger, policy=POLICY, input_digest=data.digest,
            pending_count=len(snapshot.pending), queue_counts=queue_counts(plan, snapshot),
        )
        return self._store.audit.record_round(round_, decisions_from_plan(plan), updates_from_plan(plan, data.versions))

    def _dispatched(self, plan: Plan, snapshot: FederationSnapshot, works: Iterable[WorkRecord],
                    round_id: int) -> set[str]:
        """Log the Works the round's transaction created; returns the clusters that got one.
        One line per Work (thousands in a big round): called in a worker thread."""
        placements = {p.job: p for p in plan.placements}
        queues = {p.job.name: p.job.queue for p in snapshot.pending}
        clusters: set[str] = set()
        for work in works:
            placement = placements.get(work.job)
            log.info("job %s placed in %s (%s, tier %d): work created", work.job, work.cluster,
                     (placement.hypernode if placement else "") or "whole cluster", placement.tier if placement else 0,
                     extra=fields(job=work.job, queue=queues.get(work.job), cluster=work.cluster, round=round_id))
            clusters.add(work.cluster)
        return clusters

    async def _grow(self, growths: Iterable[Placement], round_id: int | None = None) -> set[str]:
        """Add the pods of each growth to its job's active Work (same version, next
        generation; ``WorkRepository.grow``); returns the clusters whose agent must hear.

        A growth whose Work changed meanwhile (cancelled, re-planned, finished) is a
        ``Conflict`` and dropped: the next round decides again from what runs then.
        """
        clusters: set[str] = set()
        for growth in growths:
            ids = fields(job=growth.job, cluster=growth.cluster, round=round_id)
            try:
                work = await asyncio.to_thread(self._store.works.grow, growth.job, growth.cluster, growth.hypernode,
                                               growth.pods)
            except StoreError as exc:
                log.info("growth of %s not applied (%s); the next round decides again", growth.job, exc, extra=ids)
                continue
            log.info("job %s grows by %d pod(s) in %s (%s): work %d generation %d", growth.job, len(growth.pods),
                     growth.cluster, growth.hypernode, work.id, payload_generation(work.payload), extra=ids)
            clusters.add(growth.cluster)
        return clusters

    async def _evict(self, data: PlanningInput) -> bool:
        """Requeue the jobs whose cluster's NoExecute taints they no longer tolerate (Karmada's
        taint manager; propagation/taints.py), and those whose reachable cluster left their
        Work unacknowledged past the dispatch timeout, and tell the clusters' agents: each job
        is re-planned by this round, and its Work there is withdrawn."""
        changed: set[str] = set()
        for cluster, reasons in sorted(data.evictions.items()):
            try:
                done = await asyncio.to_thread(self._store.clusters.evict, cluster, reasons,
                                               unacknowledged=data.unacknowledged)
            except StoreError as exc:
                log.warning("eviction from %s not recorded yet (%s); retrying", cluster, exc,
                            extra=fields(cluster=cluster))
                self._retry_soon = True
                continue
            for job in done.requeued:
                log.warning("job %s %s; re-planning it", job, reasons[job], extra=fields(job=job, cluster=cluster))
            if done.requeued:
                changed.add(cluster)
        self._notify(changed)
        return bool(changed)

    def _wake_for_eviction(self, at: float | None, now: float) -> None:
        """Run a round when the next toleration or dispatch timeout runs out (nothing else
        may trigger one then)."""
        if self._eviction_timer is not None:
            self._eviction_timer.cancel()
            self._eviction_timer = None
        self._eviction_at = at
        if at is not None:
            delay = max(0.0, at - now) + 0.05
            self._eviction_timer = asyncio.get_running_loop().call_later(delay, self.trigger, "eviction")

    async def _hold_flows(self, data: PlanningInput) -> bool:
        """Cancel the jobs whose flow dependency failed, naming it (Volcano's flow goes
        Failed); say on the others what they wait for. True when a job was cancelled."""
        cancelled = False
        for name, (verdict, reason, recorded) in sorted(data.held.items()):
            try:
                if verdict == STOP:
                    await asyncio.to_thread(self._store.jobs.cancel, name, reason)
                    cancelled = True
                elif recorded != reason:
                    await asyncio.to_thread(self._store.jobs.annotate, name, reason=reason, message=reason,
                                            event=WAITING_EVENT)
            except StoreError as exc:  # changed meanwhile (cancelled by its owner): the next round sees it
                log.info("flow hold for %s not recorded: %s", name, exc)
        return cancelled

    async def _repair(self, data: PlanningInput) -> bool:
        """Requeue placed jobs that have no Work, so the round plans them again.

        Rounds write a placement and its Work in one transaction, so such a job is a row
        from before that rule or a manual transition. Its Work never existed, so no agent
        runs it: planning it afresh is safe, and reads nothing from the audit (which
        retention prunes) or from the job row's placement cache.
        """
        requeued = False
        for rec in data.placed_without_work:
            ids = fields(job=rec.name, queue=rec.queue, cluster=rec.cluster)
            try:
                await asyncio.to_thread(self._store.jobs.transition, rec.name, JobState.PENDING,
                                        reason=f"placed in {rec.cluster} without a Work; planned again",
                                        expected_version=data.versions.get(rec.name))
            except StoreError as exc:  # changed meanwhile (cancelled, say): the next round sees it
                log.info("placed job %s without a Work not requeued: %s", rec.name, exc, extra=ids)
                self._retry_soon = True
                continue
            log.warning("repaired: requeued placed job %s, which had no Work in %s", rec.name, rec.cluster, extra=ids)
            requeued = True
        return requeued

    def _notify(self, clusters: Iterable[str]) -> None:
        for cluster in sorted(set(clusters)):
            for listener in self._listeners:
                try:
                    listener(cluster)
                except Exception:
                    log.exception("works listener failed for %s", cluster)
