"""Plain records the agent reads from and writes to one cluster.

These are the only shapes that cross the ``ClusterBackend`` Protocol
(``agents/backend.py``): the Kubernetes adapter translates API objects to and from them,
the in-memory fake stores them as they are. Keeping them small, frozen and free of
Kubernetes types is what lets every decision in ``agents/core`` be a pure function that
unit tests drive with literals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from federation.domain.job_volumes import ClaimSpec
from federation.domain.nodes import Taint, Toleration
from federation.domain.resources import Resources
from federation.domain.scheduling import Term
from federation.domain.states import TERMINAL_POD_PHASES, PodPhase

# Labels and annotations the agent stamps on everything it creates. Selecting on
# ``LABEL_JOB`` is how the agent finds its objects again after a restart.
LABEL_JOB = "federation.io/job"
LABEL_TASK = "federation.io/task"
LABEL_TASK_INDEX = "federation.io/task-index"
LABEL_WORK_VERSION = "federation.io/work-version"
# On cluster-scoped objects the agent created for the federation (PriorityClasses); never deleted by it.
LABEL_MANAGED = "federation.io/managed"
ANNOTATION_WORK_ID = "federation.io/work-id"
ANNOTATION_SPEC_HASH = "federation.io/spec-hash"
# On a job's Service: the claims the agent made for it, comma separated. The agent may not
# list claims, so the orphan sweep finds them here (agents/runtime_jobs.py).
ANNOTATION_CLAIMS = "federation.io/claims"
SCHEDULER_NAME = "federation-scheduler"


def pod_name(job: str, task: str, index: int) -> str:
    """``<job>-<task>-<index>``: deterministic, so a pod can never be created twice."""
    return f"{job}-{task}-{index}"



@dataclass(frozen=True)
class NodeRecord:
    """A node as the API reports it; ``free`` is derived later (agents/core/snapshot.py)."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    def __hash__(self) -> int:
        return hash(self.name)


@dataclass(frozen=True)
class PodRecord:
    """A pod as observed.

    ``node`` is None until the pod is bound; ``deleting`` mirrors a set
    ``metadata.deletionTimestamp`` (the name is still taken until the pod is gone).
    ``phase_since`` is when the pod entered its current phase (pending-since for the
    PodPending timeout, finished-at for a failure); ``exit_code`` is the first
    terminated container's exit code, when there is one. ``uid`` is its
    ``metadata.uid``: the claim of a generic ephemeral volume is the pod's only when the
    pod controls it by that uid (agents/core/volumes.py).
    """

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node: str | None = None
    phase: str = PodPhase.PENDING
    reason: str = ""
    restarts: int = 0
    requests: Resources = field(default_factory=Resources)
    deleting: bool = False
    exit_code: int | None = None
    phase_since: float = 0.0
    message: str = ""
    uid: str = ""

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_POD_PHASES

    @property
    def job(self) -> str:
        return self.labels.get(LABEL_JOB, "")

    @property
    def task(self) -> str:
        return self.labels.get(LABEL_TASK, "")

    @property
    def index(self) -> int:
        try:
            return int(self.labels.get(LABEL_TASK_INDEX, "-1"))
        except ValueError:
            return -1

    @property
    def version(self) -> int:
        try:
            return int(self.labels.get(LABEL_WORK_VERSION, "-1"))
        except ValueError:
            return -1


# The ssh plugin's Secret keys (Volcano's names) and the subPath its volume is mounted with.
SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, SSH_CONFIG, SSH_SUBPATH = "id_rsa", "id_rsa.pub", "config", ".ssh"


@dataclass(frozen=True)
class SshMount:
    """The ssh plugin's volume: the Secret's ``id_rsa``, ``id_rsa.pub`` (also as
    ``authorized_keys``) and ``config`` under ``path`` with file ``mode``."""

    secret: str
    path: str
    mode: int


@dataclass(frozen=True)
class PodManifest:
    """The pod the agent asks for. There is deliberately no ``node_name``: pods are created
    unbound with ``scheduler_name`` set to ours and bound through the Binding subresource,
    so a gang is bound only once every member has a node (all-or-nothing)."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = SCHEDULER_NAME
    requests: Resources = field(default_factory=Resources)
    env: tuple[tuple[str, str], ...] = ()
    hostname: str = ""
    subdomain: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    # (ConfigMap name, mount path) pairs, e.g. the hosts files at /etc/volcano.
    config_map_mounts: tuple[tuple[str, str], ...] = ()
    # The job's ssh Secret mounted as Volcano's ssh plugin does (None without ssh).
    ssh: SshMount | None = None
    # (name, port) container ports the framework plugins open (mpijob-port, pytorchjob-port).
    ports: tuple[tuple[str, int], ...] = ()
    # Canonical JSON of the user's pod template; the adapter merges the fields above into it.
    template_json: str = ""
    # The job's PriorityClass as the member cluster holds it (agents/core/priority.py);
    # "" leaves the template's (or the cluster's default) alone.
    priority_class_name: str = ""
    priority: int | None = None
    # (pod volume, claim, mount path) of the job's spec.volumes: each claim a pod volume,
    # mounted at its path in every container (Volcano's createJobPod).
    claim_mounts: tuple[tuple[str, str, str], ...] = ()

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class ServiceManifest:
    """A headless Service (clusterIP None) selecting the job's pods, for stable hostnames."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    selector: Mapping[str, str] = field(default_factory=dict)
    publish_not_ready_addresses: bool = True

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))


@dataclass(frozen=True)
class ConfigMapManifest:
    """Host files and the DeepSpeed hostfile, mounted into every pod of the job."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    data: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))


@dataclass(frozen=True)
class SecretManifest:
    """The ssh plugin's Secret ``<job>-ssh``: ``data`` holds the ssh ``config`` naming
    every pod; with ``key_pair`` the creator adds a fresh ``id_rsa``/``id_rsa.pub`` (the
    only impure part, done at creation so rendering stays deterministic). Read back
    without ``data``: the agent never needs a private key in memory again."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    data: Mapping[str, str] = field(default_factory=dict)
    key_pair: bool = False

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))


@dataclass(frozen=True)
class NetworkPolicyManifest:
    """The svc plugin's NetworkPolicy ``<job>`` (Volcano's, unless
    ``--disable-network-policy``): the job's pods admit ingress only from pods of the same
    job. ``selector`` picks those pods, both as the policy's target and as its one peer."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    selector: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))


@dataclass(frozen=True)
class ClaimManifest:
    """A PersistentVolumeClaim the agent makes for a job's ``spec.volumes[i].volumeClaim``
    (``<job>-pvc-<i>``), labelled with the job; never replaced: the job's data lives in it."""

    name: str
    namespace: str
    spec: ClaimSpec
    labels: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))


@dataclass(frozen=True)
class WorkloadManifest:
    """A Deployment or StatefulSet the agent creates for a workload job: ``body_json`` is
    the whole object to create. Read back by name with metadata only."""

    kind: str
    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    body_json: str = ""

    def __hash__(self) -> int:
        return hash((self.kind, self.namespace, self.name))


# kube-scheduler's VolumeBinding plugin and the PersistentVolume controller speak through
# these (k8s.io/component-helpers/storage/volume: AnnSelectedNode, AnnBindCompleted).
ANNOTATION_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANNOTATION_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER = "Immediate", "WaitForFirstConsumer"


@dataclass(frozen=True)
class ClaimRecord:
    """A PersistentVolumeClaim a job's pods name, read by name (agents/core/volumes.py).

    ``volume`` is ``spec.volumeName``; ``bound`` that the PV controller finished binding
    it (``volume`` set and the bind-completed annotation present, kube-scheduler's "fully
    bound"); ``lost`` its ``status.phase`` Lost; ``selected_node`` the node a scheduler
    chose for a WaitForFirstConsumer claim; ``resource_version`` guards that write; ``job``
    its ``LABEL_JOB`` label (the job whose claim the agent made, "" for a user's claim);
    ``controller`` the uid of its controlling owner reference ("" when none): the pod whose
    generic ephemeral volume it is, when the ephemeral volume controller made it."""

    name: str
    namespace: str
    storage_class: str = ""
    volume: str = ""
    bound: bool = False
    lost: bool = False
    deleting: bool = False
    selected_node: str = ""
    resource_version: str = ""
    job: str = ""
    controller: str = ""


@dataclass(frozen=True)
class VolumeRecord:
    """A PersistentVolume a claim is bound to: its required node affinity (None: any node)."""

    name: str
    node_affinity: tuple[Term, ...] | None = None


@dataclass(frozen=True)
class StorageClassRecord:
    """A StorageClass by name. ``allowed_topologies``: terms ORed, each a tuple of (label
    key, allowed values) ANDed; empty allows every node."""

    name: str
    binding_mode: str = BINDING_IMMEDIATE
    provisioner: str = ""
    allowed_topologies: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...] = ()


ObjectRecord = (NodeRecord | PodRecord | ServiceManifest | ConfigMapManifest | SecretManifest
                | NetworkPolicyManifest | str)

@dataclass(frozen=True)
class ChangeEvent:
    """One watch notification. The runtime only uses it as a trigger to re-read and
    reconcile (level-triggered), so losing or coalescing events is harmless.
    ``object`` is the record after the change (before it, for DELETED); HyperNode
    events carry the HyperNode name."""

    kind: str
    type: str
    object: ObjectRecord
