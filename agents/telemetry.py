"""Process-wide agent counters that the adapters bump and ``agents.metrics`` exports.

Why a plain counter here rather than a metric object passed down: the Kubernetes watches
that reconnect live deep in ``agents/k8s/informer.py`` (one informer per kind, created by
the backend, itself created per leader term), and ``agents/k8s`` must not import
``prometheus_client``. An informer bumps ``watch_reconnected(reason)``; the agent's metrics
read the counts when Prometheus scrapes. A ``collections.Counter`` update is one dict
operation under the GIL.

Reasons: ``expired`` — the apiserver answered 410 Gone (compacted resourceVersion) and the
informer relisted; ``error`` — a list/watch request failed and is retried; ``stream`` — the
runtime re-opened its change stream from the backend after it failed.
"""

from __future__ import annotations

from collections import Counter

WATCH_RECONNECT_REASONS = ("expired", "error", "stream")
WATCH_RECONNECTS: Counter[str] = Counter()


def watch_reconnected(reason: str) -> None:
    WATCH_RECONNECTS[reason] += 1
