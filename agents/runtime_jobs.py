"""The runtime's memory of each job and what it reports, around ``JobController``.

``agents.core.controller.JobController`` runs one pass for one Work (recovery, then
reconcile, all pure decisions underneath). What the runtime adds per job is protocol
memory the controller does not need:

- **version rules at equal versions**: a Cancel wins over a replay of the Work it
  cancels (the controller would accept the replay and resurrect the job);
- **a sticky Replan**: once the agent has said it cannot honour the placement, it keeps
  saying so until central withdraws or replaces the Work, so the request survives a
  report lost with a broken stream;
- **report de-duplication**: a status is sent when phase, message or pod phases change
  or recovery acted, and again on every new stream;
- **orphan clean-up** after a sync: objects labelled with a job outside the desired set
  are removed, so nothing a previous leader or an earlier Work created is left behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agents.core.controller import JobController, PassReport
from agents.core.operations import DeleteConfigMap, DeletePod, DeleteService, Op
from agents.core.reconcile import W_CANCELLED, W_REPLAN
from agents.core.records import LABEL_JOB, ConfigMapManifest, PodRecord, ServiceManifest
from agents.core.recovery import Action
from agents.core.works import Work


def signature(report: PassReport) -> tuple[object, ...]:
    """What must change for a new status report to be worth sending."""
    pods = tuple((p.task, p.index, p.node or "", p.phase, p.restarts) for p in report.pods)
    return (report.version, report.phase, report.message, pods)


@dataclass
class JobSlot:
    controller: JobController
    replan: str = ""  # the Replan message, repeated until the Work changes
    reported: tuple[object, ...] | None = None  # signature of the last status sent
    unsent: list[Action] = field(default_factory=list)  # recovery actions not yet reported
    done: bool = False  # cancelled, fully withdrawn and reported

    @property
    def work(self) -> Work:
        return self.controller.work

    def accept(self, work: Work) -> bool:
        """Take a newer Work or a cancel; False for a stale or duplicate one."""
        held = self.work
        if work.version < held.version or (work.version == held.version and (held.cancelled or not work.cancelled)):
            return False
        if not self.controller.update(work):
            return False
        self.replan, self.reported, self.done = "", None, False
        return True

    def outcome(self, report: PassReport) -> tuple[str, str]:
        """The phase and message to report for this pass (sticky Replan applied)."""
        if report.phase == W_REPLAN and not self.work.cancelled:
            self.replan = report.message or "the gang cannot be bound inside its HyperNode"
        if self.replan and not self.work.cancelled:
            return W_REPLAN, self.replan
        return report.phase, report.message

    def finished(self, report: PassReport) -> bool:
        """A cancelled Work whose objects are all gone."""
        return self.work.cancelled and report.phase == W_CANCELLED and report.message == "withdrawn"


def orphan_ops(pods: Sequence[PodRecord], services: Sequence[ServiceManifest],
               config_maps: Sequence[ConfigMapManifest], keep: set[str]) -> tuple[Op, ...]:
    """Deletions for objects labelled with a job that is in no desired set."""
    ops: list[Op] = []
    for pod in pods:
        job = pod.labels.get(LABEL_JOB)
        if job and job not in keep and not pod.deleting:
            ops.append(DeletePod(pod.namespace, pod.name, "job not in the desired set"))
    for svc in services:
        job = svc.labels.get(LABEL_JOB)
        if job and job not in keep:
            ops.append(DeleteService(svc.namespace, svc.name))
    for cm in config_maps:
        job = cm.labels.get(LABEL_JOB)
        if job and job not in keep:
            ops.append(DeleteConfigMap(cm.namespace, cm.name))
    return tuple(ops)
