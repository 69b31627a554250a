"""State gauges computed when Prometheus scrapes, not kept up to date by the hot paths.

Why at scrape time: job counts per queue and state change with every submission, status
report and round; updating gauges there would put metric work (and, for shares, a
water-filling pass) on the event loop for every change. A scrape every 15-30 s instead
costs two indexed GROUP BY queries (``store.stats``) and one pass over the last planning
input, in the exporter's own thread, never on the event loop.

Sources, and how fresh each is:

- ``federation_jobs`` and the cluster gauges read the store at scrape time (exact, and
  the same on every replica sharing the database);
- queue shares and pending-by-reason come from the last planning round's input and plan
  (``RoundScheduler.observed``): the planner's own view, so a dashboard shows what the
  planner weighed. Jobs submitted since (or beyond a bounded round's window) are counted
  as reason ``not_planned``;
- ``federation_agent_streams`` counts this process's open agent streams.

Only the leading replica exports the store- and round-derived families (jobs, pending by
reason, shares, clusters). Every replica shares the database, so a standby would export the
same job and cluster series again, and, never having run a round, call every pending job
``not_planned``: Prometheus scrapes every replica, so ``sum by`` queries would double-count
and a cluster-down alert would fire once per replica. A standby exports only what is its
own: ``federation_store_up`` (its connection, which it needs to take over) and
``federation_agent_streams``. The counters, histograms and process collectors are not this
collector's and stay on every replica too.

A store failure during a scrape is not a scrape failure: the store-backed families are
left out and ``federation_store_up`` is 0, which is itself worth an alert.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from federation.domain.plans import FederationSnapshot, Plan
from federation.domain.states import JOB_STATES, JobState
from federation.placement.ledger import QueueLedger
from federation.store.stats import ClusterGauge

log = logging.getLogger(__name__)

NOT_PLANNED = "not_planned"


class Stats(Protocol):
    """The two aggregate reads a scrape makes (``federation.store.stats.StatsRepository``)."""

    def job_counts(self) -> dict[tuple[str, str], int]: ...

    def clusters(self) -> list[ClusterGauge]: ...


@dataclass(frozen=True)
class Observed:
    """What the last planning round read and decided (both immutable)."""

    snapshot: FederationSnapshot
    plan: Plan


@dataclass(frozen=True)
class QueueShares:
    dominant: Mapping[str, float]
    fair: Mapping[str, float]


def queue_shares(snapshot: FederationSnapshot) -> QueueShares:
    """Dominant share of running usage and weighted DRF fair share per queue (the planner's ``QueueLedger``)."""
    ledger = QueueLedger(snapshot)
    return QueueShares({q: ledger.share(q) for q in ledger.queues}, dict(ledger.fair))


def pending_by_reason(observed: Observed | None, pending: Mapping[str, int]) -> dict[tuple[str, str], int]:
    """(queue, reason) -> pending jobs: the last round's unplaced jobs by blocking constraint;
    the rest of each queue's pending jobs (``pending``, from the store) as ``not_planned``."""
    out: Counter[tuple[str, str]] = Counter()
    if observed is not None:
        queue_of = {p.job.name: p.job.queue for p in observed.snapshot.pending}
        for u in observed.plan.unplaced:
            queue = queue_of.get(u.job)
            if queue is not None:
                out[(queue, u.constraint or "unknown")] += 1
    seen: Counter[str] = Counter()
    for (queue, _), n in out.items():
        seen[queue] += n
    for queue, n in pending.items():
        out[(queue, NOT_PLANNED)] = max(0, n - seen[queue])
    return dict(out)


class FederationCollector(Collector):
    """The scrape-time gauges of the central service (module doc)."""

    def __init__(self, stats: Stats, *, observed: Callable[[], Observed | None] = lambda: None,
                 streams: Callable[[], int] | None = None, leading: Callable[[], bool] = lambda: True) -> None:
        """``leading`` is the replica's leadership check (``Leadership.leading``): asked once
        per scrape, so one scrape is all leader or all standby (module doc)."""
        self._stats = stats
        self._leading = leading
        self._observed = observed
        self._streams = streams
        self._lock = threading.Lock()  # scrapes may run concurrently (threaded HTTP server)
        self._shares: tuple[FederationSnapshot, QueueShares] | None = None

    def describe(self) -> Iterable[Metric]:
        return []  # unchecked collector: its families depend on the data

    def _cached_shares(self, snapshot: FederationSnapshot) -> QueueShares:
        with self._lock:
            if self._shares is None or self._shares[0] is not snapshot:
                self._shares = (snapshot, queue_shares(snapshot))
            return self._shares[1]

    def collect(self) -> Iterable[Metric]:
        leading = self._leading()
        store_up = GaugeMetricFamily("federation_store_up", "1 when the last scrape could read the database.")
        try:
            counts = self._stats.job_counts()  # on a standby only the probe behind federation_store_up
            clusters = self._stats.clusters() if leading else []
        except Exception as exc:  # the scrape still answers; the alert is federation_store_up == 0
            log.warning("metrics: cannot read the store: %s", exc)
            store_up.add_metric([], 0)
            yield store_up
            counts = {}
        else:
            store_up.add_metric([], 1)
            yield store_up
            if leading:
                yield from self._jobs(counts)
                yield from self._clusters(clusters)
        observed = self._observed() if leading else None
        if leading and (counts or observed is not None):
            pending = {q: n for (q, s), n in counts.items() if s == JobState.PENDING}
            reasons = GaugeMetricFamily(
                "federation_pending_jobs",
                "Pending jobs by queue and the constraint that blocked them in the last round "
                f"({NOT_PLANNED}: not in the last round's plan).", labels=["queue", "reason"])
            for (queue, reason), n in sorted(pending_by_reason(observed, pending).items()):
                reasons.add_metric([queue, reason], n)
            yield reasons
        if observed is not None:
            yield from self._shares_families(self._cached_shares(observed.snapshot))
        if self._streams is not None:
            streams = GaugeMetricFamily("federation_agent_streams", "Agent streams open on this replica.")
            streams.add_metric([], self._streams())
            yield streams

    @staticmethod
    def _jobs(counts: Mapping[tuple[str, str], int]) -> Iterable[Metric]:
        jobs = GaugeMetricFamily("federation_jobs", "Jobs by queue and state.", labels=["queue", "state"])
        for queue in sorted({q for q, _ in counts}):
            for state in JOB_STATES:  # every state of a known queue, 0 included: series do not vanish
                jobs.add_metric([queue, state], counts.get((queue, state), 0))
        yield jobs

    @staticmethod
    def _clusters(clusters: Iterable[ClusterGauge]) -> Iterable[Metric]:
        up = GaugeMetricFamily("federation_cluster_up", "1 when the cluster's agent is connected in time and the "
                               "cluster reports healthy; 0 when lost or unhealthy.", labels=["cluster"])
        free = GaugeMetricFamily("federation_cluster_free_gpus", "GPUs free in the cluster's last snapshot.",
                                 labels=["cluster"])
        alloc = GaugeMetricFamily("federation_cluster_allocatable_gpus",
                                  "GPUs allocatable in the cluster's last snapshot.", labels=["cluster"])
        for c in clusters:
            up.add_metric([c.name], 1 if c.up else 0)
            if c.reporting:  # an unknown size is not zero
                free.add_metric([c.name], c.gpus_free)
                alloc.add_metric([c.name], c.gpus_allocatable)
        yield from (up, free, alloc)

    @staticmethod
    def _shares_families(shares: QueueShares) -> Iterable[Metric]:
        dominant = GaugeMetricFamily("federation_queue_dominant_share",
                                     "The queue's dominant resource share of the federation (0..1), as the last "
                                     "round read it.", labels=["queue"])
        fair = GaugeMetricFamily("federation_queue_fair_share",
                                 "The queue's weighted DRF fair share (0..1) in the last round.", labels=["queue"])
        for queue in sorted(shares.fair):
            dominant.add_metric([queue], shares.dominant.get(queue, 0.0))
            fair.add_metric([queue], shares.fair[queue])
        yield from (dominant, fair)
