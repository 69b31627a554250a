"""The central side of ``AgentService.Connect`` (docs/design/work-protocol.md).

One session per connected agent. The hub is a thin adapter: every decision it makes is a
store transaction (register with epoch fencing, record a snapshot, move a job, mark a
cluster lost) or a pure function from ``federation.propagation``; what it adds is the
stream plumbing and the lost-agent watchdog. Why each rule:

- **Hello first, epoch checked, token checked.** A lower epoch is a deposed leader: it
  gets ``Fence`` and the stream closes, so it can never touch pods again. The token must
  be the cluster's own (``PERMISSION_DENIED`` otherwise), so one cluster's agent cannot
  report for, or receive the work of, another.
- **Sync before anything new.** After an accepted hello the agent receives every active
  Work of its cluster, then ``Ack{what: "sync", id: <count>}``; it withdraws what is not
  in the set. That is how a cluster returning after being declared lost drops the jobs
  that were re-planned elsewhere *before* it is given new work.
- **Invalid snapshots are answered, not fatal.** The reply is
  ``Ack{what: "snapshot-rejected", id: "<field path>: <rule>"}``; the store keeps the last
  valid snapshot and records the error (``fedctl cluster list`` shows it). Aborting the
  stream instead would also stop heartbeats and status reports, and a typo in a HyperNode
  object must not fail over every job running in the cluster. A refused status report is
  answered the same way, ``Ack{what: "status-rejected", id: "<work_id>@<version>"}``.
- **Silence, not a dropped stream, loses a cluster.** Streams drop on every blip; only a
  cluster not heard from for ``grace_seconds`` is marked lost: fenced (its agent must
  say hello again and be synced) and tainted ``cluster.karmada.io/unreachable:NoExecute``
  in one transaction, and a round is triggered; each of its jobs is re-planned elsewhere
  when its tolerations run out (the service's failover grace by default;
  ``propagation.taints``). The taint goes with the agent's next accepted hello.
- **Heard is recorded on receipt, on a monotonic clock.** The reader notes the time a
  message arrives before anything else and hands the message to the stream's worker
  (``agent_inbox``), so a slow store call for one message (a big snapshot, a busy
  database) never delays reading the heartbeats behind it. Wall-clock steps (NTP) cannot
  age or rejuvenate a cluster. The watchdog re-reads that time for each cluster right
  before marking it lost (never a ``now`` taken before an earlier await), and the store
  re-checks the cluster's last recorded heartbeat in the same transaction that marks it.
- **An agent that does not read is slowed, not buffered.** At most ``OUTBOX_LIMIT``
  answers and Works wait for it (``agent_session``); then its stream's worker waits and
  gRPC's flow control stops its writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from federation.control.loop import RoundScheduler
from federation.domain.errors import InvalidInput
from federation.domain.works import payload_generation
from federation.logs import fields, set_fields
from federation.metrics.instruments import NO_METRICS, ServiceMetrics
from federation.propagation.failover import loss_reason, lost_clusters
from federation.propagation.taints import UNREACHABLE, unreachable_taint
from federation.propagation.works import work_from_payload
from federation.service.agent_messages import ack, fence, rejection
from federation.service.agent_session import Session
from federation.service.agent_status import StatusHandler
from federation.service.auth import Authenticator, PermissionDenied
from federation.service.snapshot_parsing import SnapshotParsing, Superseded
from federation.store import JobRecord, NotFound, StaleEpoch, Store, StoreError, Unavailable
from federation.store.leases import NotLeader
from federation.v1 import agent_pb2, agent_pb2_grpc
from federation.wire.convert import snapshot_from_proto, timestamp_from_proto, work_to_proto
from federation.wire.limits import DEFAULT_LIMITS, Limits, check_hello, check_snapshot

log = logging.getLogger(__name__)
T = TypeVar("T")

HELLO_TIMEOUT_SECONDS = 5.0
SYNC_READ_CHUNK = 500  # jobs read per query when Works are sent (bound-parameter limits of the databases)
STORE_RETRIES = 3


class AgentHub(agent_pb2_grpc.AgentServiceServicer):
    """One stream per connected agent; fences stale leaders; watches for lost clusters."""

    def __init__(
        self,
        store: Store,
        rounds: RoundScheduler,
        auth: Authenticator,
        *,
        grace_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        leading: Callable[[], bool] = lambda: True,
        limits: Limits = DEFAULT_LIMITS,
        hello_timeout_seconds: float = HELLO_TIMEOUT_SECONDS,
        metrics: ServiceMetrics = NO_METRICS,
    ) -> None:
        """``leading`` says whether this replica holds the leadership: a standby refuses
        every stream with UNAVAILABLE, so an agent retries (through the Service, which
        routes to the ready replica: the leader). ``monotonic`` times liveness (when each
        cluster was last heard from). ``clock`` is the wall clock ``build_server`` passes;
        liveness never uses it, because a wall clock that steps back or forth would age or
        rejuvenate every cluster at once."""
        self._store = store
        self._rounds = rounds
        self._auth = auth
        self._limits = limits
        self._hello_timeout = hello_timeout_seconds
        self._grace = grace_seconds
        self._clock = clock
        self._monotonic = monotonic
        self._leading = leading
        self._metrics = metrics
        self._sessions: dict[str, Session] = {}
        self._last_seen: dict[str, float] = {}
        self._watchdog: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._status = StatusHandler(store, self._call, rounds.trigger, self.notify_works_changed, limits=limits)
        self._parsing = SnapshotParsing()  # its own threads: see federation/service/snapshot_parsing.py
        rounds.on_works_changed(self.notify_works_changed)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the lost-agent watchdog. Clusters known from before a restart get a full
        grace period from now: a central restart must not fail over healthy clusters."""
        if self._watchdog is not None:
            return
        try:
            clusters = await self._call(self._store.clusters.list)
        except StoreError as exc:
            log.warning("cannot list clusters at start (%s); the watchdog learns them as agents connect", exc)
            clusters = []
        now = self._monotonic()
        for c in clusters:
            if not c.lost:
                self._last_seen.setdefault(c.name, now)
        self._watchdog = asyncio.create_task(self._watch(), name="agent-watchdog")

    async def stop(self) -> None:
        """Stop the watchdog and close every agent stream (agents reconnect elsewhere/later)."""
        task, self._watchdog = self._watchdog, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for session in list(self._sessions.values()):
            session.close()

    def connected(self) -> dict[str, int]:
        """Connected clusters and their epochs (for status pages and tests)."""
        return {name: s.epoch for name, s in self._sessions.items() if not s.closed}

    def stream_count(self) -> int:
        """Open agent streams; safe to call from another thread (the metrics exporter)."""
        return sum(1 for s in list(self._sessions.values()) if not s.closed)

    def queued(self, cluster: str) -> int:
        """Messages waiting for ``cluster``'s agent to read them (at most ``OUTBOX_LIMIT``)."""
        session = self._sessions.get(cluster)
        return session.queued() if session is not None else 0

    # ------------------------------------------------------------------ called by others
    def notify_works_changed(self, cluster: str) -> None:
        """Push the cluster's new, changed or withdrawn works to its connected agent (if any)."""
        session = self._sessions.get(cluster)
        if session is not None:
            session.dirty.set()

    async def cancel_job(self, job: str) -> None:
        """Tell the job's agent its work is withdrawn (the store has already cancelled it)."""
        latest = await self._call(self._store.works.latest, job)
        if latest is not None:
            self.notify_works_changed(latest.cluster)

    # ------------------------------------------------------------------ the stream
    async def Connect(
        self,
        request_iterator: AsyncIterator[agent_pb2.AgentMessage],
        context: Any,
    ) -> AsyncIterator[agent_pb2.CentralMessage]:
        # Who is calling comes first: an unknown token learns nothing, not even the protocol.
        who = self._auth.identity(context)
        if who.tenant is not None and not self._auth.open:
            raise PermissionDenied(f"{who.name} is a submitter token; only cluster agents may connect")
        if not self._leading():
            raise NotLeader("this central replica is a standby and takes no agent streams; reconnect to the leader")
        messages = request_iterator.__aiter__()
        try:
            first = await asyncio.wait_for(anext(messages), self._hello_timeout)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise InvalidInput("hello", f"no hello within {self._hello_timeout:g}s of connecting") from None
        if first.WhichOneof("body") != "hello":
            raise InvalidInput("hello", "the first message on the stream must be hello")
        hello = first.hello
        check_hello(hello)  # before it is registered, stored or logged
        self._auth.authorize_cluster(context, hello.cluster)
        reg = await self._call(self._store.clusters.register, hello.cluster, hello.epoch, agent_id=hello.agent_id)
        old = self._sessions.get(hello.cluster)
        # A newer leader may have registered after us and connected before our registration
        # returned (threads hand back in any order): its open stream is as good as the record.
        newer = old.epoch if old is not None and not old.closed and old.epoch > hello.epoch else None
        if not reg.accepted or newer is not None:
            current = newer or (reg.previous_epoch if reg.previous_epoch is not None else reg.cluster.epoch)
            log.warning("fenced agent %s of cluster %s: epoch %d < current %d", hello.agent_id, hello.cluster,
                        hello.epoch, current, extra=fields(cluster=hello.cluster, agent=hello.agent_id,
                                                           epoch=hello.epoch))
            yield fence(f"epoch {hello.epoch} is stale: cluster {hello.cluster} has a newer leader (epoch {current})",
                        current)
            return
        # Every event of this stream's task, and of the tasks it starts, carries these fields.
        set_fields(cluster=hello.cluster, agent=hello.agent_id, epoch=hello.epoch)
        session = Session(hello.cluster, hello.epoch, hello.agent_id)
        if old is not None:
            old.close(fence(f"superseded by agent {hello.agent_id} (epoch {hello.epoch})", hello.epoch)
                      if old.epoch < hello.epoch else None)
        self._sessions[hello.cluster] = session
        self._last_seen[hello.cluster] = self._monotonic()
        log.info("agent %s connected for cluster %s (epoch %d)", hello.agent_id, hello.cluster, hello.epoch)
        reader = asyncio.create_task(self._read(session, messages), name=f"agent-read-{hello.cluster}")
        worker = asyncio.create_task(self._work(session), name=f"agent-work-{hello.cluster}")
        pusher: asyncio.Task[None] | None = None
        try:
            yield ack("hello", "", hello.epoch)
            works = await self._desired(session)
            for msg in works:
                yield msg
            yield ack("sync", str(len(works)), hello.epoch)
            pusher = asyncio.create_task(self._push(session), name=f"agent-push-{hello.cluster}")
            while True:
                out = await session.next()
                if out is None:
                    break
                yield out
        finally:
            session.close()
            reader.cancel()
            worker.cancel()
            if pusher is not None:
                pusher.cancel()
            if self._sessions.get(hello.cluster) is session:
                del self._sessions[hello.cluster]
            log.info("agent %s of cluster %s disconnected", hello.agent_id, hello.cluster)

    async def _desired(self, session: Session) -> list[agent_pb2.CentralMessage]:
        """Every active Work of the session's cluster, as messages; records them as sent.
        A Work whose job was deleted since the listing is left out (its withdrawal)."""
        works = await self._call(self._store.works.active, session.cluster)
        records = await self._jobs(session, [w.job for w in works])
        out: list[agent_pb2.CentralMessage] = []
        for work in works:
            record = records.get(work.job)
            if record is None:
                continue
            out.append(agent_pb2.CentralMessage(work=work_to_proto(
                work_from_payload(work.id, record.job, work.version, work.payload))))
            session.sent[work.job] = (work.id, work.version, payload_generation(work.payload))
        return out

    async def _jobs(self, session: Session, names: list[str]) -> dict[str, JobRecord]:
        """The jobs of ``names`` that exist, ``SYNC_READ_CHUNK`` to a query; stops early
        (returning nothing) once the session is closed. Why chunks: one query per Work made
        a reconnect of a cluster running 1,000 jobs cost 1,000 round trips on the threads
        every RPC shares, and a superseded stream kept paying them."""
        records: dict[str, JobRecord] = {}
        for start in range(0, len(names), SYNC_READ_CHUNK):
            if session.closed:
                return {}
            records.update(await self._call(self._store.jobs.get_many, names[start:start + SYNC_READ_CHUNK]))
        return records

    async def _push(self, session: Session) -> None:
        """Send the differences between what the agent was sent and what should run now."""
        while not session.closed:
            await session.dirty.wait()
            session.dirty.clear()
            try:
                await self._refresh(session)
            except StoreError as exc:
                log.warning("cannot refresh works of %s (%s); retrying", session.cluster, exc)
                await asyncio.sleep(0.5)
                session.dirty.set()

    async def _refresh(self, session: Session) -> None:
        active = {w.job: w for w in await self._call(self._store.works.active, session.cluster)}
        for job, (work_id, version, _) in sorted(session.sent.items()):
            if job in active and (active[job].id, active[job].version) == (work_id, version):
                continue
            if job not in active or active[job].version > version:
                try:
                    reason = (await self._call(self._store.works.get, work_id)).message or "withdrawn"
                except NotFound:  # deleted with its job (its queue was deleted): withdrawn all the same
                    reason = "withdrawn (the job was deleted)"
                await session.send(agent_pb2.CentralMessage(cancel=agent_pb2.Cancel(
                    work_id=str(work_id), job=job, version=version, reason=reason)))
                del session.sent[job]
        changed = {job: work for job, work in sorted(active.items())
                   if session.sent.get(job) != (work.id, work.version, payload_generation(work.payload))}
        records = await self._jobs(session, list(changed))  # a grown Work (next generation) is sent again
        for job, work in changed.items():
            record = records.get(job)
            if record is None:  # deleted since the Works were listed: its Work went with it
                continue
            await session.send(agent_pb2.CentralMessage(work=work_to_proto(
                work_from_payload(work.id, record.job, work.version, work.payload))))
            if job not in session.sent:  # a new Work, not a new version of one already sent
                self._metrics.work_dispatched(self._clock() - work.created_at.timestamp())
            session.sent[job] = (work.id, work.version, payload_generation(work.payload))

    async def _read(self, session: Session, messages: AsyncIterator[agent_pb2.AgentMessage]) -> None:
        """Record liveness on receipt, then queue the message for the stream's worker."""
        try:
            async for msg in messages:
                if session.closed:
                    break
                self._last_seen[session.cluster] = self._monotonic()
                if msg.WhichOneof("body") == "hello":
                    log.info("cluster %s repeated hello mid-stream; ignored", session.cluster)
                    continue
                while not session.inbox.offer(msg):
                    await session.inbox.room()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke (client gone): end our side too
            log.debug("stream of %s ended: %s", session.cluster, exc)
        finally:
            session.inbox.finish()  # the worker applies what was received, then ends the session

    async def _work(self, session: Session) -> None:
        """Do the store work of the session's messages, one at a time, in arrival order."""
        while not session.closed:
            entry = await session.inbox.get()
            if entry is None:  # the stream ended and everything received was applied
                session.close()
                return
            msg, kind = entry.message, entry.message.WhichOneof("body")
            try:
                await self._handle(session, msg, entry.count)
            except StaleEpoch as exc:
                if exc.epoch < exc.current:
                    session.close(fence(str(exc), exc.current))
                else:  # declared lost meanwhile: end the stream; its hello re-registers and syncs
                    session.close()
                return
            except InvalidInput as exc:
                log.warning("cluster %s sent an invalid message: %s", session.cluster, exc)
            except StoreError as exc:
                log.warning("cluster %s: %s message dropped (%s); the agent reports again",
                            session.cluster, kind, exc)
            except Exception:
                log.exception("cluster %s: %s message failed", session.cluster, kind)

    async def _handle(self, session: Session, msg: agent_pb2.AgentMessage, count: int = 1) -> None:
        kind = msg.WhichOneof("body")
        if kind == "heartbeat":
            await self._call(self._store.clusters.heartbeat, session.cluster, session.epoch)
        elif kind == "snapshot":
            await self._snapshot(session, msg.snapshot)
        elif kind == "status":
            await self._report(session, msg.status, count)

    async def _report(self, session: Session, msg: agent_pb2.WorkStatus, count: int) -> None:
        """Apply a status report and answer each report it stands for: an ack, or a
        ``status-rejected`` naming the field and the rule (another cluster's Work, a
        malformed work id, a bound broken), as a refused snapshot is answered. Only logging
        the refusal left the agent re-sending the same report without knowing why."""
        reported = f"{msg.work_id[:64]}@{msg.version}"
        try:
            replies = await self._status.handle(session.cluster, session.epoch, msg)
        except InvalidInput as exc:
            log.warning("status report of %s rejected: %s", session.cluster, exc)
            for _ in range(count):
                await session.send(rejection("status-rejected", exc, session.epoch, reported))
            return
        for reply in replies:
            await session.send(reply)
        for _ in range(count):  # one ack per report received, coalesced or not
            await session.send(ack("status", reported, session.epoch))

    async def _snapshot(self, session: Session, msg: Any) -> None:
        try:
            if msg.cluster != session.cluster:
                raise InvalidInput("snapshot.cluster", f"is {msg.cluster!r}; this stream speaks for "
                                                       f"{session.cluster!r}")
            # Bounded first (counts and lengths), then parsed: both off the event loop, since a
            # 15,000-node snapshot takes a noticeable fraction of a second to validate; on the
            # parsing executor, one per cluster at a time, never on the store calls' threads.
            snapshot = await self._parsing.run(session.cluster, functools.partial(self._parse_snapshot, msg))
        except Superseded:
            log.info("snapshot of %s superseded by a newer one before it was converted", session.cluster)
            return
        except InvalidInput as exc:
            await self._call(self._store.clusters.record_tree_error, session.cluster, session.epoch, str(exc))
            log.warning("snapshot of %s rejected: %s", session.cluster, exc)
            await session.send(rejection("snapshot-rejected", exc, session.epoch))
            return
        await self._call(self._store.clusters.record_snapshot, session.epoch, snapshot)
        # takenAt was range-checked with the rest (check_snapshot): fromtimestamp cannot raise here.
        taken = datetime.fromtimestamp(timestamp_from_proto(msg.taken_at), tz=UTC).isoformat()
        await session.send(ack("snapshot", taken, session.epoch))
        self._rounds.trigger("snapshot")

    def _parse_snapshot(self, msg: Any) -> Any:
        check_snapshot(msg, self._limits, "snapshot")
        return snapshot_from_proto(msg, "snapshot", limits=self._limits)

    # ------------------------------------------------------------------ watchdog
    async def _watch(self) -> None:
        tick = min(1.0, max(0.05, self._grace / 4))
        while True:
            await asyncio.sleep(tick)
            await self.sweep()

    async def sweep(self) -> list[str]:
        """One watchdog tick: mark lost every cluster silent past the grace period; returns them.

        Each cluster is re-checked against the time it was last heard from right before it
        is marked: marking an earlier one awaits the store, and a heartbeat may arrive
        meanwhile (a ``now`` taken before that await once produced "no heartbeat for -1s").
        """
        lost: list[str] = []
        for cluster in lost_clusters(self._last_seen, self._monotonic(), self._grace):
            if await self._lose(cluster):
                lost.append(cluster)
        return lost

    async def _lose(self, cluster: str) -> bool:
        seen = self._last_seen.get(cluster)
        silent = self._monotonic() - seen if seen is not None else 0.0
        if seen is None or silent <= self._grace:
            return False  # heard from since the sweep began
        session = self._sessions.get(cluster)
        reason = loss_reason(cluster, silent, self._grace)
        try:
            loss = await self._call(self._store.clusters.mark_unreachable, cluster, unreachable_taint(self._clock()),
                                    unless_heard_within=self._grace)
        except StoreError as exc:
            log.warning("cannot mark %s lost yet (%s); retrying", cluster, exc, extra=fields(cluster=cluster))
            return False
        if not loss.marked:  # the store holds a heartbeat within the grace period (another replica, a re-hello)
            log.info("cluster %s not marked lost: its agent was heard from within %gs", cluster, self._grace,
                     extra=fields(cluster=cluster))
            self._last_seen[cluster] = max(self._last_seen.get(cluster, seen), self._monotonic())
            return False
        if self._sessions.get(cluster) is session:  # no new hello meanwhile: stop watching, end the stream
            self._last_seen.pop(cluster, None)
            if session is not None:
                session.close()
        log.warning("%s: tainted %s:NoExecute; its %d active job(s) leave as their tolerations run out",
                    reason, UNREACHABLE, loss.cluster.active_jobs, extra=fields(cluster=cluster))
        self._rounds.trigger("cluster-lost")
        return True

    # ------------------------------------------------------------------ store calls
    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a (synchronous) store call in a thread; retry briefly when the database
        is unavailable so one blip does not drop an agent's report."""
        for attempt in range(STORE_RETRIES):
            try:
                return await asyncio.to_thread(fn, *args, **kwargs)
            except Unavailable:
                if attempt == STORE_RETRIES - 1:
                    raise
                await asyncio.sleep(0.2 * 2 ** attempt)
        raise AssertionError("unreachable")

