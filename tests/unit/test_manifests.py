"""Volcano/Karmada YAML into domain objects: the happy path in detail, and one table row
per refusal, each naming the field path a user must fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from federation.domain import GPU, MEMORY, InvalidInput, Resources
from federation.domain.manifests import (
    PRIORITY_CLASSES,
    load_jobs,
    load_manifests,
    load_queue_manifest,
    load_queue_manifests,
    load_queues,
)
from federation.domain.manifests_fields import QUEUE_DEFAULT_NAMESPACE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "manifests"
GI = 1 << 30


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def job_yaml(spec: str = "", task: str = "", container: str = "", meta: str = "", replicas: int | str = 2) -> str:
    """A minimal valid Volcano Job with indentable extension points."""
    return textwrap.dedent("""\
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata:
          name: small
        {meta}
        spec:
        {spec}
          tasks:
            - name: worker
              replicas: {replicas}
        {task}
              template:
                spec:
                  containers:
                    - name: c
                      image: busybox
        {container}
        """).format(
        meta=textwrap.indent(meta, "  "), spec=textwrap.indent(spec, "  "),
        task=textwrap.indent(task, "      "), container=textwrap.indent(container, "              "),
        replicas=replicas,
    )


# ---------------------------------------------------------------- the realistic example


def test_pytorch_job_with_propagation_policy_loads_every_field() -> None:
    sub = load_manifests(fixture("pytorch-llama-pretrain.yaml"))
    job = sub.job
    assert (job.name, job.namespace, job.queue) == ("llama-pretrain", "research", "research")
    assert job.labels == (("team", "nlp"),)
    assert job.min_available == 16 and job.gang_size == 16 and job.max_retry == 5
    assert (job.priority_class, job.priority) == ("high-priority", PRIORITY_CLASSES["high-priority"])
    assert job.network_topology is not None
    assert (job.network_topology.mode, job.network_topology.highest_tier_allowed) == ("hard", 1)
    master, worker = job.tasks
    # master: two containers summed; rdma/hca only under limits counts as a request.
    assert master.resources == Resources({"cpu": 64500, MEMORY: 512 * GI + 256 * (1 << 20), GPU: 8, "rdma/hca": 1})
    assert master.policies[0].action == "CompleteJob" and master.policies[0].events == ("TaskCompleted",)
    assert (worker.replicas, worker.max_retry, worker.resources.gpus) == (15, 10, 8)
    assert '"containerPort":23456' in master.template_json
    assert [(p.action, p.events, p.exit_code, p.timeout_seconds) for p in job.policies] == [
        ("RestartPod", ("PodEvicted",), None, None),
        ("RestartPod", ("PodFailed",), None, None),
        ("RestartJob", ("PodPending",), None, 600.0),
        ("RestartPod", (), 137, None),
    ]
    assert job.policies_for("master") == (*master.policies, *job.policies)  # the task's first, then the job's
    assert job.policies_for("worker") == job.policies
    assert job.plugins == (("env", ()), ("pytorch", ("--master=master", "--worker=worker", "--port=23456")),
                           ("svc", ()))
    assert [(t.key, t.operator) for t in job.tolerations] == [("nvidia.com/gpu", "Exists")]

    pp = sub.propagation
    assert pp is not None and job.propagation == pp
    assert [t.name for t in pp.cluster_affinities] == ["preferred", "any-eu-gpu"]
    assert pp.cluster_affinities[0].affinity.cluster_names == ("gpu-eu-1", "gpu-eu-2")
    assert dict(pp.cluster_affinities[1].affinity.match_labels) == {"accelerator": "h100", "region": "eu"}
    assert pp.cluster_affinities[1].affinity.exclude == ("gpu-eu-maintenance",)
    assert pp.cluster_tolerations[0].key == "federation.io/draining"
    assert (pp.spread_constraints[0].min_groups, pp.spread_constraints[0].max_groups) == (1, 1)
    assert pp.replica_scheduling is not None
    assert pp.replica_scheduling.division_preference == "Weighted"
    assert pp.replica_scheduling.static_weights == (("gpu-eu-1", 2), ("gpu-eu-2", 1), ("gpu-eu-3", 1))


def test_volcano_defaults_apply_when_fields_are_absent() -> None:
    job = load_manifests(job_yaml()).job
    assert (job.queue, job.namespace, job.min_available, job.max_retry, job.priority) == (
        "default", QUEUE_DEFAULT_NAMESPACE, None, 3, 0)  # the queue's default namespace, resolved at submission
    assert job.network_topology is None and job.propagation is None and job.tolerations == ()


def test_explicit_priority_annotation_overrides_the_class_table() -> None:
    text = job_yaml(meta="annotations:\n  federation.io/priority: \"4242\"", spec="priorityClassName: my-own-class")
    assert load_manifests(text).job.priority == 4242


def test_requests_fall_back_to_limits_and_init_containers_raise_the_floor() -> None:
    text = job_yaml(container="resources:\n  limits: {cpu: '2', memory: 1Gi}\n  requests: {cpu: 500m}")
    text = text.replace("          containers:", "          initContainers:\n            - name: warm\n"
                        "              resources: {requests: {memory: 4Gi}}\n          containers:")
    task = load_manifests(text).job.tasks[0]
    assert task.resources == Resources({"cpu": 500, MEMORY: 4 * GI})


def test_soft_topology_by_tier_name() -> None:
    job = load_manifests(job_yaml(spec="networkTopology: {mode: soft, highestTierName: spine}")).job
    assert job.network_topology is not None
    assert (job.network_topology.hard, job.network_topology.highest_tier_name) == (False, "spine")


# ---------------------------------------------------------------- refusals (fixtures)

BAD_FILES = [
    pytest.param("bad-invalid-yaml.yaml", "", "line 9, column 1",
                 id="a tab in the indentation is a YAML error with line and column"),
    pytest.param("bad-unknown-kind.yaml", "documents[0].kind", "PyTorchJob",
                 id="a Kubeflow PyTorchJob is not a Volcano Job"),
    pytest.param("bad-unknown-api-version.yaml", "documents[0].apiVersion", "batch/v1",
                 id="a Kubernetes batch/v1 Job is refused by its apiVersion"),
    pytest.param("bad-two-jobs.yaml", "documents[1].kind", "only one Job", id="two jobs in one file are ambiguous"),
    pytest.param("bad-unknown-event.yaml", "documents[0].spec.policies[0].event", "PodCrashed",
                 id="an unknown restart event names the policy"),
    pytest.param("bad-unknown-action.yaml", "documents[0].spec.tasks[0].policies[0].action", "RebootNode",
                 id="an unknown restart action inside a task names the task policy"),
    pytest.param("bad-zero-replicas.yaml", "documents[0].spec.tasks[0].replicas", ">= 1",
                 id="a task needs at least one replica"),
    pytest.param("bad-min-available-too-big.yaml", "documents[0].spec.minAvailable", "total replicas",
                 id="a gang larger than the job can never start"),
    pytest.param("bad-malformed-quantity.yaml",
                 "documents[0].spec.tasks[0].template.spec.containers[0].resources.requests.memory", "8Gx",
                 id="8Gx is named down to the container request"),
    pytest.param("bad-duplicate-task.yaml", "documents[0].spec.tasks[1].name", "duplicate",
                 id="two tasks with one name would share pod names"),
    pytest.param("bad-tier-zero.yaml", "documents[0].spec.networkTopology.highestTierAllowed", ">= 1",
                 id="tier 0 does not exist"),
    pytest.param("bad-both-tier-limits.yaml", "documents[0].spec.networkTopology.highestTierName", "mutually exclusive",
                 id="tier number and tier name together are ambiguous"),
    pytest.param("bad-unknown-spec-key.yaml", "documents[0].spec.minAvaliable", "did you mean 'minAvailable'",
                 id="a typo in the spec is refused, not silently dropped"),
]


@pytest.mark.parametrize(("name", "path", "rule"), BAD_FILES)
def test_bad_manifest_is_refused_with_its_field_path(name: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_manifests(fixture(name))
    assert info.value.path == path
    assert rule in info.value.rule


def test_every_bad_fixture_has_a_table_row() -> None:
    on_disk = {p.name for p in FIXTURES.glob("bad-*.yaml")}
    assert on_disk == {row.values[0] for row in BAD_FILES}


# ---------------------------------------------------------------- refusals (inline)

INLINE = [
    pytest.param(job_yaml(meta="annotations: {federation.io/priority: high}"),
                 "documents[0].metadata.annotations[federation.io/priority]", "integer",
                 id="the priority annotation must be an integer"),
    pytest.param(job_yaml(spec="policies:\n- {event: PodPending, action: RestartJob, timeout: 10}"),
                 "documents[0].spec.policies[0].timeout", "string", id="a timeout needs a unit"),
    pytest.param(job_yaml(spec="policies:\n- {event: PodPending, action: RestartJob, timeout: 10x}"),
                 "documents[0].spec.policies[0].timeout", "malformed duration", id="a timeout unit must be Go's"),
    pytest.param(job_yaml(spec="policies:\n- {action: RestartJob}"), "documents[0].spec.policies[0].events",
                 "exactly one", id="a policy needs an event or an exit code"),
    pytest.param(job_yaml(spec="plugins: {horovod: []}"), "documents[0].spec.plugins.horovod", "not supported",
                 id="an unknown plugin is refused"),
    pytest.param(job_yaml(spec="volumes: [{mountPath: /in}]"), "documents[0].spec.volumes[0].volumeClaim",
                 "either volumeClaim or volumeClaimName is required",
                 id="a volume without a claim (tests/unit/test_job_volumes.py has the rest)"),
    pytest.param(job_yaml(spec="minSuccess: 0"), "documents[0].spec.minSuccess", "between 1 and the total replicas",
                 id="minSuccess below 1 (Volcano's CRD minimum)"),
    pytest.param(job_yaml(spec="minSuccess: 3"), "documents[0].spec.minSuccess", "between 1 and the total replicas (2)",
                 id="minSuccess above the replicas could never complete the job"),
    pytest.param(job_yaml(spec="minSuccess: two"), "documents[0].spec.minSuccess", "integer",
                 id="minSuccess must be an integer"),
    pytest.param(job_yaml(task="dependsOn: {name: [master]}"), "documents[0].spec.tasks[0].dependsOn.name",
                 "must name another task", id="a task dependency names a task of the job"),
    pytest.param(job_yaml(task="minAvailable: 3"), "documents[0].spec.tasks[0].minAvailable", "between 0 and replicas",
                 id="a task gang larger than the task"),
    pytest.param(job_yaml(replicas="two"), "documents[0].spec.tasks[0].replicas", "integer",
                 id="replicas must be an integer"),
    pytest.param(job_yaml().replace("name: small", "name: Small_Job"), "documents[0].metadata.name", "DNS label",
                 id="the job name becomes pod names so it must be a DNS label"),
    pytest.param(job_yaml().replace("name: small", "name: 0small"), "documents[0].metadata.name", "start with a letter",
                 id="the job name names its headless Service in the member cluster, which must start with a letter"),
    pytest.param(job_yaml().replace("name: small", "name: " + "s" * 60), "documents[0].spec.tasks[0].name",
                 "at most 63 characters", id="a pod name is its hostname, so job, task and index fit in 63 characters"),
    pytest.param(job_yaml().replace("          containers:\n",
                                    "          priority: 2000000000\n          containers:\n"),
                 "documents[0].spec.tasks[0].template.spec.priority", "priorityClassName",
                 id="a pod's priority is the member cluster's admission's, from its class: no number"),
    pytest.param(job_yaml().replace("          containers:\n            - name: c\n              image: busybox\n",
                                    "          containers: []\n"),
                 "documents[0].spec.tasks[0].template.spec.containers", "at least one", id="a pod needs a container"),
    pytest.param("", "documents", "no Job", id="an empty file submits nothing"),
    pytest.param("- just\n- a list\n", "documents[0]", "mapping", id="a document must be a mapping"),
    pytest.param(job_yaml() + "---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\n"
                 "metadata: {name: pp}\nspec:\n  resourceSelectors: [{apiVersion: batch.volcano.sh/v1alpha1, "
                 "kind: Job, name: other}]\n  placement: {}\n",
                 "documents[1].spec.resourceSelectors", "does not select", id="a policy for another job is refused"),
    pytest.param(job_yaml() + "---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\n"
                 "metadata: {name: pp, namespace: other}\nspec: {placement: {}}\n",
                 "documents[1].metadata.namespace", "cannot select", id="a namespaced policy cannot cross namespaces"),
    pytest.param(job_yaml() + "---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\n"
                 "metadata: {name: pp}\nspec:\n  placement:\n    clusterAffinity: {clusterNames: [a]}\n"
                 "    clusterAffinities: [{affinityName: x, clusterNames: [b]}]\n",
                 "documents[1].spec.placement.clusterAffinities", "mutually exclusive",
                 id="clusterAffinity and clusterAffinities together are ambiguous"),
    pytest.param(job_yaml() + "---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\n"
                 "metadata: {name: pp}\nspec:\n  placement:\n    replicaScheduling:\n      weightPreference:\n"
                 "        staticWeightList: [{targetCluster: {clusterNames: [a]}, weight: 0}]\n",
                 "documents[1].spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight", ">= 1",
                 id="a static weight of zero"),
]


@pytest.mark.parametrize(("text", "path", "rule"), INLINE)
def test_bad_inline_manifest_is_refused_with_its_field_path(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_manifests(text)
    assert info.value.path == path
    assert rule in info.value.rule


def test_min_success_is_loaded() -> None:
    assert load_manifests(job_yaml(spec="minSuccess: 1")).job.min_success == 1
    assert load_manifests(job_yaml()).job.min_success is None


# ---------------------------------------------------------------- queues


def test_volcano_queue_loads_capacity_fields_and_owners() -> None:
    queue = load_queue_manifest(fixture("queue-research.yaml"))
    assert (queue.name, queue.weight, queue.priority, queue.reclaimable) == ("research", 3, 10, True)
    assert queue.capability == Resources({GPU: 512, "cpu": 4_096_000})
    assert queue.guarantee == Resources({GPU: 64})
    assert queue.deserved == Resources({GPU: 256})
    assert queue.owners == ("nlp", "vision") and queue.parent is None


QUEUE = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n"

BAD_QUEUES = [
    pytest.param(QUEUE.format(name="q", spec="{weight: 0}"), "documents[0].spec.weight", "between 1 and 65535",
                 id="weight zero would starve the queue"),
    pytest.param(QUEUE.format(name="q", spec="{capability: {cpu: 1}, guarantee: {resource: {cpu: 2}}}"),
                 "documents[0].spec.guarantee", "capability", id="a guarantee above the cap"),
    pytest.param(QUEUE.format(name="q", spec="{capability: {memory: 8Gx}}"), "documents[0].spec.capability.memory",
                 "malformed", id="a malformed capability quantity"),
    pytest.param(QUEUE.format(name="q", spec="{dequeueStrategy: fifo}"), "documents[0].spec.dequeueStrategy",
                 "not supported", id="a Volcano queue field the federation does not implement"),
    pytest.param(QUEUE.format(name="q", spec="{}") + "---\n" + QUEUE.format(name="q", spec="{}"),
                 "documents[1].metadata.name", "duplicate", id="the same queue twice"),
    pytest.param(QUEUE.format(name="q", spec="{}").replace("Queue\n", "Job\n"), "documents[0].kind", "unknown kind",
                 id="a job in a queue file"),
]


@pytest.mark.parametrize(("text", "path", "rule"), BAD_QUEUES)
def test_bad_queue_is_refused_with_its_field_path(text: str, path: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_queue_manifests(text)
    assert info.value.path == path
    assert rule in info.value.rule


def test_queue_create_takes_exactly_one_queue() -> None:
    two = QUEUE.format(name="a", spec="{}") + "---\n" + QUEUE.format(name="b", spec="{}")
    assert [q.name for q in load_queue_manifests(two)] == ["a", "b"]
    with pytest.raises(InvalidInput, match="expected one Queue"):
        load_queue_manifest(two)


def test_list_shaped_loaders_agree_with_the_single_ones() -> None:
    text = fixture("pytorch-llama-pretrain.yaml")
    assert load_jobs(text) == (load_manifests(text).job,)
    assert load_queues(fixture("queue-research.yaml")) == (load_queue_manifest(fixture("queue-research.yaml")),)
