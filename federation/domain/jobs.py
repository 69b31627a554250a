"""Jobs, tasks and their policies (Volcano ``batch.volcano.sh/v1alpha1`` Job semantics).

A job is a gang: ``min_available`` pods must be placed together or none, always inside
one cluster. See volcano-sh/volcano ``pkg/apis/batch/v1alpha1/job.go`` for the field
meanings modelled here; the defaults (``maxRetry`` 3, ``minAvailable`` = all replicas)
follow Volcano's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from federation.domain.errors import InvalidInput, require
from federation.domain.job_volumes import JobVolume, check_job_volumes, claim_name_of
from federation.domain.nodes import Toleration
from federation.domain.partitions import check_partition_policy
from federation.domain.plugins import PluginOptions, plugin_mounts, resolve_plugins
from federation.domain.pod_requests import template_requests
from federation.domain.propagation import PropagationPolicy
from federation.domain.resources import Resources
from federation.domain.scheduling import NodeConstraints, template_constraints
from federation.domain.workloads import MIN_MEMBER, QUEUE_NAME, Workload

RESTART_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "TaskCompleted", "TaskFailed", "Unknown")
RESTART_ACTIONS = ("RestartPod", "RestartTask", "RestartJob", "AbortJob", "TerminateJob", "CompleteJob")
TOPOLOGY_MODES = ("hard", "soft")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DEFAULT_MAX_RETRY = 3
MAX_TOPOLOGY_WAIT_SECONDS = 30 * 86_400.0
# Where a workload's pod management policy sits in its manifest (the wire maps it into bodyJson).
WORKLOAD_GANG_PATH = "spec.podManagementPolicy"
MAX_POLICY_TIMEOUT_SECONDS = 30 * 86_400.0  # a lifecycle policy's delay before its action
MAX_POD_HOSTNAME = 63  # a pod's hostname is a DNS-1123 label
# Volcano's CRD types spec.ttlSecondsAfterFinished as an int32 with minimum 0, so every
# value a Volcano cluster admits is admitted here (about 68 years at most).
MAX_TTL_SECONDS_AFTER_FINISHED = 2**31 - 1


def _quantities(resources: Resources) -> str:
    return ", ".join(f"{k}: {v}" for k, v in resources.to_quantities().items()) or "nothing"


def _dns_label(value: str, path: str) -> None:
    require(bool(_DNS_LABEL.match(value or "")) and len(value) <= 63, path,
            "must be a DNS label (lowercase letters, digits, '-'; at most 63 characters)")


@dataclass(frozen=True)
class LifecyclePolicy:
    """``on events (or exitCode) do action``, optionally after ``timeout_seconds``."""

    action: str
    events: tuple[str, ...] = ()
    exit_code: int | None = None
    timeout_seconds: float | None = None

    def __post_init__(self) -> None:
        require(self.action in RESTART_ACTIONS, "action",
                f"unknown action {self.action!r} (one of {', '.join(RESTART_ACTIONS)})")
        for i, event in enumerate(self.events):
            require(event in RESTART_EVENTS, f"events[{i}]",
                    f"unknown event {event!r} (one of {', '.join(RESTART_EVENTS)})")
        require(bool(self.events) != (self.exit_code is not None), "events",
                "exactly one of event(s) and exitCode is required")
        if self.exit_code is not None:
            require(self.exit_code != 0, "exitCode", "must not be 0")
        if self.timeout_seconds is not None:  # bounded and finite: a stored Infinity is not JSON
            require(math.isfinite(self.timeout_seconds) and 0 <= self.timeout_seconds <= MAX_POLICY_TIMEOUT_SECONDS,
                    "timeout", f"must be between 0 and {MAX_POLICY_TIMEOUT_SECONDS:,.0f} seconds (30 days)")


def check_policy_set(policies: tuple[LifecyclePolicy, ...], path: str) -> None:
    """Volcano's admission rules for one list of policies (volcano-sh/volcano
    pkg/webhooks/admission/jobs/validate ``validatePolicies``): an event, or an exit code,
    maps to one action only (its own invalid example maps PodFailed to both RestartJob and
    AbortJob), and ``*`` must be the only event when present."""
    events: dict[str, int] = {}
    codes: dict[int, int] = {}
    for i, policy in enumerate(policies):
        for event in policy.events:
            require(event not in events, f"{path}[{i}].event", f"{event} is already mapped to an action by "
                    f"policies[{events.get(event)}]; one event cannot have two actions")
            events[event] = i
        if policy.exit_code is not None:
            require(policy.exit_code not in codes, f"{path}[{i}].exitCode", f"{policy.exit_code} is already "
                    f"mapped to an action by policies[{codes.get(policy.exit_code)}]")
            codes[policy.exit_code] = i
    if "*" in events and len(events) > 1:
        raise InvalidInput(f"{path}[{events['*']}].event", "'*' covers every event, so no other event may have "
                           "a policy beside it")


@dataclass(frozen=True)
class NetworkTopology:
    """Volcano ``networkTopology``: keep the gang inside one HyperNode of tier <= limit.

    Hard mode blocks until such a domain is free; soft mode prefers the lowest tier and
    never blocks. ``highest_tier_name`` is resolved per cluster; a cluster whose tree has
    no HyperNode of that tierName applies no limit (Volcano's behaviour).
    """

    mode: str = "hard"
    highest_tier_allowed: int | None = None
    highest_tier_name: str | None = None

    def __post_init__(self) -> None:
        require(self.mode in TOPOLOGY_MODES, "mode", "must be hard or soft")
        if self.highest_tier_allowed is not None:
            require(self.highest_tier_allowed >= 1, "highestTierAllowed", "must be >= 1")
        require(self.highest_tier_allowed is None or self.highest_tier_name is None, "highestTierName",
                "highestTierAllowed and highestTierName are mutually exclusive")

    @property
    def hard(self) -> bool:
        return self.mode == "hard"


@dataclass(frozen=True)
class PartitionPolicy:
    """Volcano task ``partitionPolicy`` (domain/partitions.py): ``totalPartitions``
    partitions of ``partitionSize`` pods, each kept whole (and, with a hard
    ``networkTopology``, inside one HyperNode of its tier); ``minPartitions`` of them must
    start together (0: the task's ``minAvailable`` decides, as in Volcano)."""

    total_partitions: int
    partition_size: int
    min_partitions: int = 0
    network_topology: NetworkTopology | None = None

    def __post_init__(self) -> None:
        require(self.total_partitions >= 1, "totalPartitions", "must be >= 1")
        require(self.partition_size >= 1, "partitionSize", "must be >= 1")
        require(0 <= self.min_partitions <= self.total_partitions, "minPartitions",
                f"must be between 0 and totalPartitions ({self.total_partitions})")

    @property
    def replicas(self) -> int:
        return self.total_partitions * self.partition_size

    def partition_of(self, index: int) -> int:
        """The partition of the task's pod ``index`` (Volcano: ``index / partitionSize``)."""
        return index // self.partition_size

    def whole(self, count: int) -> int:
        """``count`` pods rounded up to whole partitions (a partition is never placed in part)."""
        return -(-count // self.partition_size) * self.partition_size


@dataclass(frozen=True)
class Task:
    """A group of identical pods; ``resources`` are the requests of ONE pod."""

    name: str
    replicas: int
    resources: Resources
    min_available: int | None = None
    policies: tuple[LifecyclePolicy, ...] = ()
    # Volcano's TaskFailed threshold (restarts of the task's containers), not a restart
    # budget: restarts spend the job's maxRetry. None or 0: 3 (agents/core/events.py).
    max_retry: int | None = None
    template_json: str = ""  # canonical JSON of the pod template (spec passed through to the cluster)
    # Volcano dependsOn: pods are created once these tasks run (any one of them with depends_on_any).
    depends_on: tuple[str, ...] = ()
    depends_on_any: bool = False
    # Volcano partitionPolicy: the pods in whole partitions, each inside one HyperNode of
    # its tier (domain/partitions.py, placement/partitions.py).
    partition_policy: PartitionPolicy | None = None

    def __post_init__(self) -> None:
        _dns_label(self.name, "name")
        require(isinstance(self.replicas, int) and self.replicas >= 1, "replicas", "must be >= 1")
        if self.min_available is not None:
            require(0 <= self.min_available <= self.replicas, "minAvailable", "must be between 0 and replicas")
        policy = self.partition_policy
        if policy is not None:
            check_partition_policy(policy, self.replicas, self.min_available)
            if policy.min_partitions > 0 and self.min_available is None:  # Volcano's mutating webhook
                object.__setattr__(self, "min_available", policy.min_partitions * policy.partition_size)
        if self.max_retry is not None:
            require(self.max_retry >= 0, "maxRetry", "must be >= 0")
        check_policy_set(self.policies, "policies")
        try:
            template_constraints(self.template_json)  # refused here, at the edge, if unsupported
            requested = template_requests(self.template_json)
        except InvalidInput as exc:
            raise exc.under("template") from None
        # What the planner counts must be what the pod asks its cluster for (domain/pod_requests.py).
        require(not requested or requested == self.resources, "resources",
                f"must equal what the pod template's containers request ({_quantities(requested)}), "
                f"got ({_quantities(self.resources)})")

    @property
    def constraints(self) -> NodeConstraints:
        """What a node must offer one pod of this task (domain/scheduling.py; cached per template)."""
        return template_constraints(self.template_json, strict=False)

    @property
    def minimum(self) -> int:
        """Pods of this task that must run: its ``minAvailable``, else every replica, the
        value Volcano's job admission fills in (pkg/webhooks/admission/jobs/mutate)."""
        return self.replicas if self.min_available is None else self.min_available


@dataclass(frozen=True)
class Job:
    name: str
    queue: str
    tasks: tuple[Task, ...]
    min_available: int | None = None
    priority: int = 0
    priority_class: str = ""
    network_topology: NetworkTopology | None = None
    policies: tuple[LifecyclePolicy, ...] = ()
    plugins: tuple[tuple[str, tuple[str, ...]], ...] = ()
    max_retry: int = DEFAULT_MAX_RETRY
    propagation: PropagationPolicy | None = None
    # "" (manifests_fields.QUEUE_DEFAULT_NAMESPACE) until admission gives it the queue's default.
    namespace: str = "default"
    labels: tuple[tuple[str, str], ...] = field(default=())
    # Pod tolerations (from the pod templates) checked against node taints by the planner.
    tolerations: tuple[Toleration, ...] = ()
    # Opt-in hold for a lower tier than networkTopology requires (annotation
    # federation.io/topology-wait; placement/intent.py). None: the queue's or service's.
    topology_wait_seconds: float | None = None
    # A Deployment/StatefulSet realised as itself in the member cluster (one task), or None.
    workload: Workload | None = None
    # Jobs (same namespace) that must succeed before this one is planned (a JobFlow's dependsOn).
    after: tuple[str, ...] = ()
    # Volcano spec.minSuccess: the job is Completed once this many pods Succeeded (the rest
    # are deleted), and Failed if all its pods end with fewer (agents/core/recovery.py).
    min_success: int | None = None
    # Volcano spec.ttlSecondsAfterFinished: the job's record (and with it its Work, so its
    # pods) is deleted this many seconds after it Succeeded, Failed or was Cancelled
    # (control/job_ttl.py). None: kept until its queue is deleted.
    ttl_seconds_after_finished: int | None = None
    # Volcano spec.volumes: claims mounted at their mountPath in every container of every
    # pod, the ones described by a volumeClaim made by the agent (domain/job_volumes.py).
    volumes: tuple[JobVolume, ...] = ()

    def __post_init__(self) -> None:
        _dns_label(self.name, "metadata.name")
        _dns_label(self.queue, "spec.queue")
        require(len(self.tasks) >= 1, "spec.tasks", "at least one task is required")
        seen: set[str] = set()
        for i, task in enumerate(self.tasks):
            if task.name in seen:
                raise InvalidInput(f"spec.tasks[{i}].name", f"duplicate task name {task.name!r}")
            seen.add(task.name)
        if self.min_available is not None:
            require(self.min_available >= 1, "spec.minAvailable", "must be >= 1")
            require(self.min_available <= self.total_replicas, "spec.minAvailable",
                    f"must not exceed the total replicas ({self.total_replicas})")
        require(self.max_retry >= 0, "spec.maxRetry", "must be >= 0")
        if self.min_success is not None:
            # Volcano's CRD only says >= 1; above the replicas the job could only fail.
            require(1 <= self.min_success <= self.total_replicas, "spec.minSuccess",
                    f"must be between 1 and the total replicas ({self.total_replicas})")
        check_policy_set(self.policies, "spec.policies")
        if self.ttl_seconds_after_finished is not None:
            ttl = self.ttl_seconds_after_finished
            require(isinstance(ttl, int) and not isinstance(ttl, bool), "spec.ttlSecondsAfterFinished",
                    f"must be an integer, got {ttl!r}")
            require(0 <= ttl <= MAX_TTL_SECONDS_AFTER_FINISHED, "spec.ttlSecondsAfterFinished",
                    f"must be between 0 and {MAX_TTL_SECONDS_AFTER_FINISHED:,} seconds (Volcano's int32), got {ttl}")
        if self.topology_wait_seconds is not None:
            require(0 <= self.topology_wait_seconds <= MAX_TOPOLOGY_WAIT_SECONDS,
                    "metadata.annotations[federation.io/topology-wait]", "must be between 0 and 30 days")
        _ = self.plugin_options  # every plugin and option checked at construction
        if self.volumes:
            require(self.workload is None, "spec.volumes", "not supported for a Deployment or StatefulSet: mount "
                    "claims through its pod template (or a StatefulSet's volumeClaimTemplates)")
            check_job_volumes(self.name, self.volumes, (t.template_json for t in self.tasks),
                              plugin_mounts(self.plugin_options))
        if self.workload is None:
            self._check_member_names()
        if self.workload is not None:
            require(len(self.tasks) == 1 and not self.plugins and not self.policies, "spec",
                    "a workload job has one task and no plugins or policies (its controller runs the pods)")
            require(self.min_success is None, "spec.minSuccess",
                    "not supported for a Deployment or StatefulSet: its controller, not the agent, runs the pods")
            # No restart budget either: its controller restarts and replaces the pods, and the
            # agent keeps no retries for it (docs/design/agent.md). 3 is the unset value.
            require(self.max_retry == DEFAULT_MAX_RETRY, "spec.maxRetry",
                    "not supported for a Deployment or StatefulSet: its controller restarts the pods")
            require(not self.tasks[0].policies, "spec.tasks[0].policies",
                    "not supported for a Deployment or StatefulSet: its controller restarts the pods")
            require(self.tasks[0].max_retry is None, "spec.tasks[0].maxRetry",
                    "not supported for a Deployment or StatefulSet: its controller restarts the pods")
            self._check_workload(self.workload)
        self._check_depends_on()
        for i, other in enumerate(self.after):
            _dns_label(other, f"after[{i}]")
            require(other != self.name, f"after[{i}]", "a job cannot wait for itself")

    def _check_member_names(self) -> None:
        """The names the agent gives the job's objects in a member cluster, which its
        kube-apiserver would refuse after the job was queued, placed and dispatched (the
        job would then wait forever): the headless Service ``<job>`` needs a DNS-1035 label
        (a letter first), and each pod's hostname ``<job>-<task>-<index>`` at most 63
        characters (Volcano's job admission checks the same pod name length)."""
        require(self.name[:1].isalpha(), "metadata.name", "must start with a letter: it names the job's headless "
                "Service in the member cluster (a DNS-1035 label)")
        for i, task in enumerate(self.tasks):
            longest = f"{self.name}-{task.name}-{task.replicas - 1}"
            require(len(longest) <= MAX_POD_HOSTNAME, f"spec.tasks[{i}].name",
                    f"the pod name {longest!r} ({len(longest)} characters) is also its hostname, at most "
                    f"{MAX_POD_HOSTNAME} characters: shorten the job or task name")

    def _check_workload(self, workload: Workload) -> None:
        """The task's template is the workload's (one set of pods for the planner, Pod Security
        and the cluster), and the gang is one its controller can create all at once."""
        require(self.tasks[0].template_json == workload.template_json, "spec.tasks[0].template",
                "must be the workload's pod template (spec.template of its body), as written there")
        read = workload.read  # what the member cluster's controller and annotations will do
        require(self.tasks[0].replicas == read.replicas, "spec.tasks[0].replicas",
                f"must equal the workload's spec.replicas ({read.replicas})")
        if read.min_member is not None:
            require(self.min_available == read.min_member, "spec.minAvailable",
                    f"must equal the workload's {MIN_MEMBER} annotation ({read.min_member})")
        if read.topology_mode is not None or read.topology_tier is not None:
            nt = self.network_topology
            require(nt is not None and nt.mode == (read.topology_mode or "hard")
                    and nt.highest_tier_allowed == read.topology_tier and nt.highest_tier_name is None,
                    "spec.networkTopology", "must equal the workload's volcano.sh/network-topology annotations "
                    f"(mode {read.topology_mode or 'hard'}, highest tier {read.topology_tier})")
        if read.queue is not None:
            require(self.queue == read.queue, "spec.queue", f"must equal the workload's {QUEUE_NAME} annotation "
                    f"({read.queue!r})")
        require(workload.parallel or self.gang_size <= 1, WORKLOAD_GANG_PATH,
                "a StatefulSet gang needs podManagementPolicy: Parallel (OrderedReady creates each pod "
                "only after the previous one runs, so the gang could never be bound all at once)")

    def _check_depends_on(self) -> None:
        """Volcano's task dependsOn, checked whole: known tasks, no cycle, and a gang that
        can start before any dependent task exists (else it would wait forever)."""
        names = {t.name: i for i, t in enumerate(self.tasks)}
        for i, task in enumerate(self.tasks):
            for dep in task.depends_on:
                require(dep in names and dep != task.name, f"spec.tasks[{i}].dependsOn.name",
                        f"{dep!r} must name another task of this job")
        waiting = {t.name for t in self.tasks if t.depends_on}
        free = {t.name for t in self.tasks if not t.depends_on}  # grows to every task that can ever start
        changed = True
        while changed:
            changed = False
            for task in self.tasks:
                if task.name in free:
                    continue
                ready = [d in free for d in task.depends_on]
                if any(ready) if task.depends_on_any else all(ready):
                    free.add(task.name)
                    changed = True
        stuck = sorted(waiting - free)
        require(not stuck, f"spec.tasks[{names[stuck[0]]}].dependsOn" if stuck else "spec.tasks",
                f"tasks {', '.join(stuck)} depend on each other in a cycle")
        first = sum(t.replicas for t in self.tasks if not t.depends_on)
        require(not waiting or self.gang_size <= first, "spec.minAvailable",
                f"dependsOn: the gang needs {self.gang_size} pods but only {first} exist before the "
                f"dependent tasks ({', '.join(sorted(waiting))}) start; it would never start")

    @cached_property
    def plugin_options(self) -> Mapping[str, PluginOptions]:
        """The plugins the job runs with (implied ones included), options resolved."""
        return resolve_plugins(self.plugins)

    def plugin(self, name: str) -> PluginOptions | None:
        return self.plugin_options.get(name)

    @property
    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def gang_size(self) -> int:
        """Pods that must be placed together: ``minAvailable``; without it, the sum of the
        tasks' own minimums, a task without one counting all its replicas (so every replica
        when no task has one). That is the value Volcano's job admission fills in
        (pkg/webhooks/admission/jobs/mutate; Volcano's docs/design/min-avaiable-member-resource.md)."""
        if self.min_available is not None:
            return self.min_available
        # At least one pod: tasks saying ``minAvailable: 0`` still start with something.
        return max(1, sum(t.minimum for t in self.tasks))

    @cached_property
    def requests(self) -> Resources:
        """Total requests of all replicas (computed once: a Job is immutable)."""
        acc = Resources()
        for task in self.tasks:
            acc = acc + task.resources.scaled(task.replicas)
        return acc

    @cached_property
    def node_constraints(self) -> tuple[NodeConstraints, ...]:
        """Per task (in task order): its template's node constraints plus the job's tolerations."""
        return tuple(t.constraints.with_tolerations(self.tolerations) for t in self.tasks)

    @cached_property
    def uniform_constraints(self) -> NodeConstraints | None:
        """The one set of node constraints all tasks share, or None when tasks differ."""
        first = self.node_constraints[0]
        return first if all(c == first for c in self.node_constraints[1:]) else None

    def pods(self) -> tuple[tuple[str, int, Resources], ...]:
        """Every pod as (task name, index within task, requests), in task order."""
        return tuple((t.name, i, t.resources) for t in self.tasks for i in range(t.replicas))

    @cached_property
    def gang_counts(self) -> tuple[int, ...]:
        """Pods per task (task order) that must start together: each task's own
        ``minAvailable``, then the lowest indices in task order up to the job's
        ``minAvailable`` (Volcano's gang plugin: minAvailable pods, task minimums met),
        a partitioned task's rounded up to whole partitions."""
        counts = [t.min_available or 0 for t in self.tasks]
        left = self.gang_size - sum(counts)
        for i, t in enumerate(self.tasks):
            if left <= 0:
                break
            extra = min(left, t.replicas - counts[i])
            counts[i] += extra
            left -= extra
        # A partition starts whole or not at all (Volcano: a sub-job is ready at partitionSize pods).
        return tuple(t.partition_policy.whole(n) if t.partition_policy is not None else n
                     for t, n in zip(self.tasks, counts, strict=True))

    def gang_pods(self) -> tuple[tuple[str, int, Resources], ...]:
        """The pods that must start together (``gang_counts``), in ``pods()`` order."""
        return tuple((t.name, i, t.resources) for t, n in zip(self.tasks, self.gang_counts, strict=True)
                     for i in range(n))

    @property
    def elastic(self) -> bool:
        """Fewer pods must start together than the job has replicas: it may start smaller
        and grow toward ``replicas`` (docs/design/elastic-gangs.md)."""
        return sum(self.gang_counts) < self.total_replicas

    @property
    def claims(self) -> tuple[tuple[str, str], ...]:
        """(claim, mountPath) of each ``spec.volumes`` entry, in order: what every container mounts."""
        return tuple((claim_name_of(self.name, i, v), v.mount_path) for i, v in enumerate(self.volumes))

    def task(self, name: str) -> Task:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    def policies_for(self, task_name: str) -> tuple[LifecyclePolicy, ...]:
        """The policies an event of this task is matched against, first match wins: the
        task's own, then the job's (Volcano's ``applyPolicies``, pkg/controllers/job/
        job_controller_util.go, falls through to the job's policies when none of the
        task's matches). An unknown task (a job-wide event) gets the job's."""
        own = next((t.policies for t in self.tasks if t.name == task_name), ())
        return (*own, *self.policies)
