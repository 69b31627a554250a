"""One Work: what to run where — the job spec, its version and the placement to honour.

The one type from the planner's output to the agent: central builds it from a placed
job and its works row (``propagation.works.work_from_payload``), ``wire`` carries it as
``federation.v1.Work``, and the agent acts on the same type. The protocol (versions
strictly increase per job, a cancel bumps the version) is docs/design/work-protocol.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.domain.jobs import Job
from federation.domain.plans import Placement, PodAssignment

# A reachable cluster's agent acknowledges a Work when it receives it (``applied``), well
# within a second; one that stays silent on a Work for this long while its cluster is not
# lost is broken for that job, and the job is re-planned rather than holding its room for
# ever. Ten minutes leave room for an agent's restart and a leader's hand-over.
DEFAULT_DISPATCH_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Work:
    """``cancelled``: the agent was told to withdraw it (a Cancel for this version).
    ``generation``: revision of this version's placement — a running elastic job that
    grows keeps its version and pods and gets the next generation, whose placement adds
    pods (docs/design/elastic-gangs.md)."""

    work_id: str
    job: Job
    version: int
    placement: Placement
    cancelled: bool = False
    generation: int = 0

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def cluster(self) -> str:
        return self.placement.cluster


def work_payload(placement: Placement) -> dict[str, Any]:
    """What the store keeps with a Work: the placement, JSON-friendly."""
    return {
        "cluster": placement.cluster,
        "hypernode": placement.hypernode,
        "tier": placement.tier,
        "pods": [[p.task, p.index, p.node] for p in placement.pods],
    }


def placement_from_payload(job: str, payload: Mapping[str, Any]) -> Placement:
    """The placement a Work carries (inverse of ``work_payload``)."""
    pods = tuple(PodAssignment(str(t), int(i), str(n)) for t, i, n in payload.get("pods", ()))
    return Placement(job=job, cluster=str(payload.get("cluster", "")), hypernode=str(payload.get("hypernode", "")),
                     tier=int(payload.get("tier", 0)), pods=pods)


def payload_generation(payload: Mapping[str, Any]) -> int:
    """The Work generation a payload is at (0 until its job first grows)."""
    return int(payload.get("generation", 0))


def grown_payload(payload: Mapping[str, Any], added: Sequence[PodAssignment]) -> dict[str, Any]:
    """``payload`` after a growth: the added pods appended (running pods untouched), held
    as ``growing`` until reported bound, and the next generation."""
    pods = [*payload.get("pods", ()), *([a.task, a.index, a.node] for a in added)]
    growing = [*payload.get("growing", ()), *([a.task, a.index, a.node] for a in added)]
    return {**payload, "pods": pods, "growing": growing, "generation": payload_generation(payload) + 1}
