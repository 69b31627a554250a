"""Scenario files (see the scenario contract in the design notes): strict, whole-file loading.

A scenario fully determines a simulator run: federation, queues, workload (explicit and
seeded synthetic jobs), the communication model and injected faults. Loading is strict
— every key, type and range is checked and an unknown key is reported with its path —
because a silently ignored typo would change what a benchmark measures.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path

from federation.domain.errors import InvalidInput
from federation.domain.manifests import parse_yaml
from federation.domain.manifests_fields import INT32, integer
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.files import MIB, read_text
from federation.sim import fields as f
from federation.sim.clusters import ClusterSpec, cluster
from federation.sim.workload import GenerateSpec, ScenarioJob, explicit_job, generate, generate_spec, reference_node
from federation.wire.limits import DEFAULT_LIMITS

FAULT_KINDS = ("nodeFail", "nodeRecover", "clusterDown", "clusterUp", "podFail")
_TOP_KEYS = ("name", "seed", "clusters", "queues", "jobs", "generate", "commModel", "events")
_QUEUE_KEYS = ("name", "weight", "priority", "capability", "guarantee", "reclaimable", "parent")

# How much one scenario may ask the simulator to build (docs/design/simulator.md). Checked on
# the parsed document before anything is built: ``generate.count: 10**9`` drew jobs for
# hours and ``nodeGroups[].count: 10**9`` ended in MemoryError. A member cluster, a task
# and a job are bounded as the service bounds them (``wire/limits.py``); the totals keep a
# whole run within minutes and a few hundred MB.
MAX_SCENARIO_BYTES = 4 * MIB  # the largest shipped scenario is 84 KiB; PyYAML parses ~0.1 MiB/s
MAX_NODES = 50_000  # over all clusters
MAX_NODE_LABEL_ENTRIES = 2_000_000  # every node carries its group's labels
MAX_QUEUES = 10_000
MAX_JOBS = 100_000  # explicit and generated
MAX_PODS = 2_000_000  # replicas over all jobs (a generated job counts its largest draw)
MAX_EVENTS = 100_000
# Building a cluster's tree tests each distinct regexMatch/labelMatch selector against every
# node (about 2 µs a test): 5,000 patterns over 20,000 nodes took 220 s to load.
MAX_SELECTOR_SCANS = 10_000_000


@dataclass(frozen=True)
class FaultEvent:
    """``kind`` happens to ``target`` (a node, a cluster or, for podFail, a job) at ``at``."""

    at: float
    kind: str
    target: str


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    clusters: tuple[ClusterSpec, ...]
    queues: tuple[Queue, ...]
    jobs: tuple[ScenarioJob, ...]  # explicit and generated, by (submitAt, file order)
    slowdown_by_tier: tuple[tuple[int, float], ...] = ((1, 1.0),)
    events: tuple[FaultEvent, ...] = ()
    generate: GenerateSpec | None = field(default=None, compare=False)

    def slowdown(self, tier: int) -> float:
        """Runtime multiplier for a gang whose lowest common domain has ``tier``.

        Tiers above the map's largest use its largest; tiers between entries use the
        nearest entry below; tiers below every entry run at 1.0.
        """
        best = 1.0
        for key, value in sorted(self.slowdown_by_tier):
            if key <= tier:
                best = value
        return best

    def gang_slowdown(self, nodes: int, tier: int) -> float:
        """Runtime multiplier of a gang on ``nodes`` distinct nodes whose lowest common
        domain has ``tier``: a gang on one node never crosses the fabric."""
        return 1.0 if nodes <= 1 else self.slowdown(tier)


def _queue(value: object, path: str) -> Queue:
    data = f.strict(value, path, _QUEUE_KEYS, required=("name",))

    def quantities(raw: object, sub: str) -> Resources:
        return Resources.parse(f.mapping(raw, sub), sub)

    try:
        return Queue(
            name=f.string(data["name"], f.at(path, "name")),
            weight=f.optional(data, "weight", 1, lambda v, p: f.integer(v, p, minimum=1, maximum=65535), path),
            priority=f.optional(data, "priority", 0, f.integer, path),
            capability=f.optional(data, "capability", None, quantities, path),
            guarantee=f.optional(data, "guarantee", Resources(), quantities, path),
            reclaimable=f.optional(data, "reclaimable", True, f.boolean, path),
            parent=f.optional(data, "parent", None, f.string, path),
        )
    except InvalidInput as exc:
        if exc.path.startswith(path):
            raise
        raise exc.under(path) from exc


def _event(value: object, path: str) -> FaultEvent:
    data = f.strict(value, path, ("at", "kind", "target"), required=("at", "kind", "target"))
    kind = f.string(data["kind"], f.at(path, "kind"))
    if kind not in FAULT_KINDS:
        raise InvalidInput(f.at(path, "kind"), f"must be one of {', '.join(FAULT_KINDS)}")
    return FaultEvent(
        at=f.number(data["at"], f.at(path, "at"), minimum=0.0),
        kind=kind,
        target=f.string(data["target"], f.at(path, "target")),
    )


def _slowdowns(value: object, path: str) -> tuple[tuple[int, float], ...]:
    data = f.strict(value, path, ("slowdownByTier",), required=("slowdownByTier",))
    raw = data["slowdownByTier"]
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidInput(f.at(path, "slowdownByTier"), "must be a non-empty mapping of tier to multiplier")
    out: list[tuple[int, float]] = []
    for key, multiplier in raw.items():
        sub = f"{path}.slowdownByTier.{key}"
        tier = f.int_key(key, sub)
        if tier < 0:
            raise InvalidInput(sub, "tier must be >= 0")
        out.append((tier, f.number(multiplier, sub, positive=True)))
    return tuple(sorted(out))


def _check_targets(events: tuple[FaultEvent, ...], clusters: tuple[ClusterSpec, ...], jobs: set[str]) -> None:
    node_names = {n.name for c in clusters for n in c.nodes}
    cluster_names = {c.name for c in clusters}
    for i, event in enumerate(events):
        known = node_names if event.kind.startswith("node") else jobs if event.kind == "podFail" else cluster_names
        what = "node" if event.kind.startswith("node") else "job" if event.kind == "podFail" else "cluster"
        if event.target not in known:
            raise InvalidInput(f"events[{i}].target", f"unknown {what} {event.target!r}")


def _check_parents(queues: tuple[Queue, ...]) -> None:
    """Every parent is a queue of the scenario (or root) and the parents form a tree.

    Linear: each queue's chain is walked once, up to the first queue already known to
    reach the root (a 10,000-queue chain walked from every queue took 5e7 steps).
    """
    by_name = {q.name: q for q in queues}
    rooted: set[str] = set()
    for i, q in enumerate(queues):
        if q.parent is not None and q.parent not in by_name:
            raise InvalidInput(f"queues[{i}].parent", f"unknown parent queue {q.parent!r} (a queue here, or root)")
    for i, q in enumerate(queues):
        chain, cursor = {q.name}, q.parent
        while cursor is not None and cursor not in rooted:
            if cursor in chain:
                raise InvalidInput(f"queues[{i}].parent", f"parent {q.parent!r} makes a cycle")
            chain.add(cursor)
            cursor = by_name[cursor].parent
        rooted.update(chain)


def _int(value: object) -> int:
    """``value`` if it is a non-negative integer, else 0 (a wrong value is the strict readers' to refuse)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _items(data: Mapping[str, object], key: str) -> list[tuple[int, Mapping[str, object]]]:
    value = data.get(key)
    return [(i, item) for i, item in enumerate(value) if isinstance(item, Mapping)] if isinstance(value, list) else []


def _at_most(path: str, value: int, limit: int, what: str) -> None:
    if value > limit:
        raise InvalidInput(path, f"{value} is over the limit of {limit} {what}")


def _check_nodes(data: Mapping[str, object]) -> None:
    limits = DEFAULT_LIMITS
    nodes = label_entries = 0
    for i, member in _items(data, "clusters"):
        in_cluster = 0
        for j, group in _items(member, "nodeGroups"):
            path = f"clusters[{i}].nodeGroups[{j}]"
            count = _int(group.get("count"))
            in_cluster += count
            nodes += count
            _at_most(f"{path}.count", in_cluster, limits.max_snapshot_nodes, "nodes per cluster")
            _at_most(f"{path}.count", nodes, MAX_NODES, "nodes in a scenario")
            labels = group.get("labels")
            per_node = len(labels) if isinstance(labels, Mapping) else 0
            _at_most(f"{path}.labels", per_node, limits.max_node_labels, "labels per node")
            label_entries += count * per_node
            _at_most(f"{path}.labels", label_entries, MAX_NODE_LABEL_ENTRIES, "node labels in a scenario")
        hyper = member.get("hyperNodes")
        if isinstance(hyper, list):
            _at_most(f"clusters[{i}].hyperNodes", len(hyper), limits.max_snapshot_hypernodes, "HyperNodes per cluster")
            _at_most(f"clusters[{i}].hyperNodes", _scanning_selectors(hyper) * in_cluster, MAX_SELECTOR_SCANS,
                     "node matches (distinct regexMatch and labelMatch selectors times the cluster's nodes)")


def _scanning_selectors(hypernodes: list[object]) -> int:
    """Distinct member selectors that test every node of the cluster (regexMatch, labelMatch)."""
    seen: set[str] = set()
    for hn in hypernodes:
        spec = hn.get("spec") if isinstance(hn, Mapping) else None
        members = spec.get("members") if isinstance(spec, Mapping) else None
        for m in members if isinstance(members, list) else ():
            selector = m.get("selector") if isinstance(m, Mapping) else None
            if isinstance(selector, Mapping):
                seen.update(repr(selector[k]) for k in ("regexMatch", "labelMatch") if k in selector)
    return len(seen)


def _largest_generated_job(spec: Mapping[str, object]) -> tuple[str, int]:
    """The pods of the largest job ``generate`` may draw, and the path of that draw."""
    per_pod = _int(spec.get("gpusPerPod")) or 8
    mix = spec.get("gpusPerJob")
    gpus = [(key, _int(key if isinstance(key, int) else int(key) if isinstance(key, str) and key.isdigit()
                       and len(key) < 100 else 0))
            for key in mix] if isinstance(mix, Mapping) else []
    key, most = max(gpus, key=lambda item: item[1], default=("", 0))
    return f"generate.gpusPerJob.{key}", math.ceil(most / per_pod)


def _check_workload(data: Mapping[str, object]) -> None:
    limits = DEFAULT_LIMITS
    jobs = data.get("jobs")
    explicit = len(jobs) if isinstance(jobs, list) else 0
    _at_most("jobs", explicit, MAX_JOBS, "jobs in a scenario")
    pods = 0
    for i, job in _items(data, "jobs"):
        tasks = _items(job, "tasks")
        _at_most(f"jobs[{i}].tasks", len(tasks), limits.max_tasks_per_job, "tasks per job")
        in_job = 0
        for j, task in tasks:
            replicas = _int(task.get("replicas"))
            _at_most(f"jobs[{i}].tasks[{j}].replicas", replicas, limits.max_replicas_per_task, "replicas per task")
            in_job += replicas
        _at_most(f"jobs[{i}].tasks", in_job, limits.max_replicas_per_job, "replicas per job (sum over tasks)")
        pods += in_job
    _at_most("jobs", pods, MAX_PODS, "pods in a scenario (replicas over all jobs)")
    spec = data.get("generate")
    if isinstance(spec, Mapping):
        count = _int(spec.get("count"))
        _at_most("generate.count", explicit + count, MAX_JOBS, "jobs in a scenario (explicit and generated)")
        path, largest = _largest_generated_job(spec)
        _at_most(path, largest, limits.max_replicas_per_task, "pods per generated job (gpusPerJob / gpusPerPod)")
        _at_most("generate.count", pods + count * largest, MAX_PODS,
                 "pods in a scenario (replicas over all jobs, a generated job counted at its largest draw)")
    for key, limit in (("queues", MAX_QUEUES), ("events", MAX_EVENTS)):
        items = data.get(key)
        if isinstance(items, list):
            _at_most(key, len(items), limit, f"{key} in a scenario")
    _check_priorities(data)


def _check_priorities(data: Mapping[str, object]) -> None:
    """Priorities travel as int32 (Volcano's, and the wire's): the demo sends each job and
    queue to the service, where ``priority: 10**30`` was a ``Value out of range`` traceback."""
    for key in ("jobs", "queues"):
        for i, item in _items(data, key):
            value = item.get("priority")
            if isinstance(value, int) and not isinstance(value, bool):
                integer(value, f"{key}[{i}].priority", wire=INT32)
    spec = data.get("generate")
    mix = spec.get("priorityMix") if isinstance(spec, Mapping) else None
    for key in mix if isinstance(mix, Mapping) else ():
        integer(f.int_key(key, f"generate.priorityMix.{key}"), f"generate.priorityMix.{key}", wire=INT32)


def parse_scenario(document: object) -> Scenario:
    """Validate a parsed YAML document into a ``Scenario`` (raises ``InvalidInput``).

    The sizes are checked first (``MAX_*``), on the document as parsed, so that nothing
    is built for a scenario that would take hours or gigabytes.
    """
    data = f.strict(document, "", _TOP_KEYS, required=("name", "clusters"))
    _check_nodes(data)
    _check_workload(data)
    name = f.string(data["name"], "name")
    seed = f.optional(data, "seed", 0, f.integer, "")
    clusters_raw = f.sequence(data["clusters"], "clusters")
    if not clusters_raw:
        raise InvalidInput("clusters", "at least one cluster is required")
    clusters = tuple(cluster(c, f"clusters[{i}]") for i, c in enumerate(clusters_raw))
    seen_nodes: dict[str, str] = {}
    seen_clusters: set[str] = set()
    for i, member in enumerate(clusters):
        if member.name in seen_clusters:
            raise InvalidInput(f"clusters[{i}].name", f"duplicate cluster {member.name!r}")
        seen_clusters.add(member.name)
        for node in member.nodes:
            if node.name in seen_nodes:
                raise InvalidInput(f"clusters[{i}].nodeGroups",
                                   f"node {node.name!r} also exists in cluster {seen_nodes[node.name]!r}")
            seen_nodes[node.name] = member.name
    queues_raw = f.optional(data, "queues", None, f.sequence, "")
    queues = (Queue("default"),) if queues_raw is None else tuple(
        _queue(q, f"queues[{i}]") for i, q in enumerate(queues_raw))
    if not queues:
        raise InvalidInput("queues", "at least one queue is required")
    queue_names = [q.name for q in queues]
    if len(set(queue_names)) < len(queue_names):
        i = next(i for i, qname in enumerate(queue_names) if qname in queue_names[:i])
        raise InvalidInput(f"queues[{i}].name", f"duplicate queue {queue_names[i]!r}")
    _check_parents(queues)
    cluster_names = [c.name for c in clusters]
    explicit: dict[str, ScenarioJob] = {}
    for i, raw in enumerate(f.listed(data, "jobs", "")):
        job = explicit_job(raw, f"jobs[{i}]", queue_names, cluster_names)
        if job.job.name in explicit:
            raise InvalidInput(f"jobs[{i}].name", f"duplicate job {job.job.name!r}")
        explicit[job.job.name] = job
    spec = f.optional(data, "generate", None, lambda v, p: generate_spec(v, p, queue_names), "")
    generated: tuple[ScenarioJob, ...] = ()
    if spec is not None and spec.count > 0:
        reference = reference_node([n.allocatable for c in clusters for n in c.nodes], "generate")
        generated = generate(spec, seed, reference, explicit)
    order = sorted(enumerate([*explicit.values(), *generated]), key=lambda item: (item[1].submit_at, item[0]))
    jobs = tuple(job for _, job in order)
    events = tuple(_event(e, f"events[{i}]") for i, e in enumerate(f.listed(data, "events", "")))
    _check_targets(events, clusters, {j.job.name for j in jobs})
    return Scenario(
        name=name,
        seed=seed,
        clusters=clusters,
        queues=queues,
        jobs=jobs,
        slowdown_by_tier=f.optional(data, "commModel", ((1, 1.0),), _slowdowns, ""),
        events=tuple(sorted(events, key=lambda e: e.at)),
        generate=spec,
    )


def load_scenario(path_or_text: str | os.PathLike[str], source: str = "--scenario") -> Scenario:
    """Load a scenario from a file path, a built-in scenario name, or YAML text.

    A string with a newline is YAML text; any other is a path when such a file exists,
    else the name of a built-in scenario (``demo``, ``fragmented``…). A file is read
    bounded (``MAX_SCENARIO_BYTES``, ``federation/files.py``); refusals of the file itself
    name ``source`` (the flag that gave it), those of its content the field path.
    """
    text: str
    if isinstance(path_or_text, os.PathLike):
        text = read_text(os.fspath(path_or_text), source, MAX_SCENARIO_BYTES)
    elif "\n" in path_or_text:
        text = path_or_text
    elif os.path.lexists(path_or_text):
        text = read_text(path_or_text, source, MAX_SCENARIO_BYTES)
    elif path_or_text in builtin_scenarios():
        text = builtin_scenario_path(path_or_text).read_text(encoding="utf-8")
    else:
        raise InvalidInput(source, f"{path_or_text}: no such file or built-in scenario "
                                   f"(built-in: {', '.join(builtin_scenarios())})")
    documents = parse_yaml(text)
    if len(documents) > 1:
        raise InvalidInput("documents[1]", f"a scenario is one YAML document, found {len(documents)}")
    if not documents or not isinstance(documents[0], Mapping):
        got = type(documents[0]).__name__ if documents else "nothing"
        raise InvalidInput("", f"a scenario must be a YAML mapping, got {got}")
    return parse_scenario(documents[0])


def builtin_scenarios() -> tuple[str, ...]:
    """Names of the scenarios shipped in ``federation/sim/scenarios``."""
    folder = package_files.files("federation.sim") / "scenarios"
    return tuple(sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")))


def builtin_scenario_path(name: str) -> Path:
    """Filesystem path of a shipped scenario (e.g. ``demo`` for ``federation demo``)."""
    return Path(str(package_files.files("federation.sim") / "scenarios" / f"{name}.yaml"))
