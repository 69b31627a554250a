"""Render a Work into the Kubernetes objects the agent creates: pods, a headless
Service, a ConfigMap of host files, for the ssh plugin a Secret, for the svc plugin
a NetworkPolicy and for each ``spec.volumes[].volumeClaim`` a PersistentVolumeClaim.

What each plugin contributes is in ``agents/core/plugins.py`` (modelled on Volcano's job
plugins). Pods are rendered without a node: binding is a separate, all-or-nothing step
(agents/core/binding.py). Rendering is deterministic, which is what lets reconcile compare
desired and observed objects by a content hash; the ssh key pair is the one exception,
generated when the Secret is created (``SecretManifest.key_pair``) and never part of
the hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from agents.core.plugins import (
    container_ports,
    hosts_data,
    needs_config_map,
    pod_env,
    ssh_config,
    ssh_mount,
)
from agents.core.records import (
    ANNOTATION_CLAIMS,
    ANNOTATION_SPEC_HASH,
    ANNOTATION_WORK_ID,
    LABEL_JOB,
    LABEL_TASK,
    LABEL_TASK_INDEX,
    LABEL_WORK_VERSION,
    SCHEDULER_NAME,
    SSH_CONFIG,
    ClaimManifest,
    ConfigMapManifest,
    NetworkPolicyManifest,
    PodManifest,
    SecretManifest,
    ServiceManifest,
    SshMount,
    pod_name,
)
from federation.domain.job_volumes import made_claim_name, pod_volume_name
from federation.domain.jobs import Job
from federation.domain.plugins import HOSTS_MOUNT_PATH
from federation.domain.works import Work


@dataclass(frozen=True)
class Rendered:
    """Everything one Work needs in the cluster."""

    service: ServiceManifest
    config_map: ConfigMapManifest | None
    pods: tuple[PodManifest, ...]
    secret: SecretManifest | None = None
    network_policy: NetworkPolicyManifest | None = None
    claims: tuple[ClaimManifest, ...] = ()

    def pod(self, name: str) -> PodManifest | None:
        for p in self.pods:
            if p.name == name:
                return p
        return None


def spec_hash(*parts: object) -> str:
    """A stable digest of an object's desired content, compared instead of the object
    itself so the Kubernetes adapter only has to round-trip one annotation."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def config_map_name(job: str) -> str:
    return f"{job}-hosts"


def render(work: Work) -> Rendered:
    """Pods for every task replica, the headless Service ``<job>``, (for svc and
    deepspeed) the ConfigMap ``<job>-hosts``, (for ssh) the Secret ``<job>-ssh`` and (for
    svc without ``--disable-network-policy``) the NetworkPolicy ``<job>``."""
    job = work.job
    job_labels = {LABEL_JOB: job.name}
    service = render_service(job)
    config_map = None
    mounts: tuple[tuple[str, str], ...] = ()
    if needs_config_map(job):
        data = hosts_data(job)
        config_map = ConfigMapManifest(
            name=config_map_name(job.name), namespace=job.namespace, labels=job_labels,
            annotations={ANNOTATION_SPEC_HASH: spec_hash("config-map", sorted(data.items()))},
            data=data,
        )
        mounts = ((config_map.name, HOSTS_MOUNT_PATH),)
    secret, ssh = None, None
    wanted = ssh_mount(job)
    if wanted is not None:
        ssh = SshMount(*wanted)
        data = {SSH_CONFIG: ssh_config(job)}
        secret = SecretManifest(
            name=ssh.secret, namespace=job.namespace, labels=job_labels,
            annotations={ANNOTATION_SPEC_HASH: spec_hash("ssh-secret", sorted(data.items()))},
            data=data, key_pair=True,
        )
    svc = job.plugin("svc")
    network_policy = None
    if svc is not None and not svc.switch("disable-network-policy"):
        # Volcano's svc plugin (createNetworkPolicyIfNotExist): ingress to the job's pods
        # only from the job's own pods, in the job's namespace.
        network_policy = NetworkPolicyManifest(
            name=job.name, namespace=job.namespace, labels=job_labels,
            annotations={ANNOTATION_SPEC_HASH: spec_hash("network-policy", sorted(job_labels.items()))},
            selector=job_labels,
        )
    pods = tuple(_pod(work, task, index, mounts, ssh) for task, index, _ in job.pods())
    return Rendered(service, config_map, pods, secret, network_policy, render_claims(job))


def render_claims(job: Job) -> tuple[ClaimManifest, ...]:
    """The claims the agent makes for the job: one per ``spec.volumes[i].volumeClaim``,
    named ``<job>-pvc-<i>`` and labelled with the job (Volcano's ``createPVC``, whose
    owner reference to the job is here the label the agent deletes it by)."""
    return tuple(ClaimManifest(name=made_claim_name(job.name, i), namespace=job.namespace, spec=v.claim,
                               labels={LABEL_JOB: job.name})
                 for i, v in enumerate(job.volumes) if v.claim is not None)


def render_service(job: Job) -> ServiceManifest:
    """The headless Service ``<job>``: the pods' DNS subdomain, and where the job's saved
    runtime state lives (agents/core/checkpoints.py)."""
    selector = {LABEL_JOB: job.name}
    svc = job.plugin("svc")
    publish = svc.switch("publish-not-ready-addresses") if svc is not None else True
    annotations = {ANNOTATION_SPEC_HASH: spec_hash("service", sorted(selector.items()), publish)}
    made = [c.name for c in render_claims(job)]
    if made:  # outside the hash: where the orphan sweep finds them, not a reason to replace the Service
        annotations[ANNOTATION_CLAIMS] = ",".join(made)
    return ServiceManifest(
        name=job.name, namespace=job.namespace, labels=dict(selector), annotations=annotations,
        selector=selector, publish_not_ready_addresses=publish,
    )


def _pod(work: Work, task: str, index: int, mounts: tuple[tuple[str, str], ...], ssh: SshMount | None) -> PodManifest:
    job = work.job
    user_labels: Mapping[str, str] = dict(job.labels)
    labels = {
        **user_labels,
        LABEL_JOB: job.name,
        LABEL_TASK: task,
        LABEL_TASK_INDEX: str(index),
        LABEL_WORK_VERSION: str(work.version),
    }
    spec = job.task(task)
    return PodManifest(
        name=pod_name(job.name, task, index),
        namespace=job.namespace,
        labels=labels,
        annotations={ANNOTATION_WORK_ID: work.work_id},
        scheduler_name=SCHEDULER_NAME,
        requests=spec.resources,
        env=pod_env(job, task, index),
        hostname=pod_name(job.name, task, index),
        subdomain=job.name,
        tolerations=job.tolerations,
        config_map_mounts=mounts,
        ssh=ssh,
        ports=container_ports(job),
        template_json=spec.template_json,
        priority_class_name=job.priority_class,
        priority=job.priority if job.priority_class else None,
        claim_mounts=tuple((pod_volume_name(i), claim, path) for i, (claim, path) in enumerate(job.claims)),
    )
