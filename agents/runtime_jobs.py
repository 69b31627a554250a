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
  are removed, so nothing a previous leader or an earlier Work created is left behind;
- **finished jobs leave the active set** (``JobBook``): once a job's final report
  (Succeeded, Failed, or Cancelled with every object withdrawn) has been acknowledged by
  central, its slot is dropped and only a tombstone (job → version) remains, so stale
  replays of its Work are still ignored. Without this every pass reconciled every job the
  agent had ever run, and the agent's CPU grew with its history instead of its work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from agents.core.controller import JobController, PassReport
from agents.core.operations import (
    DeleteClaim,
    DeleteConfigMap,
    DeleteNetworkPolicy,
    DeletePod,
    DeleteSecret,
    DeleteService,
    DeleteWorkload,
    Op,
)
from agents.core.plugins import ssh_secret_name
from agents.core.records import (
    ANNOTATION_CLAIMS,
    LABEL_JOB,
    LABEL_TASK_INDEX,
    ConfigMapManifest,
    NetworkPolicyManifest,
    PodRecord,
    ServiceManifest,
)
from agents.core.recovery import Action
from agents.core.view import ClusterView, ClusterViews
from federation.domain.job_volumes import MAX_JOB_VOLUMES
from federation.domain.states import WorkPhase
from federation.domain.workloads import WORKLOAD_KINDS
from federation.domain.works import Work


def signature(report: PassReport) -> tuple[object, ...]:
    """What must change for a new status report to be worth sending."""
    pods = tuple((p.task, p.index, p.node or "", p.phase, p.restarts) for p in report.pods)
    return (report.version, report.generation, report.phase, report.message, pods)


@dataclass
class JobSlot:
    controller: JobController
    replan: str = ""  # the Replan message, repeated until the Work changes
    reported: tuple[object, ...] | None = None  # signature of the last status sent
    unsent: list[Action] = field(default_factory=list)  # recovery actions not yet reported
    sent: int = 0  # status reports sent on the current stream
    acked: int = 0  # of those, acknowledged by central (applied)
    final: bool = False  # the last report sent was final (see ``is_final``)
    ids: set[str] = field(default_factory=set)  # work ids of every version held (acks name them)

    @property
    def work(self) -> Work:
        return self.controller.work

    @property
    def retirable(self) -> bool:
        """Its final report was sent and central has applied every report sent since the
        stream opened: nothing is left to do or to say for this job."""
        return self.final and self.sent > 0 and self.acked >= self.sent

    def accept(self, work: Work) -> bool:
        """Take a newer Work or a cancel; False for a stale or duplicate one."""
        held = self.work
        if work.version < held.version:
            return False
        if work.version == held.version and (held.cancelled or (not work.cancelled
                                                                and work.generation <= held.generation)):
            return False  # a duplicate, or not a growth (a newer generation of this version)
        if not self.controller.update(work):
            return False
        self.replan, self.reported, self.final = "", None, False
        self.ids.add(work.work_id)
        return True

    def new_stream(self) -> None:
        """A new stream: re-report everything; acks of the old stream will never come."""
        self.reported, self.sent, self.acked = None, 0, 0

    def is_final(self, phase: WorkPhase, message: str) -> bool:
        """A report after which the job needs nothing more from this agent."""
        if self.work.cancelled:
            return phase == WorkPhase.CANCELLED and message == "withdrawn"
        return phase in (WorkPhase.SUCCEEDED, WorkPhase.FAILED)

    def outcome(self, report: PassReport) -> tuple[WorkPhase, str]:
        """The phase and message to report for this pass (sticky Replan applied)."""
        if report.phase == WorkPhase.REPLAN and not self.work.cancelled:
            self.replan = report.message or "the gang cannot be bound inside its HyperNode"
        if self.replan and not self.work.cancelled:
            return WorkPhase.REPLAN, self.replan
        return report.phase, report.message



@dataclass
class Tombstone:
    """What is left of a finished job: its last version (replays of it are stale) and
    whether its objects linger for inspection (a finished job keeps its terminal pods
    until a sync or a Cancel withdraws them; a cancelled one has none left)."""

    version: int
    linger: bool


class JobBook:
    """The runtime's jobs: active slots (reconciled every pass) and tombstones of finished ones."""

    def __init__(self, label_keys: Sequence[str] = ()) -> None:
        self.slots: dict[str, JobSlot] = {}
        self.tombstones: dict[str, Tombstone] = {}
        self._label_keys = tuple(label_keys)
        self.views = ClusterViews()  # one read of the cluster for all the jobs of a pass
        self._jobs_by_work: dict[str, str] = {}

    def accept(self, work: Work) -> bool:
        """Take a Work (or a cancel); False for a stale or duplicate one, also after the job finished."""
        tomb = self.tombstones.get(work.name)
        if tomb is not None:
            if work.version <= tomb.version:
                return False
            del self.tombstones[work.name]  # placed again after it finished here: a new life
        slot = self.slots.get(work.name)
        if slot is None:
            slot = self.slots[work.name] = JobSlot(JobController(work, label_keys=self._label_keys, views=self.views),
                                                      ids={work.work_id})
            self._jobs_by_work[work.work_id] = work.name
            return True
        if not slot.accept(work):
            return False
        self._jobs_by_work[work.work_id] = work.name
        return True

    def cancel(self, job: str, version: int) -> bool:
        """Central withdrew ``job``'s Work of ``version``."""
        slot = self.slots.get(job)
        if slot is not None:
            return version >= slot.work.version and slot.accept(replace(slot.work, version=version, cancelled=True))
        tomb = self.tombstones.get(job)
        if tomb is not None and version >= tomb.version and tomb.linger:
            tomb.linger = False  # its leftover objects are orphans now
            return True
        return False

    def sync(self, works: Sequence[Work]) -> None:
        """``works`` is the whole desired set of a new stream: everything else is withdrawn."""
        desired = {w.name for w in works}
        for work in works:
            self.accept(work)
        for name, slot in self.slots.items():
            if name not in desired and not slot.work.cancelled:
                slot.accept(replace(slot.work, cancelled=True))
            slot.new_stream()
        for name, tomb in self.tombstones.items():
            if name not in desired:
                tomb.linger = False

    def acked(self, work_id: str) -> bool:
        """Central applied a report about ``work_id``; True when that retired its job."""
        slot = self.slots.get(self._jobs_by_work.get(work_id, ""))
        if slot is None:
            return False
        slot.acked += 1
        return self.retire(slot)

    def retire(self, slot: JobSlot) -> bool:
        """Drop a finished slot, keeping its tombstone (only once ``retirable``)."""
        if not slot.retirable:
            return False
        work = slot.work
        del self.slots[work.name]
        for work_id in slot.ids:
            self._jobs_by_work.pop(work_id, None)
        self.tombstones[work.name] = Tombstone(work.version, linger=not work.cancelled)
        return True

    def keep(self) -> set[str]:
        """Jobs whose objects must stay in the cluster (anything else labelled is an orphan)."""
        return set(self.slots) | {name for name, tomb in self.tombstones.items() if tomb.linger}


def labelled_pods(view: ClusterView, keep: set[str]) -> list[PodRecord]:
    """The pods labelled with a job outside ``keep``, in ``list_pods`` order, from the
    pass's shared view: the sweep used to list (and sort) every pod of the cluster again
    on the event loop, 80,000 of them on a large cluster, to find the few it withdraws."""
    return sorted((pod for job, pods in view.pods_by_job.items() if job not in keep for pod in pods),
                  key=lambda p: (p.namespace, p.name))


def orphan_ops(pods: Sequence[PodRecord], services: Sequence[ServiceManifest],
               config_maps: Sequence[ConfigMapManifest], keep: set[str],
               network_policies: Sequence[NetworkPolicyManifest]) -> tuple[Op, ...]:
    """Deletions for objects labelled with a job that is in no desired set."""
    ops: list[Op] = []
    owners: set[tuple[str, str]] = set()
    for pod in pods:
        job = pod.labels.get(LABEL_JOB)
        if job and job not in keep and not pod.deleting:
            if LABEL_TASK_INDEX not in pod.labels and (pod.namespace, job) not in owners:
                # A workload's pod (its controller named it): the workload goes first, or
                # it would recreate the pod. Deleted only when it carries our job label.
                owners.add((pod.namespace, job))
                ops += [DeleteWorkload(kind, pod.namespace, job) for kind in WORKLOAD_KINDS]
            ops.append(DeletePod(pod.namespace, pod.name, "job not in the desired set"))
    for svc in services:
        job = svc.labels.get(LABEL_JOB)
        if job and job not in keep:
            # The agent may not list Secrets: a job's ssh Secret is found by its Service
            # (deleted first; a job without one answers 404, which is fine).
            ops.append(DeleteSecret(svc.namespace, ssh_secret_name(job)))
            # Nor claims: the ones made for its spec.volumes are named on its Service, and
            # each is deleted only while it carries the job's label.
            ops += [DeleteClaim(svc.namespace, claim, job) for claim in _made_claims(svc)]
            ops.append(DeleteService(svc.namespace, svc.name))
    for cm in config_maps:
        job = cm.labels.get(LABEL_JOB)
        if job and job not in keep:
            ops.append(DeleteConfigMap(cm.namespace, cm.name))
    for policy in network_policies:
        job = policy.labels.get(LABEL_JOB)
        if job and job not in keep:
            ops.append(DeleteNetworkPolicy(policy.namespace, policy.name))
    return tuple(ops)


def _made_claims(svc: ServiceManifest) -> list[str]:
    """The claims a job's Service says the agent made for it (bounded: it is cluster data,
    so the annotation is split no further than the names kept)."""
    names = svc.annotations.get(ANNOTATION_CLAIMS, "").split(",", MAX_JOB_VOLUMES)[:MAX_JOB_VOLUMES]
    return [n for n in names if n and len(n) <= 253]
