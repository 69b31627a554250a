"""One Work: what to run where — the job spec, its version and the placement to honour.

The one type from the planner's output to the agent: central builds it from a placed
job and its works row (``propagation.works.work_from_payload``), ``wire`` carries it as
``federation.v1.Work``, and the agent acts on the same type. The protocol (versions
strictly increase per job, a cancel bumps the version) is docs/design/work-protocol.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from federation.domain.jobs import Job
from federation.domain.plans import Placement


@dataclass(frozen=True)
class Work:
    """``cancelled``: the agent was told to withdraw it (a Cancel for this version)."""

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
