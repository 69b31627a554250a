"""Counters and histograms the service updates as it works; a no-op twin when metrics are off.

Why a null object rather than ``if metrics:`` everywhere: the hot paths (SubmitJob, the
round loop, the agent hub) call one method unconditionally, and ``federation serve``
without ``--metrics-listen`` pays one empty method call, which is what the submission
benchmark's "without metrics" column measures (docs/benchmarks.md).

Every update is a ``prometheus_client`` counter/histogram operation: a lock-protected
float add, no I/O, no allocation beyond the first use of a label set. Nothing here is
called while a store transaction or an asyncio lock of ours is held, except the round
phases, which are timed around (not inside) their awaits.

Label values are bounded sets fixed by our code (round phases, solver statuses, gRPC code
names), never user input such as job or queue names: a counter keyed by user input would
grow without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram

# Round phases, in the order a round runs them (docs/design/rounds.md).
PHASES = ("load", "repair", "plan", "audit", "dispatch")

# Rounds take from milliseconds (nothing to plan) to the CP-SAT time limit and beyond.
ROUND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Work creation -> sent to the agent: debounce + a round + one stream hop normally.
DISPATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# SubmitJob in the server and the event loop's lag: a millisecond to seconds, finely
# enough that the fan-out benchmark reads server-side p50/p99 from them (bench/fanout.py).
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
                   0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)
# How often the loop-lag probe (``watch_loop_lag``) asks the event loop for a turn.
LOOP_LAG_INTERVAL = 0.1


class ServiceMetrics:
    """The central service's instrumented metrics, registered in ``registry``."""

    enabled = True

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._round = Histogram(
            "federation_round_duration_seconds", "Wall time of each phase of a planning round.",
            ["phase"], buckets=ROUND_BUCKETS, registry=r)
        self._rounds = Counter(
            "federation_rounds", "Planning rounds recorded, by the solver's status.", ["solver_status"], registry=r)
        self._round_failures = Counter(
            "federation_round_failures", "Planning rounds that failed (nothing recorded; retried).", registry=r)
        self._submissions = Counter(
            "federation_submissions",
            "SubmitJob calls by outcome: created, existing (an idempotent resubmission), or the gRPC status "
            "code of the refusal in lower case.", ["outcome"], registry=r)
        self._dispatch = Histogram(
            "federation_work_dispatch_seconds",
            "Seconds from a Work's creation to its being sent on its cluster's agent stream.",
            buckets=DISPATCH_BUCKETS, registry=r)
        self._submit_seconds = Histogram(
            "federation_submit_duration_seconds",
            "Seconds SubmitJob spends in the server, from its handler's start to its answer (every outcome).",
            buckets=LATENCY_BUCKETS, registry=r)
        self._loop_lag = Histogram(
            "federation_event_loop_lag_seconds",
            f"How late the event loop runs a callback due now, probed every {LOOP_LAG_INTERVAL} s: what every "
            "RPC and agent message waits before the server starts on it.", buckets=LATENCY_BUCKETS, registry=r)
        self._pruned = Counter(
            "federation_audit_pruned", "Audit records deleted by --audit-retention, by record (rounds, decisions).",
            ["record"], registry=r)
        for record in ("rounds", "decisions"):
            self._pruned.labels(record)
        for phase in PHASES:  # every phase is exported from the start, at 0, so rate() has a base
            self._round.labels(phase)
        # The children SubmitJob increments, looked up once: ``labels()`` costs as much as the increment.
        self._outcomes = {outcome: self._submissions.labels(outcome) for outcome in ("created", "existing")}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase of a round (``PHASES``)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._round.labels(name).observe(time.perf_counter() - started)

    def round_recorded(self, solver_status: str) -> None:
        self._rounds.labels(solver_status or "UNKNOWN").inc()

    def round_failed(self) -> None:
        self._round_failures.inc()

    def submission(self, outcome: str, seconds: float) -> None:
        child = self._outcomes.get(outcome)
        (child if child is not None else self._submissions.labels(outcome)).inc()
        self._submit_seconds.observe(seconds)

    async def watch_loop_lag(self) -> None:
        """Probe the running loop's lag until cancelled (started by the server with metrics on)."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LOOP_LAG_INTERVAL
            await asyncio.sleep(LOOP_LAG_INTERVAL)
            self._loop_lag.observe(max(0.0, loop.time() - due))

    def work_dispatched(self, seconds: float) -> None:
        self._dispatch.observe(max(0.0, seconds))

    def audit_pruned(self, rounds: int, decisions: int) -> None:
        self._pruned.labels("rounds").inc(rounds)
        self._pruned.labels("decisions").inc(decisions)


class NoMetrics(ServiceMetrics):
    """Metrics off: every method does nothing (and nothing is registered)."""

    enabled = False

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        yield

    def round_recorded(self, solver_status: str) -> None:
        pass

    def round_failed(self) -> None:
        pass

    def submission(self, outcome: str, seconds: float) -> None:
        pass

    async def watch_loop_lag(self) -> None:
        return

    def work_dispatched(self, seconds: float) -> None:
        pass

    def audit_pruned(self, rounds: int, decisions: int) -> None:
        pass


NO_METRICS = NoMetrics()
