"""Scenario files (see the scenario contract in the design notes): strict, whole-file loading.

A scenario fully determines a simulator run: federation, queues, workload (explicit and
seeded synthetic jobs), the communication model and injected faults. Loading is strict
— every key, type and range is checked and an unknown key is reported with its path —
because a silently ignored typo would change what a benchmark measures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path

import yaml

from federation.domain.errors import InvalidInput
from federation.domain.queues import Queue
from federation.domain.resources import Resources
from federation.sim import fields as f
from federation.sim.clusters import ClusterSpec, cluster
from federation.sim.workload import GenerateSpec, ScenarioJob, explicit_job, generate, generate_spec, reference_node

FAULT_KINDS = ("nodeFail", "nodeRecover", "clusterDown", "clusterUp", "podFail")
_TOP_KEYS = ("name", "seed", "clusters", "queues", "jobs", "generate", "commModel", "events")
_QUEUE_KEYS = ("name", "weight", "priority", "capability", "guarantee", "reclaimable", "parent")


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
    """Every parent is a queue of the scenario (or root) and the parents form a tree."""
    by_name = {q.name: q for q in queues}
    for i, q in enumerate(queues):
        if q.parent is not None and q.parent not in by_name:
            raise InvalidInput(f"queues[{i}].parent", f"unknown parent queue {q.parent!r} (a queue here, or root)")
        seen, cursor = {q.name}, q.parent
        while cursor is not None:
            if cursor in seen:
                raise InvalidInput(f"queues[{i}].parent", f"parent {q.parent!r} makes a cycle")
            seen.add(cursor)
            cursor = by_name[cursor].parent


def parse_scenario(document: object) -> Scenario:
    """Validate a parsed YAML document into a ``Scenario`` (raises ``InvalidInput``)."""
    data = f.strict(document, "", _TOP_KEYS, required=("name", "clusters"))
    name = f.string(data["name"], "name")
    seed = f.optional(data, "seed", 0, f.integer, "")
    clusters_raw = f.sequence(data["clusters"], "clusters")
    if not clusters_raw:
        raise InvalidInput("clusters", "at least one cluster is required")
    clusters = tuple(cluster(c, f"clusters[{i}]") for i, c in enumerate(clusters_raw))
    seen_nodes: dict[str, str] = {}
    for i, member in enumerate(clusters):
        if any(member.name == other.name for other in clusters[:i]):
            raise InvalidInput(f"clusters[{i}].name", f"duplicate cluster {member.name!r}")
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
    for i, qname in enumerate(queue_names):
        if qname in queue_names[:i]:
            raise InvalidInput(f"queues[{i}].name", f"duplicate queue {qname!r}")
    _check_parents(queues)
    cluster_names = [c.name for c in clusters]
    explicit: list[ScenarioJob] = []
    for i, raw in enumerate(f.listed(data, "jobs", "")):
        job = explicit_job(raw, f"jobs[{i}]", queue_names, cluster_names)
        if any(job.job.name == other.job.name for other in explicit):
            raise InvalidInput(f"jobs[{i}].name", f"duplicate job {job.job.name!r}")
        explicit.append(job)
    spec = f.optional(data, "generate", None, lambda v, p: generate_spec(v, p, queue_names), "")
    generated: tuple[ScenarioJob, ...] = ()
    if spec is not None and spec.count > 0:
        reference = reference_node([n.allocatable for c in clusters for n in c.nodes], "generate")
        generated = generate(spec, seed, reference, {j.job.name: j for j in explicit})
    order = sorted(enumerate([*explicit, *generated]), key=lambda item: (item[1].submit_at, item[0]))
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


def load_scenario(path_or_text: str | os.PathLike[str]) -> Scenario:
    """Load a scenario from a file path, a built-in scenario name, or YAML text.

    A string is a path when such a file exists, a built-in name (``demo``,
    ``fragmented``…) when one is shipped in the package, and YAML text otherwise.
    """
    text: str
    if isinstance(path_or_text, os.PathLike) or ("\n" not in path_or_text and Path(path_or_text).is_file()):
        text = Path(path_or_text).read_text(encoding="utf-8")
    elif "\n" not in path_or_text and path_or_text in builtin_scenarios():
        text = builtin_scenario_path(path_or_text).read_text(encoding="utf-8")
    else:
        text = path_or_text
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        raise InvalidInput(where, f"not valid YAML: {exc}") from exc
    if document is None or isinstance(document, str):
        raise InvalidInput("", "a scenario must be a YAML mapping (is the path right?)")
    return parse_scenario(document)


def builtin_scenarios() -> tuple[str, ...]:
    """Names of the scenarios shipped in ``federation/sim/scenarios``."""
    folder = package_files.files("federation.sim") / "scenarios"
    return tuple(sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")))


def builtin_scenario_path(name: str) -> Path:
    """Filesystem path of a shipped scenario (e.g. ``demo`` for ``federation demo``)."""
    return Path(str(package_files.files("federation.sim") / "scenarios" / f"{name}.yaml"))
