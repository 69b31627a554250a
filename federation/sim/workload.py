"""Scenario workloads: explicit jobs and synthetic jobs drawn from the scenario seed.

Synthetic jobs follow the Philly-trace shape the scenarios ask for: Poisson arrivals,
a discrete distribution of GPUs per job, pods of at most ``gpusPerPod`` GPUs, CPU and
memory that scale with GPUs in the proportion of the fleet's largest GPU node (so a full
pod fills a full node and never strands GPUs behind a CPU shortage), log-uniform
durations and mixes of queue, priority and topology. Every draw comes from one
``random.Random(seed)`` in a fixed order, so the same file always yields the same jobs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from federation.domain.errors import InvalidInput
from federation.domain.jobs import Job, NetworkTopology, Task
from federation.domain.manifests_fields import duration_seconds
from federation.domain.manifests_volcano import TOPOLOGY_WAIT_ANNOTATION
from federation.domain.propagation import ClusterAffinity, PropagationPolicy
from federation.domain.resources import CPU, GPU, MEMORY, Resources
from federation.domain.scheduling import template_for
from federation.sim import fields as f

_JOB_KEYS = (
    "name", "queue", "priority", "submitAt", "durationSeconds", "minAvailable", "tasks", "networkTopology",
    "clusterAffinity", "annotations",
)
_TASK_KEYS = ("name", "replicas", "resources", "minAvailable", "nodeSelector", "affinity", "tolerations")
# Job annotations a scenario may carry (each is honoured; any other is refused, as a typo would
# otherwise silently change what a benchmark measures).
_ANNOTATIONS = (TOPOLOGY_WAIT_ANNOTATION,)
_GENERATE_KEYS = (
    "count", "arrivalPerMinute", "gpusPerJob", "gpusPerPod", "durationSeconds", "queueMix", "priorityMix",
    "topologyMix", "highestTierAllowed",
)
_MIB = 1 << 20


@dataclass(frozen=True)
class ScenarioJob:
    """A job, when it arrives, and how long it runs in the lowest tier."""

    job: Job
    submit_at: float
    duration_seconds: float
    generated: bool = False


@dataclass(frozen=True)
class GenerateSpec:
    count: int
    arrival_per_minute: float
    gpus_per_job: tuple[tuple[int, float], ...]
    gpus_per_pod: int
    duration_range: tuple[float, float]
    queue_mix: tuple[tuple[str, float], ...]
    priority_mix: tuple[tuple[int, float], ...]
    topology_mix: tuple[tuple[str, float], ...]
    highest_tier_allowed: tuple[tuple[int, float], ...]


def _domain_path(path: str) -> str:
    """Domain ``Job`` errors name manifest paths (``spec.minAvailable``); map to scenario keys."""
    for prefix in ("metadata.", "spec."):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def _task(value: object, path: str) -> Task:
    """One task; nodeSelector, affinity and tolerations have Kubernetes' pod-spec shapes and
    are carried as the task's pod template (``domain/scheduling.py`` reads them)."""
    data = f.strict(value, path, _TASK_KEYS, required=("name", "replicas", "resources"))
    resources = Resources.parse(f.mapping(data["resources"], f.at(path, "resources")), f.at(path, "resources"))
    selector = f.labelled(data, "nodeSelector", path)
    affinity = dict(f.mapping(data["affinity"], f.at(path, "affinity"))) if "affinity" in data else None
    tolerations = [dict(f.mapping(t, f.at(f.at(path, "tolerations"), i)))
                   for i, t in enumerate(f.listed(data, "tolerations", path))]
    try:
        return Task(
            name=f.string(data["name"], f.at(path, "name")),
            replicas=f.integer(data["replicas"], f.at(path, "replicas"), minimum=1),
            resources=resources,
            min_available=f.optional(data, "minAvailable", None, lambda v, p: f.integer(v, p, minimum=0), path),
            template_json=template_for(selector, affinity, tolerations),
        )
    except InvalidInput as exc:
        if exc.path.startswith(path):
            raise
        raise InvalidInput(f.at(path, exc.path.removeprefix("template.spec.")), exc.rule) from exc


def _annotations(value: object, path: str) -> float | None:
    """The job's topology wait from ``annotations`` (the only annotation a scenario honours)."""
    found = f.labels(value, path)
    for key in found:
        if key not in _ANNOTATIONS:
            raise InvalidInput(f"{path}[{key}]", f"not supported (supported: {', '.join(_ANNOTATIONS)})")
    if TOPOLOGY_WAIT_ANNOTATION not in found:
        return None
    return duration_seconds(found[TOPOLOGY_WAIT_ANNOTATION], f"{path}[{TOPOLOGY_WAIT_ANNOTATION}]")


def _topology(value: object, path: str) -> NetworkTopology:
    data = f.strict(value, path, ("mode", "highestTierAllowed", "highestTierName"))
    mode = f.optional(data, "mode", "hard", f.string, path)
    if mode not in ("hard", "soft"):
        raise InvalidInput(f.at(path, "mode"), "must be hard or soft")
    try:
        return NetworkTopology(
            mode=mode,
            highest_tier_allowed=f.optional(data, "highestTierAllowed", None, lambda v, p: f.integer(v, p, minimum=1),
                                            path),
            highest_tier_name=f.optional(data, "highestTierName", None, f.string, path),
        )
    except InvalidInput as exc:
        if exc.path.startswith(path):
            raise
        raise exc.under(path) from exc


def _affinity(value: object, path: str, clusters: Sequence[str]) -> PropagationPolicy:
    data = f.strict(value, path, ("clusterNames", "labelSelector"))
    names: list[str] = []
    for i, raw in enumerate(f.listed(data, "clusterNames", path)):
        sub = f.at(f.at(path, "clusterNames"), i)
        name = f.string(raw, sub)
        if name not in clusters:
            raise InvalidInput(sub, f"unknown cluster {name!r}")
        names.append(name)
    selector = f.strict(data.get("labelSelector") or {}, f.at(path, "labelSelector"), ("matchLabels",))
    match = f.labelled(selector, "matchLabels", f.at(path, "labelSelector"))
    return PropagationPolicy(cluster_affinity=ClusterAffinity(cluster_names=tuple(names), match_labels=match))


def explicit_job(value: object, path: str, queues: Sequence[str], clusters: Sequence[str]) -> ScenarioJob:
    """One ``jobs[i]`` entry."""
    data = f.strict(value, path, _JOB_KEYS, required=("name", "queue", "durationSeconds", "tasks"))
    queue = f.string(data["queue"], f.at(path, "queue"))
    if queue not in queues:
        raise InvalidInput(f.at(path, "queue"), f"unknown queue {queue!r}")
    tasks_raw = f.sequence(data["tasks"], f.at(path, "tasks"))
    if not tasks_raw:
        raise InvalidInput(f.at(path, "tasks"), "at least one task is required")
    tasks = tuple(_task(t, f.at(f.at(path, "tasks"), i)) for i, t in enumerate(tasks_raw))
    topology = f.optional(data, "networkTopology", None, _topology, path)
    propagation = f.optional(data, "clusterAffinity", None, lambda v, p: _affinity(v, p, clusters), path)
    try:
        job = Job(
            name=f.string(data["name"], f.at(path, "name")),
            queue=queue,
            tasks=tasks,
            min_available=f.optional(data, "minAvailable", None, lambda v, p: f.integer(v, p, minimum=1), path),
            priority=f.optional(data, "priority", 0, f.integer, path),
            network_topology=topology,
            propagation=propagation,
            topology_wait_seconds=f.optional(data, "annotations", None, _annotations, path),
        )
    except InvalidInput as exc:
        if exc.path.startswith(path):
            raise
        raise InvalidInput(f.at(path, _domain_path(exc.path)), exc.rule) from exc
    return ScenarioJob(
        job,
        submit_at=f.optional(data, "submitAt", 0.0, lambda v, p: f.number(v, p, minimum=0.0), path),
        duration_seconds=f.number(data["durationSeconds"], f.at(path, "durationSeconds"), positive=True),
    )


def _duration(value: object, path: str) -> tuple[float, float]:
    data = f.strict(value, path, ("logUniform",), required=("logUniform",))
    bounds = f.sequence(data["logUniform"], f.at(path, "logUniform"))
    if len(bounds) != 2:
        raise InvalidInput(f.at(path, "logUniform"), "must be [low, high]")
    low = f.number(bounds[0], f.at(path, "logUniform[0]"), positive=True)
    high = f.number(bounds[1], f.at(path, "logUniform[1]"), positive=True)
    if high < low:
        raise InvalidInput(f.at(path, "logUniform"), "high must be >= low")
    return (low, high)


def _positive_int_key(key: object, path: str) -> int:
    value = f.int_key(key, path)
    if value < 1:
        raise InvalidInput(path, "must be >= 1")
    return value


def generate_spec(value: object, path: str, queues: Sequence[str]) -> GenerateSpec:
    """The ``generate`` section (mixes default to: uniform queues, priority 0, no topology)."""
    data = f.strict(value, path, _GENERATE_KEYS, required=("count", "arrivalPerMinute", "gpusPerJob"))

    def queue_key(key: object, sub: str) -> str:
        name = f.string(key, sub)
        if name not in queues:
            raise InvalidInput(sub, f"unknown queue {name!r}")
        return name

    def topology_key(key: object, sub: str) -> str:
        if key not in ("hard", "soft", "none"):
            raise InvalidInput(sub, "must be hard, soft or none")
        return str(key)

    uniform = tuple((q, 1.0 / len(queues)) for q in queues)
    return GenerateSpec(
        count=f.integer(data["count"], f.at(path, "count"), minimum=0),
        arrival_per_minute=f.number(data["arrivalPerMinute"], f.at(path, "arrivalPerMinute"), positive=True),
        gpus_per_job=f.distribution(data["gpusPerJob"], f.at(path, "gpusPerJob"), _positive_int_key),
        gpus_per_pod=f.optional(data, "gpusPerPod", 8, lambda v, p: f.integer(v, p, minimum=1), path),
        duration_range=f.optional(data, "durationSeconds", (600.0, 60000.0), _duration, path),
        queue_mix=f.optional(data, "queueMix", uniform, lambda v, p: f.distribution(v, p, queue_key), path),
        priority_mix=f.optional(data, "priorityMix", ((0, 1.0),), lambda v, p: f.distribution(v, p, f.int_key), path),
        topology_mix=f.optional(data, "topologyMix", (("none", 1.0),),
                                lambda v, p: f.distribution(v, p, topology_key), path),
        highest_tier_allowed=f.optional(data, "highestTierAllowed", ((1, 1.0),),
                                        lambda v, p: f.distribution(v, p, _positive_int_key), path),
    )


def _draw(rng: random.Random, choices: Sequence[tuple[object, float]]) -> object:
    point = rng.random()
    acc = 0.0
    for outcome, probability in choices:
        acc += probability
        if point < acc:
            return outcome
    return choices[-1][0]


def reference_node(allocatables: Sequence[Resources], path: str) -> Resources:
    """The GPU node shape that sets generated CPU/memory per GPU: most GPUs, first on ties."""
    best: Resources | None = None
    for alloc in allocatables:
        if alloc.gpus > 0 and (best is None or alloc.gpus > best.gpus):
            best = alloc
    if best is None:
        raise InvalidInput(path, "generated jobs need at least one node with nvidia.com/gpu")
    return best


def pod_requests(gpus: int, reference: Resources) -> Resources:
    """One pod's requests: CPU and memory in the reference node's proportion per GPU."""
    cpu = reference.get(CPU) * gpus // reference.gpus
    memory = (reference.get(MEMORY) * gpus // reference.gpus) // _MIB * _MIB
    return Resources({GPU: gpus, CPU: cpu, MEMORY: memory})


def generate(
    spec: GenerateSpec, seed: int, reference: Resources, taken: Mapping[str, object]
) -> tuple[ScenarioJob, ...]:
    """Draw ``spec.count`` jobs; names ``gen-00000``… must not collide with ``taken``."""
    rng = random.Random(seed)
    rate = spec.arrival_per_minute / 60.0
    low, high = math.log(spec.duration_range[0]), math.log(spec.duration_range[1])
    now = 0.0
    out: list[ScenarioJob] = []
    for i in range(spec.count):
        now += rng.expovariate(rate)
        gpus = int(str(_draw(rng, spec.gpus_per_job)))
        pods = max(1, math.ceil(gpus / spec.gpus_per_pod))
        per_pod = math.ceil(gpus / pods)
        duration = math.exp(rng.uniform(low, high))
        queue = str(_draw(rng, spec.queue_mix))
        priority = int(str(_draw(rng, spec.priority_mix)))
        mode = str(_draw(rng, spec.topology_mix))
        tier = int(str(_draw(rng, spec.highest_tier_allowed)))
        name = f"gen-{i:05d}"
        if name in taken:
            raise InvalidInput("generate", f"generated job name {name!r} collides with an explicit job")
        topology = None if mode == "none" else NetworkTopology(mode=mode, highest_tier_allowed=tier)
        task = Task("worker", pods, pod_requests(per_pod, reference))
        job = Job(name=name, queue=queue, tasks=(task,), priority=priority, network_topology=topology)
        out.append(ScenarioJob(job, round(now, 3), round(duration, 3), generated=True))
    return tuple(out)
