"""The agent process: one ``AgentService.Connect`` stream to central over one ClusterBackend.

The protocol is docs/design/work-protocol.md; this module is its agent side:

- **Hello with an epoch** (the time this process became leader; the start time when no
  leader election is used). ``Fence`` in reply, or at any time later, means a newer
  leader exists: the runtime stops acting at once (``run`` raises ``Fenced``) and never
  touches pods again; re-election is the caller's business.
- **Sync.** Works received before ``Ack{sync}`` are the whole desired set; every job the
  agent holds or finds labelled in the cluster that is not in it is withdrawn. This is
  what fences a cluster that returns after being declared lost.
- **Reconnect with exponential backoff and jitter** ("equal jitter": a random delay in
  [d/2, d], d doubling up to a cap) so a central restart is not met by every agent at the
  same instant; the backoff resets once a hello is accepted.
- **Liveness**: a heartbeat every ``heartbeat_seconds``; a snapshot on change (watch
  events, debounced) and at least every ``snapshot_period_seconds``.
- **Reconcile passes** (agents/runtime_jobs.py) run on watch events, on new Work and
  periodically (delayed restart actions fall due), whether or not central is reachable:
  restart policies are local, so a network partition does not stop fine-grained recovery.
  A pass reconciles active jobs only: a finished job whose final report central has
  acknowledged is retired to a tombstone (``JobBook``), so a pass costs what the agent
  runs now, not everything it ever ran. A pass the cluster refused an operation of is
  tried again after a back-off (``PassReport.wake_at``) or on the next watch event,
  never at once: a refusal that lasts must not spin the agent.
- **Status** is reported whenever a job's phase, message or pods change, with the
  recovery actions taken; everything is re-reported on each new stream and periodically,
  so a report lost with a broken stream (or a database blip at central) is repaired.
  Reports stay inside central's bounds (``wire.limits.check_status``): free text is
  clipped to ``max_string_chars`` and more than ``STATUS_MAX_EVENTS`` actions (a long
  partition piles them up) go first in events-only reports (phase unspecified, so a
  final phase never lands before the events that led to it). Central answers a refused
  report with ``Ack{what: "status-rejected"}``; every rejection is logged, whatever its kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from agents.backend import ClusterBackend
from agents.core.apply import apply_ops
from agents.core.controller import PassReport
from agents.core.recovery import Action
from agents.metrics import NO_AGENT_METRICS, AgentMetrics
from agents.runtime_jobs import JobBook, JobSlot, labelled_pods, orphan_ops, signature
from agents.runtime_snapshots import encode_snapshot
from agents.telemetry import watch_reconnected
from federation.domain.states import WARNING_EVENT
from federation.domain.topology import HyperNodeTree
from federation.domain.works import Work
from federation.logs import fields
from federation.v1 import agent_pb2, agent_pb2_grpc, types_pb2
from federation.wire.convert import timestamp_to_proto, work_from_proto, work_phase_to_proto
from federation.wire.limits import DEFAULT_LIMITS, STATUS_MAX_EVENTS

log = logging.getLogger(__name__)

EOF: Any = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from grpc-stubs
# Watch events handled between two turns of the loop (each only sets two flags).
WATCH_BATCH = 256


class Fenced(Exception):
    """Central refused this agent's epoch: a newer leader acts for the cluster."""

    def __init__(self, reason: str, current_epoch: int) -> None:
        self.reason = reason
        self.current_epoch = current_epoch
        super().__init__(f"fenced: {reason} (current epoch {current_epoch})")


@dataclass(frozen=True)
class RuntimeConfig:
    cluster: str
    server: str
    agent_id: str = ""
    token: str | None = None
    credentials: grpc.ChannelCredentials | None = None
    heartbeat_seconds: float = 5.0
    snapshot_debounce_seconds: float = 0.5
    snapshot_period_seconds: float = 30.0
    resync_seconds: float = 5.0
    status_period_seconds: float = 30.0
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 30.0
    label_keys: tuple[str, ...] = ()
    cluster_labels: Mapping[str, str] = field(default_factory=dict)


def backoff_delay(attempt: int, initial: float, cap: float, rng: random.Random) -> float:
    """Equal-jitter exponential backoff: uniform in [d/2, d], d = min(cap, initial * 2**attempt)."""
    d = min(cap, initial * 2 ** min(attempt, 30))
    return rng.uniform(d / 2, d)


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` passes; True when it was set.

    ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for(event.wait(), t)``
    swallows a cancellation that arrives in the same loop iteration as the event is set
    (the inner wait completes, wait_for returns its result), so a cancelled loop task would
    carry on and never stop.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


def _index(pod_name: str) -> int:
    tail = pod_name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _clip(text: str) -> str:
    """Free text as central accepts it: a pod's message or a reason naming thousands of pods
    must not get the whole report (and the phase change it carries) refused."""
    limit = DEFAULT_LIMITS.max_string_chars
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _events(actions: list[Action]) -> list[agent_pb2.WorkEvent]:
    return [agent_pb2.WorkEvent(action=a.kind, reason=_clip(a.cause), task=a.task,
                                index=_index(a.pods[0]) if len(a.pods) == 1 else -1,
                                time=timestamp_to_proto(a.record.at)) for a in actions]


def snapshot_key(msg: types_pb2.ClusterSnapshot) -> bytes:
    """What must change for a snapshot to be sent before its period is up: everything but
    the time it was taken. Runs in a worker thread (a copy and an encoding of the whole
    cluster)."""
    stamp = types_pb2.ClusterSnapshot()
    stamp.CopyFrom(msg)
    stamp.ClearField("taken_at")
    return stamp.SerializeToString(deterministic=True)


def _chunks(actions: list[Action]) -> list[list[Action]]:
    """The actions in runs of at most ``STATUS_MAX_EVENTS`` (central's bound per report);
    one empty run when there are none."""
    return [actions[i:i + STATUS_MAX_EVENTS] for i in range(0, len(actions), STATUS_MAX_EVENTS)] or [[]]


class AgentRuntime:
    """Runs until ``stop()`` (returns) or a Fence (raises ``Fenced``)."""

    def __init__(self, backend: ClusterBackend, config: RuntimeConfig, *, clock: Callable[[], float] = time.time,
                 epoch: int | None = None, rng: random.Random | None = None,
                 metrics: AgentMetrics = NO_AGENT_METRICS) -> None:
        self.backend = backend
        self.config = config
        self.clock = clock
        self.epoch = epoch if epoch is not None else time.time_ns()
        self.agent_id = config.agent_id or f"{socket.gethostname()}-{os.getpid()}-{self.epoch}"
        self.jobs = JobBook(config.label_keys)
        self.metrics = metrics
        self.connected = asyncio.Event()
        self.syncs = 0
        self.passes = 0
        self._rng = rng or random.Random()
        self._lock = asyncio.Lock()
        self._dirty = asyncio.Event()
        self._snapshot_dirty = asyncio.Event()
        self._stopping = asyncio.Event()
        self._out: asyncio.Queue[agent_pb2.AgentMessage] | None = None
        self._tree: HyperNodeTree | None = None
        self._synced = False
        self._last_full_report = 0.0
        self._wake_at: float | None = None

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        background = [asyncio.create_task(self._reconciler(), name="agent-reconcile"),
                      asyncio.create_task(self._watcher(), name="agent-watch")]
        attempt = 0
        try:
            while not self._stopping.is_set():
                try:
                    accepted = await self._session()
                except grpc.aio.AioRpcError as exc:
                    accepted = False
                    log.warning("agent %s: stream to %s failed: %s %s", self.config.cluster, self.config.server,
                                exc.code().name, exc.details())
                attempt = 0 if accepted else attempt + 1
                delay = backoff_delay(attempt, self.config.backoff_initial_seconds,
                                      self.config.backoff_max_seconds, self._rng)
                await wait_event(self._stopping, delay)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)

    # ------------------------------------------------------------------ one stream
    def _channel(self) -> grpc.aio.Channel:
        """A fresh channel per stream with its own subchannel pool: gRPC's global pool would
        carry a failed connection's internal backoff (up to minutes) over to the new
        channel, so an agent could not reconnect for long after central came back. Our
        own backoff (with jitter) is the only one that applies."""
        cap_ms = int(self.config.backoff_max_seconds * 1000)
        options = [("grpc.use_local_subchannel_pool", 1),
                   ("grpc.initial_reconnect_backoff_ms", min(1000, cap_ms)),
                   ("grpc.max_reconnect_backoff_ms", cap_ms),
                   ("grpc.keepalive_time_ms", 20_000),
                   ("grpc.keepalive_timeout_ms", 10_000)]
        if self.config.credentials is not None:
            return grpc.aio.secure_channel(self.config.server, self.config.credentials, options=options)
        return grpc.aio.insecure_channel(self.config.server, options=options)

    async def _session(self) -> bool:
        """One stream, until it ends; True when the hello was accepted."""
        metadata = (("authorization", f"Bearer {self.config.token}"),) if self.config.token else None
        async with self._channel() as channel:
            call: Any = agent_pb2_grpc.AgentServiceStub(channel).Connect(metadata=metadata)  # type: ignore[call-arg]  # grpc-stubs omit metadata=
            stop_wait = asyncio.create_task(self._stopping.wait())
            try:
                await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(
                    cluster=self.config.cluster, agent_id=self.agent_id, epoch=self.epoch)))
                first = await call.read()
                if first is EOF:
                    return False
                self._check_fence(first)
                if first.WhichOneof("body") != "ack" or first.ack.what != "hello":
                    log.warning("agent %s: expected the hello ack, got %s", self.config.cluster, first)
                    return False
                if not await self._sync(call):
                    return True
                tasks = [asyncio.create_task(coro) for coro in
                         (self._writer(call), self._heartbeats(), self._snapshots())]
                reader = asyncio.create_task(self._reader(call))
                try:
                    await asyncio.wait([reader, stop_wait, *tasks], return_when=asyncio.FIRST_COMPLETED)
                    if reader.done():
                        reader.result()  # re-raise Fenced / stream errors
                    for task in tasks:
                        error = task.exception() if task.done() and not task.cancelled() else None
                        if error is not None:
                            raise error
                finally:
                    for task in (reader, *tasks):
                        task.cancel()
                    await asyncio.gather(reader, *tasks, return_exceptions=True)
                return True
            finally:
                stop_wait.cancel()
                self._out = None
                self.connected.clear()
                self.metrics.connected(False)
                call.cancel()

    def _check_fence(self, msg: agent_pb2.CentralMessage) -> None:
        if msg.WhichOneof("body") == "fence":
            self._stopping.set()  # stop acting at once
            log.error("agent %s fenced: %s", self.config.cluster, msg.fence.reason)
            raise Fenced(msg.fence.reason, msg.fence.current_epoch)

    async def _sync(self, call: Any) -> bool:
        """Read the desired set up to ``Ack{sync}`` and withdraw everything else."""
        works: list[Work] = []
        while True:
            msg = await call.read()
            if msg is EOF:
                return False
            self._check_fence(msg)
            kind = msg.WhichOneof("body")
            if kind == "work":
                work = self._to_work(msg.work)
                if work is not None:
                    works.append(work)
            elif kind == "ack" and msg.ack.what == "sync":
                break
        async with self._lock:
            self.jobs.sync(works)  # re-reports everything on the new stream
            self._synced = True
            self._out = asyncio.Queue()
            self.syncs += 1
        log.info("agent %s synced: %d work(s) desired", self.config.cluster, len(works))
        self.connected.set()
        self.metrics.connected(True)
        self._dirty.set()
        self._snapshot_dirty.set()
        return True

    async def _reader(self, call: Any) -> None:
        while True:
            msg = await call.read()
            if msg is EOF:
                return
            self._check_fence(msg)
            kind = msg.WhichOneof("body")
            if kind == "work":
                work = self._to_work(msg.work)
                if work is not None:
                    async with self._lock:
                        if not self.jobs.accept(work):
                            log.debug("agent %s: stale work %s v%d ignored", self.config.cluster, work.name,
                                      work.version)
                    self._dirty.set()
            elif kind == "cancel":
                async with self._lock:
                    self.jobs.cancel(msg.cancel.job, msg.cancel.version)
                self._dirty.set()
            elif kind == "ack" and msg.ack.what == "status":
                async with self._lock:  # a finished job's last report applied: it leaves the active set
                    self.jobs.acked(msg.ack.id.rpartition("@")[0])
            elif kind == "ack" and msg.ack.what == "snapshot-rejected":
                log.warning("agent %s: central rejected the snapshot: %s", self.config.cluster, msg.ack.id)
            elif kind == "ack" and msg.ack.HasField("rejection"):
                self._rejected(msg.ack)
            elif kind != "ack" or msg.ack.what not in ("hello", "sync", "snapshot"):
                log.info("agent %s: ignored a message this agent does not know: %s %s", self.config.cluster, kind,
                         msg.ack.what if kind == "ack" else "")

    def _rejected(self, ack: agent_pb2.Ack) -> None:
        """Central refused something this agent sent (``status-rejected``, or a kind newer
        than this agent): logged with the field and rule; nothing else changes, since the
        same message would be refused again. A refused report is not counted as applied,
        so its job is not retired on its account."""
        refused = ack.rejection
        what = "a status report for " + ack.id if ack.what == "status-rejected" else f"a message ({ack.what})"
        log.warning("agent %s: central rejected %s: %s: %s", self.config.cluster, what, refused.field_path,
                    refused.rule)

    def _to_work(self, msg: agent_pb2.Work) -> Work | None:
        try:
            work = work_from_proto(msg)
        except ValueError as exc:
            log.error("agent %s: invalid work %s: %s", self.config.cluster, msg.work_id, exc)
            return None
        if work.cluster and work.cluster != self.config.cluster:
            log.error("agent %s: work %s is for cluster %s; ignored", self.config.cluster, msg.work_id, work.cluster)
            return None
        return work

    async def _writer(self, call: Any) -> None:
        out = self._out
        assert out is not None
        while True:
            await call.write(await out.get())

    def _send(self, msg: agent_pb2.AgentMessage) -> bool:
        if self._out is None:
            return False
        self._out.put_nowait(msg)
        return True

    async def _heartbeats(self) -> None:
        while True:
            self._send(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(time=timestamp_to_proto(self.clock()))))
            await asyncio.sleep(self.config.heartbeat_seconds)

    # ------------------------------------------------------------------ snapshots
    async def _snapshots(self) -> None:
        last: bytes | None = None
        last_at = float("-inf")
        while True:
            wait = max(0.0, self.config.snapshot_period_seconds - (time.monotonic() - last_at))
            await wait_event(self._snapshot_dirty, wait)
            await asyncio.sleep(self.config.snapshot_debounce_seconds)
            self._snapshot_dirty.clear()
            taken = await self._snapshot()
            if taken is None:
                continue
            msg, key = taken
            due = key != last or time.monotonic() - last_at >= self.config.snapshot_period_seconds
            if due and self._send(agent_pb2.AgentMessage(snapshot=msg)):
                last, last_at = key, time.monotonic()

    async def _snapshot(self) -> tuple[types_pb2.ClusterSnapshot, bytes] | None:
        """The snapshot to send and its key (``snapshot_key``); None when the HyperNode
        objects cannot be read. Built from the view the passes share, and built and
        encoded off the event loop: at 20,000 nodes that is over a second of CPU, which
        on the loop would hold up the Lease renewals (docs/design/agent.md)."""
        async with self._lock:  # after any bind this pass reported, never in the middle of one
            now = self.clock()
            view = await self.jobs.views.get(self.backend, self.config.label_keys)  # the last pass's, if current
        msg, tree = await encode_snapshot(view, self.backend.cluster, now=now, labels=self.config.cluster_labels)
        if tree is not None:
            self._tree = tree
        if msg is None:
            return None
        return msg, await asyncio.to_thread(snapshot_key, msg)

    # ------------------------------------------------------------------ reconciling
    async def _watcher(self) -> None:
        while True:
            try:
                seen = 0
                async for _event in self.backend.watch():
                    self._dirty.set()
                    self._snapshot_dirty.set()
                    seen += 1
                    if seen % WATCH_BATCH == 0:  # a queued burst (a relist's 100,000 ADDED) never suspends
                        await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken watch is re-opened; passes are periodic anyway
                log.warning("agent %s: watch failed (%s); re-opening", self.config.cluster, exc)
                watch_reconnected("stream")
            await asyncio.sleep(1.0)

    async def _reconciler(self) -> None:
        while True:
            timeout = self.config.resync_seconds
            if self._wake_at is not None:  # a delayed restart action falls due
                timeout = max(0.0, min(timeout, self._wake_at - self.clock()))
            await wait_event(self._dirty, timeout)
            self._dirty.clear()
            async with self._lock:
                await self._pass()

    async def _pass(self) -> None:
        now = self.clock()
        self.passes += 1
        if time.monotonic() - self._last_full_report >= self.config.status_period_seconds:
            self._last_full_report = time.monotonic()
            for slot in self.jobs.slots.values():
                slot.reported = None
        # One view of the cluster for all the jobs (agents/core/view.py): a change made by
        # others during the pass may show a little late; it also set _dirty, so another
        # pass follows.
        with self.jobs.views.one_pass(self.backend):
            wake: float | None = None
            for slot in list(self.jobs.slots.values()):  # active jobs only: finished ones were retired
                try:
                    report = await slot.controller.sync(self.backend, now, self._tree)
                except Exception:
                    log.exception("agent %s: pass for %s failed", self.config.cluster, slot.work.name,
                                  extra=fields(job=slot.work.name, queue=slot.work.job.queue, work=slot.work.work_id))
                    continue
                if report.error:  # retried at report.wake_at (backing off), or sooner on a watch event
                    log.warning("agent %s: %s", self.config.cluster, report.error,
                                extra=fields(job=slot.work.name, queue=slot.work.job.queue, work=slot.work.work_id))
                if report.wake_at is not None:
                    wake = report.wake_at if wake is None else min(wake, report.wake_at)
                self._report(slot, report)
                await asyncio.sleep(0)  # let the loop turn between jobs (Lease renewals, heartbeats, informers)
            self._wake_at = wake
            if self._synced:
                keep = self.jobs.keep()
                view = await self.jobs.views.get(self.backend, self.config.label_keys)
                ops = orphan_ops(labelled_pods(view, keep), await self.backend.list_services({}),
                                 await self.backend.list_config_maps({}), keep,
                                 await self.backend.list_network_policies({}))
                if ops:
                    log.info("agent %s: withdrawing %d orphaned object(s)", self.config.cluster, len(ops))
                    await apply_ops(self.backend, ops)

    def _report(self, slot: JobSlot, report: PassReport) -> None:
        work = slot.work
        slot.unsent.extend(report.actions)
        self.metrics.actions(a.kind for a in report.actions if a.kind != WARNING_EVENT)  # restarts only
        phase_name, message = slot.outcome(report)
        key = (*signature(report), phase_name, message)
        if not slot.unsent and key == slot.reported:
            return
        *earlier, last = _chunks(slot.unsent)
        reports = [agent_pb2.WorkStatus(work_id=work.work_id, job=work.name, version=work.version,
                                        generation=report.generation, time=timestamp_to_proto(self.clock()),
                                        events=_events(chunk)) for chunk in earlier]
        reports.append(agent_pb2.WorkStatus(
            work_id=work.work_id, job=work.name, version=work.version, generation=report.generation,
            phase=work_phase_to_proto(phase_name),
            message=_clip(message), time=timestamp_to_proto(self.clock()),
            pods=[agent_pb2.PodStatus(task=p.task, index=p.index, node=p.node or "", phase=p.phase,
                                      restarts=p.restarts, message=_clip(p.message or p.reason)) for p in report.pods],
            events=_events(last),
        ))
        sent = sum(self._send(agent_pb2.AgentMessage(status=status)) for status in reports)  # all or none
        if sent:
            slot.reported = key
            slot.unsent.clear()
            slot.sent += sent
            slot.final = slot.is_final(phase_name, message)
