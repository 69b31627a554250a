"""Topology intent: how long a gang may be held back for a lower tier than it asked for.

Volcano's ``networkTopology`` says what a gang *requires*: hard mode, any single HyperNode
of tier <= ``highestTierAllowed``; soft mode, best effort, run as soon as possible at the
best tier available; no ``networkTopology``, no constraint at all
(volcano-sh/volcano ``docs/design/network-topology-aware-scheduling.md``). Holding a gang
back for a *lower* tier than that is a legitimate trade (Slurm's ``--switches=N@max-time``)
but it belongs to whoever submits the job or owns its queue, not to a silent service
default; so the wait is opt-in and resolved here, in one place, for the planner and for
``fedctl explain`` alike (docs/design/topology-intent.md).

Precedence: the job's annotation ``federation.io/topology-wait`` (any gang of two or more
pods, with or without ``networkTopology``: the submitter asked for it), then the queue's
default, then the service's ``--topology-wait``; the last two apply only to gangs that
carry a ``networkTopology`` (a job without one asked for no topology at all).
"""

from __future__ import annotations

from dataclasses import dataclass

from federation.domain.jobs import Job
from federation.domain.queues import Queue

WAIT_ANNOTATION = "federation.io/topology-wait"


@dataclass(frozen=True)
class TopologyWait:
    """The wait that applies to one job and where it came from."""

    seconds: float
    source: str  # "job" | "queue" | "service" | "none"
    why: str     # one sentence for ``fedctl explain``

    def describe(self) -> str:
        if self.seconds <= 0:
            return f"no topology wait: {self.why}"
        return f"topology wait {_duration(self.seconds)} ({self.why})"


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def topology_wait(job: Job, queue: Queue | None, service_seconds: float) -> TopologyWait:
    """The topology wait of ``job`` (see the module docstring for the precedence)."""
    source, seconds = _source(job, queue, service_seconds)
    if source == "single":
        return TopologyWait(seconds, "none", "a single pod always runs inside one node")
    if source == "job":
        return TopologyWait(seconds, "job", f"from the job's annotation {WAIT_ANNOTATION}")
    if source == "no-topology":
        return TopologyWait(seconds, "none", "the job has no networkTopology, so no tier is held out for")
    if source == "queue" and queue is not None:
        return TopologyWait(seconds, "queue", f"the default of queue {queue.name}")
    if source == "service":
        return TopologyWait(seconds, "service", "the service default --topology-wait")
    hard = job.network_topology is not None and job.network_topology.hard
    mode = "hard: any domain of tier <= its limit, at once" if hard else "soft: the best tier available now"
    return TopologyWait(seconds, "none", f"Volcano semantics, {mode}")


def wait_seconds(job: Job, queue: Queue | None, service_seconds: float) -> float:
    """``topology_wait(...).seconds`` without its explanation: the planner asks it for every
    pending gang each round (10,000 explanations built and dropped took ~30 ms a re-plan)."""
    return _source(job, queue, service_seconds)[1]


def _source(job: Job, queue: Queue | None, service_seconds: float) -> tuple[str, float]:
    """Where the wait comes from and how long it is: the precedence of the module docstring
    in one place."""
    if job.gang_size <= 1:
        return "single", 0.0
    if job.topology_wait_seconds is not None:
        return "job", job.topology_wait_seconds
    if job.network_topology is None:
        return "no-topology", 0.0
    if queue is not None and queue.topology_wait_seconds is not None:
        return "queue", queue.topology_wait_seconds
    if service_seconds > 0:
        return "service", service_seconds
    return "volcano", 0.0
