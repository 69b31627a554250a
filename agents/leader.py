"""Leader election among agent replicas of one cluster, on a ``coordination.k8s.io/v1``
Lease, with optimistic concurrency (every write carries the resourceVersion it read).

Only the leader acts for its cluster. The rules (docs/design/leader-election.md):

- A candidate takes the Lease when it does not exist, has no holder (released), or has
  not changed for ``lease_duration`` seconds, measured on the candidate's *monotonic*
  clock from the poll *before* the one that first showed the current record (the record
  was written after that poll). No wall clocks are compared across machines.
- The leader renews every ``retry_period``. It stops acting as soon as a renewal
  conflicts (someone else took the Lease) or when ``renew_deadline`` has passed since
  the start of its last successful renewal. Because
  ``retry_period <= lease_duration - renew_deadline``, the old leader has stopped before
  any candidate can consider the Lease expired: two leaders never act at once.
- The epoch sent in ``Hello`` (docs/design/work-protocol.md) is the acquisition time in
  ns, written as the Lease's ``acquireTime`` (µs) and forced above the previous
  holder's, so a newer leader always has a larger epoch, even across clock skew.
- ``lead(leadership)`` runs as a task while leading and is cancelled the moment
  leadership is lost; ``GuardedBackend`` also refuses writes once ``valid()`` is false,
  so no write starts after the deadline even before the cancellation is delivered.
  When ``lead`` returns (e.g. fenced by central), the Lease is released and the replica
  campaigns again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agents.backend import BackendError, ClusterBackend
from agents.core.records import (
    ChangeEvent,
    ClaimManifest,
    ClaimRecord,
    ConfigMapManifest,
    NetworkPolicyManifest,
    NodeRecord,
    PodManifest,
    PodRecord,
    SecretManifest,
    ServiceManifest,
    StorageClassRecord,
    VolumeRecord,
    WorkloadManifest,
)
from agents.own_writes import PodChange
from federation.domain.topology import HyperNodeSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease's spec plus the resourceVersion it was read at (``version``)."""

    holder: str
    duration_seconds: float
    acquire_time_us: int = 0  # epoch microseconds (Lease MicroTime precision)
    renew_time_us: int = 0
    transitions: int = 0
    version: str = ""


class LeaseConflict(Exception):
    """Another writer changed the Lease since we read it (HTTP 409), or created it first."""


class LeaseStore(Protocol):
    """One Lease object (agents/k8s/lease.py on a cluster; a dict in unit tests)."""

    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Write ``record`` if the Lease is still at ``record.version``; else ``LeaseConflict``."""
        ...


@dataclass
class Leadership:
    """This replica's current term. ``valid()`` turns false at the renew deadline even
    if nothing has noticed yet; ``lost`` is set when the term is over."""

    identity: str
    epoch: int
    deadline: float  # monotonic time until which the term is certainly ours
    monotonic: Callable[[], float] = field(default=time.monotonic, repr=False)
    lost: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    reason: str = ""

    def valid(self) -> bool:
        return not self.lost.is_set() and self.monotonic() < self.deadline

    def end(self, reason: str) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()


Lead = Callable[[Leadership], Coroutine[Any, Any, None]]


class LeaderElector:
    """Campaign, lead, renew; see the module docstring for the rules."""

    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < renew_deadline < lease_duration:
            raise ValueError("need 0 < renew_deadline < lease_duration")
        if not 0 < retry_period <= lease_duration - renew_deadline:
            raise ValueError("need 0 < retry_period <= lease_duration - renew_deadline")
        self.store = store
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._monotonic = monotonic
        self._seen_version = ""
        self._seen_at = 0.0  # monotonic time from which the seen record may be aged
        self._last_poll: float | None = None
        self._record: LeaseRecord | None = None
        self._seen_holder = ""
        self.terms = 0  # how many times this replica became leader

    # ------------------------------------------------------------------ candidate
    async def try_acquire(self) -> Leadership | None:
        """One campaign step: the new term, or None (held by someone else, or we lost a race)."""
        started = self._monotonic()
        current = await self.store.get()
        read_at = self._monotonic()
        previous_poll, self._last_poll = self._last_poll, started
        now_us = int(self._clock() * 1_000_000)
        if current is not None and current.holder and current.holder != self.identity:
            if current.version != self._seen_version:
                if current.holder != self._seen_holder:
                    self._seen_holder = current.holder
                    log.info("%s: lease held by %s; standing by", self.identity, current.holder)
                # The record was written after our previous poll read the older one, and
                # before ``read_at``: age it from the later of the two safe bounds.
                self._seen_version = current.version
                slack = self.lease_duration - self.renew_deadline
                self._seen_at = max(previous_poll if previous_poll is not None else read_at, read_at - slack)
            if read_at < self._seen_at + max(self.lease_duration, current.duration_seconds):
                return None
            log.info("lease held by %s expired; taking over", current.holder)
        acquire_us = max(now_us, (current.acquire_time_us + 1) if current is not None else 0)
        changed = current is None or current.holder != self.identity
        record = LeaseRecord(
            holder=self.identity,
            duration_seconds=self.lease_duration,
            acquire_time_us=acquire_us,
            renew_time_us=now_us,
            transitions=(current.transitions + (1 if changed else 0)) if current is not None else 0,
            version=current.version if current is not None else "",
        )
        try:
            stored = await (self.store.update(record) if current is not None else self.store.create(record))
        except LeaseConflict:
            return None
        self._record = stored
        self._seen_version = self._seen_holder = ""
        self.terms += 1
        return Leadership(self.identity, acquire_us * 1000, started + self.renew_deadline, self._monotonic)

    # ------------------------------------------------------------------ leader
    async def _renew(self, term: Leadership) -> None:
        """Renew every retry period until a renewal conflicts or the deadline passes."""
        last = self._monotonic()
        while True:
            wake = min(last + self.retry_period, term.deadline)
            await asyncio.sleep(max(0.0, wake - self._monotonic()))
            started = self._monotonic()
            if started >= term.deadline:
                term.end("renew deadline passed")
                return
            last = started
            try:
                assert self._record is not None
                record = replace(self._record, renew_time_us=int(self._clock() * 1_000_000))
                async with asyncio.timeout(term.deadline - started):
                    self._record = await self.store.update(record)
            except LeaseConflict:
                current = await _quietly(self.store.get())
                holder = current.holder if current is not None else "nobody"
                term.end(f"lease taken over by {holder or 'nobody'}")
                return
            except Exception as exc:
                log.warning("lease renewal failed: %s", exc)
                continue
            term.deadline = started + self.renew_deadline

    async def release(self) -> None:
        """Give the Lease up now (graceful shutdown, or ``lead`` returned)."""
        record = self._record
        if record is None or record.holder != self.identity:
            return
        with contextlib.suppress(Exception):
            self._record = await self.store.update(replace(record, holder="", renew_time_us=int(self._clock() * 1e6)))

    async def run(self, lead: Lead, *, stop: asyncio.Event | None = None) -> None:
        """Campaign and lead until ``stop`` is set (or forever); each term runs ``lead``."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                term = await self.try_acquire()
            except Exception as exc:
                log.warning("leader election: %s", exc)
                term = None
            if term is None:
                await _sleep_or(stop, self._next_attempt())
                continue
            log.info("%s became leader (epoch %d)", self.identity, term.epoch)
            await self._lead(term, lead, stop)
            if not stop.is_set():
                await _sleep_or(stop, self.retry_period)

    def _next_attempt(self) -> float:
        """Poll every retry period, but wake exactly when the observed record expires."""
        if not self._seen_version:
            return self.retry_period
        expires_in = self._seen_at + self.lease_duration - self._monotonic()
        return max(0.05, min(self.retry_period, expires_in))

    async def _lead(self, term: Leadership, lead: Lead, stop: asyncio.Event) -> None:
        work = asyncio.create_task(lead(term), name=f"lead-{self.identity}")
        renew = asyncio.create_task(self._renew(term), name=f"renew-{self.identity}")
        stopping = asyncio.create_task(stop.wait())
        lost = asyncio.create_task(term.lost.wait())
        try:
            await asyncio.wait({work, lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            term.end(term.reason or ("stopping" if stop.is_set() else "lead returned"))
            for task in (work, renew, stopping, lost):
                task.cancel()
            for task in (work, renew, stopping, lost):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if work.done() and not work.cancelled() and work.exception() is not None:
                log.error("agent runtime failed: %s", work.exception())
            log.info("%s stopped leading: %s", self.identity, term.reason)
            if term.reason in ("stopping", "lead returned"):
                await self.release()


async def _quietly(coro: Awaitable[LeaseRecord | None]) -> LeaseRecord | None:
    try:
        return await coro
    except Exception:
        return None


async def _sleep_or(stop: asyncio.Event, seconds: float) -> None:
    # asyncio.timeout, not wait_for: on Python 3.11 wait_for(event.wait()) swallows a
    # cancellation that arrives as the event is set, and a cancelled elector must stop.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


class GuardedBackend:
    """A ``ClusterBackend`` that refuses every write once the term is over, so a replica
    that lost the Lease never touches the cluster, even before its task is cancelled."""

    def __init__(self, backend: ClusterBackend, term: Leadership) -> None:
        self._backend = backend
        self._term = term

    def _check(self) -> None:
        if not self._term.valid():
            raise BackendError(f"not the leader of cluster {self._backend.cluster} any more"
                               f"{': ' + self._term.reason if self._term.reason else ''}")

    @property
    def cluster(self) -> str:
        return self._backend.cluster

    @property
    def revision(self) -> int:
        return self._backend.revision

    @property
    def writes(self) -> int:
        return self._backend.writes

    def own_pod_writes(self, since: int, until: int) -> Sequence[PodChange] | None:
        return self._backend.own_pod_writes(since, until)

    async def list_nodes(self) -> list[NodeRecord]:
        return await self._backend.list_nodes()

    async def list_hypernodes(self) -> list[HyperNodeSpec]:
        return await self._backend.list_hypernodes()

    async def list_pods(self, selector: Mapping[str, str], *, ordered: bool = True) -> list[PodRecord]:
        return await self._backend.list_pods(selector, ordered=ordered)

    async def list_services(self, selector: Mapping[str, str]) -> list[ServiceManifest]:
        return await self._backend.list_services(selector)

    async def list_config_maps(self, selector: Mapping[str, str]) -> list[ConfigMapManifest]:
        return await self._backend.list_config_maps(selector)

    async def list_network_policies(self, selector: Mapping[str, str]) -> list[NetworkPolicyManifest]:
        return await self._backend.list_network_policies(selector)

    async def create_pod(self, manifest: PodManifest) -> PodRecord:
        self._check()
        return await self._backend.create_pod(manifest)

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        self._check()
        await self._backend.bind_pod(namespace, name, node)

    async def delete_pod(self, namespace: str, name: str) -> bool:
        self._check()
        return await self._backend.delete_pod(namespace, name)

    async def create_service(self, manifest: ServiceManifest) -> None:
        self._check()
        await self._backend.create_service(manifest)

    async def delete_service(self, namespace: str, name: str) -> bool:
        self._check()
        return await self._backend.delete_service(namespace, name)

    async def annotate_service(self, namespace: str, name: str, key: str, value: str) -> None:
        self._check()
        await self._backend.annotate_service(namespace, name, key, value)

    async def create_config_map(self, manifest: ConfigMapManifest) -> None:
        self._check()
        await self._backend.create_config_map(manifest)

    async def delete_config_map(self, namespace: str, name: str) -> bool:
        self._check()
        return await self._backend.delete_config_map(namespace, name)

    async def read_secret(self, namespace: str, name: str) -> SecretManifest | None:
        return await self._backend.read_secret(namespace, name)

    async def read_priority_class(self, name: str) -> int | None:
        return await self._backend.read_priority_class(name)

    async def create_priority_class(self, name: str, value: int, description: str) -> None:
        self._check()
        await self._backend.create_priority_class(name, value, description)

    async def create_secret(self, manifest: SecretManifest) -> None:
        self._check()
        await self._backend.create_secret(manifest)

    async def delete_secret(self, namespace: str, name: str) -> bool:
        self._check()
        return await self._backend.delete_secret(namespace, name)

    async def create_network_policy(self, manifest: NetworkPolicyManifest) -> None:
        self._check()
        await self._backend.create_network_policy(manifest)

    async def delete_network_policy(self, namespace: str, name: str) -> bool:
        self._check()
        return await self._backend.delete_network_policy(namespace, name)

    async def read_workload(self, kind: str, namespace: str, name: str) -> WorkloadManifest | None:
        return await self._backend.read_workload(kind, namespace, name)

    async def create_workload(self, manifest: WorkloadManifest) -> None:
        self._check()
        await self._backend.create_workload(manifest)

    async def delete_workload(self, kind: str, namespace: str, name: str) -> bool:
        self._check()
        return await self._backend.delete_workload(kind, namespace, name)

    async def read_claim(self, namespace: str, name: str) -> ClaimRecord | None:
        return await self._backend.read_claim(namespace, name)

    async def read_volume(self, name: str) -> VolumeRecord | None:
        return await self._backend.read_volume(name)

    async def read_storage_class(self, name: str) -> StorageClassRecord | None:
        return await self._backend.read_storage_class(name)

    async def create_claim(self, manifest: ClaimManifest) -> None:
        self._check()
        await self._backend.create_claim(manifest)

    async def delete_claim(self, namespace: str, name: str, job: str) -> bool:
        self._check()
        return await self._backend.delete_claim(namespace, name, job)

    async def select_claim_node(self, namespace: str, name: str, node: str, resource_version: str) -> None:
        self._check()
        await self._backend.select_claim_node(namespace, name, node, resource_version)

    def watch(self) -> AsyncIterator[ChangeEvent]:
        return self._backend.watch()
