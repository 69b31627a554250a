"""The agent's view of one Work: the job spec, its version and the placement to honour.

Mirrors ``federation.v1.Work`` (proto/federation/v1/agent.proto) after conversion to
domain types; the protocol (versions strictly increase per job, a cancel bumps the
version) is docs/design/work-protocol.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from federation.domain.jobs import Job
from federation.domain.plans import Placement


@dataclass(frozen=True)
class Work:
    work_id: str
    job: Job
    version: int
    placement: Placement
    cancelled: bool = False

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def cluster(self) -> str:
        return self.placement.cluster


def pod_name(job: str, task: str, index: int) -> str:
    """``<job>-<task>-<index>``: deterministic, so a pod can never be created twice."""
    return f"{job}-{task}-{index}"
