"""List-then-watch cache of one resource kind (a small client-go informer).

Why a cache: the agent re-reads the cluster on every reconcile pass and for every
snapshot; serving those reads from memory costs nothing, while listing every pod of a
large cluster per pass would load the apiserver. The watch keeps the cache current:

1. **List** (paged) gives the items and a resourceVersion.
2. **Watch** from that resourceVersion with ``allowWatchBookmarks``; every event and
   bookmark advances the resourceVersion. When the server ends the stream (its
   ``timeoutSeconds``), the watch is reopened from the last resourceVersion.
3. **410 Gone** (resourceVersion compacted, also caused by other clusters' writes on a
   shared etcd) and repeated failures **relist**; the difference between the old and the
   new list is emitted as events, so nothing that changed meanwhile goes unnoticed.

Our own writes go through the cache too (``upsert``/``update``/``remove``), ordered
against watch events by resourceVersion, so a reconcile pass that runs right after a
create sees the pod it created (read-your-writes) instead of creating it again.
A late write-through never resurrects an object the cache no longer holds: not when a
deletion left a tombstone at or after its version, not when the last list (which
clears tombstones) was taken at or after it, and not when the answer carries no
resourceVersion at all and the object was deleted since the cache last held it. The last
case is real: kube-apiserver can answer the DELETE of a Failed pod with the pod and no
resourceVersion after the watch has already delivered its DELETED event; resurrecting
it left a gang waiting forever for a name that was already free.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, Self, TypeVar

import aiohttp

from agents.k8s.api import REQUEST_TIMEOUT, ApiError, Gone, call, stream
from agents.k8s.convert import key_of, resource_version
from agents.telemetry import watch_reconnected
from federation.domain.errors import InvalidInput

log = logging.getLogger(__name__)

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)
Key = tuple[str, str]
JSON = dict[str, Any]
# (event type, key, record after the change or before it for DELETED)
Notify = Callable[[str, Key, Any], None]

LIST_PAGE = 500
WATCH_SECONDS = 300
MAX_BACKOFF = 30.0
_TOMBSTONES = 4096
# Objects converted between two turns of the event loop during a list or a burst of watch
# events: 64 pods or 64 nodes with 100 labels each are 2 to 3 ms of CPU.
CONVERT_BATCH = 64


class Index(Protocol[R_contra]):
    """Records of a cache arranged for a question the cache alone answers by a scan
    (agents/pod_index.py). The informer tells it every change of what ``records`` holds."""

    def put(self, key: Key, record: R_contra | None, /) -> None:
        """``record`` is now held under ``key`` (None: nothing, or an item's error)."""
        ...

    def fresh(self) -> Self:
        """An empty index of the same kind, filled while a list is converted."""
        ...

    def adopt(self, other: Self, /) -> None:
        """Hold what ``other`` holds, in one step, when the listed items replace the cache."""
        ...


class Informer(Generic[R]):
    """A cache of one kind. ``list_fn`` is a generated list method (e.g.
    ``CoreV1Api.list_pod_for_all_namespaces`` or a ``functools.partial`` of
    ``CustomObjectsApi.list_cluster_custom_object``); ``convert`` turns one JSON object
    into the record kept (an ``InvalidInput`` is kept as the item's error). ``index``, when
    given, is told of every change to the items, including a relist's (so it always holds
    what ``records`` yields)."""

    def __init__(
        self,
        kind: str,
        list_fn: Callable[..., Any],
        convert: Callable[[Mapping[str, Any]], R],
        notify: Notify,
        *,
        label_selector: str | None = None,
        watch_seconds: int = WATCH_SECONDS,
        missing_ok: bool = False,
        index: Index[R] | None = None,
    ) -> None:
        self.kind = kind
        self._index = index
        self._list_fn = list_fn
        self._convert = convert
        self._notify = notify
        self._selector = label_selector
        self._watch_seconds = watch_seconds
        self._missing_ok = missing_ok
        self._items: dict[Key, tuple[int, R | InvalidInput]] = {}
        self._tombstones: dict[Key, int] = {}
        self._listed_at = 0  # resourceVersion of the last list: anything older it lacks was deleted
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.error = ""  # the last list/watch failure, for status reporting
        # Counters the tests and the benchmark read.
        self.lists = 0
        self.relists_after_gone = 0
        self.bookmarks = 0
        self.events = 0

    # ------------------------------------------------------------------ reads
    def records(self) -> Iterator[R]:
        for _, value in self._items.values():
            if not isinstance(value, InvalidInput):
                yield value

    def errors(self) -> list[InvalidInput]:
        return [v for _, v in self._items.values() if isinstance(v, InvalidInput)]

    def get(self, key: Key) -> R | None:
        entry = self._items.get(key)
        if entry is None or isinstance(entry[1], InvalidInput):
            return None
        return entry[1]

    def __len__(self) -> int:
        return len(self._items)

    # ------------------------------------------------------------------ our own writes
    def upsert(self, obj: Mapping[str, Any]) -> None:
        """Apply an object the apiserver returned to one of our writes, unless the cache
        already holds a newer version or the object was deleted after that version."""
        self._apply("MODIFIED", obj)

    def update(self, key: Key, change: Callable[[R], R]) -> None:
        """Patch a cached record in place (e.g. ``node`` after a bind, which returns no
        object); the next watch event for the object replaces it with the truth."""
        entry = self._items.get(key)
        if entry is not None and not isinstance(entry[1], InvalidInput):
            record = change(entry[1])
            self._items[key] = (entry[0], record)
            self._indexed(key, record)
            self._notify("MODIFIED", key, record)

    def remove(self, key: Key, rv: str = "") -> None:
        """Drop an object we deleted (or found gone); a tombstone keeps late writes out."""
        meta = {"namespace": key[0], "name": key[1], "resourceVersion": rv}
        self._apply("DELETED", {"metadata": meta})

    # ------------------------------------------------------------------ events
    def _decode(self, obj: Mapping[str, Any]) -> R | InvalidInput:
        try:
            return self._convert(obj)
        except InvalidInput as exc:
            return exc

    def _apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        """A watch event, or one of our writes as ``upsert``/``remove`` pass it in."""
        key, rv = key_of(obj), resource_version(obj)
        log.debug("%s %s %s/%s at %s", self.kind, kind, *key, rv)
        if kind == "DELETED":
            old = self._items.pop(key, None)
            if old is not None:
                self._indexed(key, None)
            self._tombstones[key] = max(rv, self._tombstones.get(key, 0))
            if len(self._tombstones) > _TOMBSTONES:
                self._tombstones.pop(next(iter(self._tombstones)))
            if old is not None:
                self._notify("DELETED", key, old[1])
            return
        current = self._items.get(key)
        if current is not None and rv and current[0] > rv:
            log.debug("%s %s/%s at %s: stale, %s held", self.kind, *key, rv, current[0])
            return  # a stale event: we already hold a newer version
        if current is None and self._gone(key, rv):
            log.debug("%s %s/%s at %s: deleted since", self.kind, *key, rv or "no resourceVersion")
            return
        value = self._decode(obj)
        # An answer without a resourceVersion cannot be ordered: its content is kept under
        # the version held, so the next watch event still replaces it.
        self._items[key] = (rv or (current[0] if current is not None else 0), value)
        self._indexed(key, value)
        self._notify("MODIFIED" if current is not None else "ADDED", key, value)

    def _indexed(self, key: Key, value: R | InvalidInput | None) -> None:
        if self._index is not None:
            self._index.put(key, None if isinstance(value, InvalidInput) else value)

    def _gone(self, key: Key, rv: int) -> bool:
        """Whether an object the cache does not hold was deleted after version ``rv``
        (0: an answer without a resourceVersion, after any deletion of that name)."""
        if not rv:
            return key in self._tombstones
        return self._tombstones.get(key, 0) >= rv or rv <= self._listed_at

    # ------------------------------------------------------------------ list and watch
    async def relist(self) -> None:
        """List every page, converting each as it arrives, then replace the cache at once.

        Converting is the list's real cost (100,000 pods: about 5 s of CPU), so it yields
        to the loop every ``CONVERT_BATCH`` objects: the Lease renewals share the loop. A
        write-through that lands meanwhile goes to the cache being replaced, exactly as
        one that lands while a page is fetched: the list (or the watch from its version)
        holds the truth."""
        fresh: dict[Key, tuple[int, R | InvalidInput]] = {}
        index = self._index.fresh() if self._index is not None else None  # of ``fresh``, built beside it
        converted = 0
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": LIST_PAGE, "_preload_content": False,
                                      "_request_timeout": REQUEST_TIMEOUT}
            if self._selector:
                kwargs["label_selector"] = self._selector
            if token:
                kwargs["_continue"] = token
            page = await call(self._list_fn(**kwargs))
            for obj in page.get("items") or []:
                key, value = key_of(obj), self._decode(obj)
                fresh[key] = (resource_version(obj), value)
                if index is not None:
                    index.put(key, None if isinstance(value, InvalidInput) else value)
                converted += 1
                if converted % CONVERT_BATCH == 0:
                    await asyncio.sleep(0)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                break
        self.lists += 1
        old, self._items = self._items, fresh
        if self._index is not None and index is not None:
            self._index.adopt(index)
        self._tombstones.clear()
        self.resource_version = str(meta.get("resourceVersion") or "")
        self._listed_at = resource_version(page)
        for key, (_, value) in old.items():
            if key not in fresh:
                self._notify("DELETED", key, value)
        for key, (rv, value) in fresh.items():
            before = old.get(key)
            if before is None:
                self._notify("ADDED", key, value)
            elif before[0] != rv:
                self._notify("MODIFIED", key, value)
        self.synced.set()

    async def watch_once(self) -> None:
        """One watch request, until the server closes it."""
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": self.resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": self._watch_seconds,
            "_preload_content": False,
            "_request_timeout": aiohttp.ClientTimeout(sock_connect=10, sock_read=self._watch_seconds + 60),
        }
        if self._selector:
            kwargs["label_selector"] = self._selector
        # aclosing: a cancelled watch releases its connection now, not when collected.
        log.debug("%s watch: opened at %s", self.kind, self.resource_version)
        async with contextlib.aclosing(stream(self._list_fn(**kwargs))) as events:
            async for event in events:
                obj = event.get("object") or {}
                kind = str(event.get("type"))
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                if kind == "BOOKMARK":
                    self.bookmarks += 1
                elif kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.events += 1
                    self._apply(kind, obj)
                    if self.events % CONVERT_BATCH == 0:  # a burst already buffered never suspends
                        await asyncio.sleep(0)
                if rv:
                    self.resource_version = rv

    async def run(self) -> None:
        """List, then watch forever; relist on 410 and after repeated failures."""
        failures = 0
        while True:
            try:
                if not self.resource_version:
                    await self.relist()
                opened, seen = time.monotonic(), self.events + self.bookmarks
                await self.watch_once()
                failures = 0
                self.error = ""
                if time.monotonic() - opened < 1.0 and self.events + self.bookmarks == seen:
                    await asyncio.sleep(1.0)  # a server that closes watches at once is not hammered
            except Gone:
                self.relists_after_gone += 1
                watch_reconnected("expired")
                log.info("%s watch: resourceVersion %s expired (410); relisting", self.kind, self.resource_version)
                self.resource_version = ""
            except (ApiError, ValueError) as exc:  # ValueError: an undecodable answer
                if isinstance(exc, ApiError) and exc.status == 404 and self._missing_ok:
                    # The kind is not served (e.g. no HyperNode CRD): empty, look again later.
                    self.error = ""
                    if self._items:
                        self._items, old = {}, self._items
                        if self._index is not None:
                            self._index.adopt(self._index.fresh())
                        for key, (_, value) in old.items():
                            self._notify("DELETED", key, value)
                    self.resource_version = ""
                    self.synced.set()
                    await asyncio.sleep(MAX_BACKOFF)
                    continue
                failures += 1
                watch_reconnected("error")
                self.error = f"{self.kind} list/watch failed: {exc}"
                delay = min(MAX_BACKOFF, 0.2 * 2 ** failures) * (0.5 + random.random())
                log.warning("%s; retrying in %.1fs", self.error, delay)
                if failures >= 3:
                    self.resource_version = ""  # start over from a fresh list
                await asyncio.sleep(delay)
            except Exception:  # never die silently: a dead informer would freeze the cache
                log.exception("%s list/watch: unexpected failure; relisting", self.kind)
                watch_reconnected("error")
                self.error = f"{self.kind} list/watch failed unexpectedly"
                self.resource_version = ""
                await asyncio.sleep(MAX_BACKOFF / 10)
