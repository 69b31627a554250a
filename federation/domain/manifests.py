"""Load the YAML users already write for Volcano and Karmada into domain objects.

``fedctl submit -f FILE`` takes one multi-document file holding exactly one Volcano
``batch.volcano.sh/v1alpha1`` Job and at most one Karmada ``policy.karmada.io/v1alpha1``
(Cluster)PropagationPolicy for it; ``fedctl queue create -f`` takes Volcano
``scheduling.volcano.sh/v1beta1`` Queues. Every refusal is an ``InvalidInput`` whose path
starts at the document (``documents[0].spec.tasks[1].replicas``); a YAML syntax error has
path ``""`` and names the parser's line and column.

Job priority: the integer annotation ``federation.io/priority`` if present, else the
built-in table ``PRIORITY_CLASSES`` keyed by ``spec.priorityClassName`` (no class = 0,
low 100, normal 1000, high 10000, critical 100000, plus the two Kubernetes system
classes); an unknown class is refused. Unknown keys in a Job's ``spec`` or tasks are
refused so that a typo (``minAvaliable``) never silently drops a constraint
(docs/design/compatibility.md lists what each accepted field does). Queue owners
(tenants) come from the annotation ``federation.io/owners`` (comma-separated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from federation.domain.errors import InvalidInput
from federation.domain.jobflows import FLOW_API, FLOW_KINDS, flow_jobs
from federation.domain.jobs import Job
from federation.domain.manifests_fields import job_namespace, mapping, string_map
from federation.domain.manifests_karmada import parse_propagation
from federation.domain.manifests_volcano import (
    OWNERS_ANNOTATION,
    PRIORITY_ANNOTATION,
    PRIORITY_CLASSES,
    explicit_priority,
    parse_job,
    parse_queue,
    parse_workload,
    resolve_priority_class,
)
from federation.domain.pod_security import TEMPLATE_MAX_DEPTH
from federation.domain.propagation import PropagationPolicy
from federation.domain.queues import Queue
from federation.domain.workloads import WORKLOAD_API, WORKLOAD_KINDS

__all__ = [
    "OWNERS_ANNOTATION",
    "PRIORITY_ANNOTATION",
    "PRIORITY_CLASSES",
    "Submission",
    "explicit_priority",
    "load_documents",
    "load_jobs",
    "load_manifests",
    "load_queue_manifest",
    "load_queue_manifests",
    "load_queues",
    "parse_yaml",
    "resolve_priority_class",
]

JOB_API = "batch.volcano.sh/v1alpha1"
POLICY_API = "policy.karmada.io/v1alpha1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
_SUBMISSION_KINDS = {"Job": JOB_API, "Deployment": WORKLOAD_API, "StatefulSet": WORKLOAD_API,
                     "PropagationPolicy": POLICY_API, "ClusterPropagationPolicy": POLICY_API}
_QUEUE_KINDS = {"Queue": QUEUE_API}


@dataclass(frozen=True)
class Submission:
    """One job to submit; ``job.propagation`` is the same policy as ``propagation``."""

    job: Job
    propagation: PropagationPolicy | None = None
    # The Job sets its priority (annotation); else the server resolves priorityClassName.
    explicit_priority: bool = False


# How deep a manifest document may nest: a pod template may nest ``TEMPLATE_MAX_DEPTH``
# levels (the server's hard cap) and sits a few levels down a Job, JobTemplate or Deployment.
MANIFEST_MAX_DEPTH = TEMPLATE_MAX_DEPTH + 32


_TOO_DEEP = f"is nested too deep (the limit is {MANIFEST_MAX_DEPTH} levels)"
# Values a document may hold once its aliases are expanded. A Kubernetes object is at most
# 1.5 MiB (etcd's limit), at least a byte or two of JSON per value; ten aliases of ten
# aliases, nine levels down (a "billion laughs" in 400 bytes), stay shared while loaded but
# whatever walks or serialises the document (a pod template becomes JSON) visits 10**9 values.
MANIFEST_MAX_VALUES = 1_000_000


class _RefusedError(Exception):
    """A document nests deeper than ``MANIFEST_MAX_DEPTH``, through a recursive alias, or
    repeats a key in one mapping."""


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` refusing documents deeper than ``MANIFEST_MAX_DEPTH`` and duplicate keys.

    Why in the composer: PyYAML composes recursively, so 2,000 nested ``[`` end in a
    ``RecursionError``; counting depth on the way down stops it early, and a height per
    node on the way up (aliases reuse their anchor's) also bounds alias chains and refuses
    recursive aliases (``&a [*a]``) in time linear in the text, before anything walks them.
    The same pass counts the values each node holds with its aliases expanded and refuses
    more than ``MANIFEST_MAX_VALUES`` (an alias "bomb"). A key repeated in one mapping is
    refused there too: PyYAML keeps the last value and drops the first without a word
    (``weight: 3`` then ``weight: 7`` applied weight 7), where kubectl refuses the file.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._heights: dict[int, int] = {}
        self._sizes: dict[int, int] = {}

    def compose_document(self) -> yaml.Node | None:
        self._heights, self._sizes = {}, {}  # nodes of this document stay alive, so their ids are unique
        return super().compose_document()

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        alias = self.check_event(yaml.AliasEvent)
        if self._depth >= MANIFEST_MAX_DEPTH:
            raise _RefusedError
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None and not alias:
            self._heights[id(node)] = self._height(node)
            if isinstance(node, yaml.MappingNode):
                _unique_keys(node)
        return node

    def _height(self, node: yaml.Node) -> int:
        if isinstance(node, yaml.ScalarNode):
            return 0
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        heights = [self._heights.get(id(child)) for child in children]
        if None in heights:  # an alias to a node still being composed: a cycle
            raise _RefusedError("refers to itself through a YAML alias")
        height = 1 + max((h for h in heights if h is not None), default=0)
        if height > MANIFEST_MAX_DEPTH:
            raise _RefusedError
        size = 1 + sum(self._sizes.get(id(child), 1) for child in children)
        if size > MANIFEST_MAX_VALUES:
            raise _RefusedError(f"holds over {MANIFEST_MAX_VALUES} values once its YAML aliases are expanded")
        self._sizes[id(node)] = size
        return height


def _unique_keys(node: yaml.MappingNode) -> None:
    seen: set[tuple[str, str]] = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode):
            if (key.tag, key.value) in seen:
                raise _RefusedError(f"duplicate key {key.value!r} at line {key.start_mark.line + 1}, column "
                                    f"{key.start_mark.column + 1} (a mapping names each key once)")
            seen.add((key.tag, key.value))


def parse_yaml(text: str) -> list[object]:
    """Every document of ``text``, each bounded in depth and without duplicate keys.

    Refusals are ``InvalidInput``: a syntax error has path ``""`` and names the line and
    column; a too-deep document or a duplicate key names the document by its index.
    """
    raw: list[object] = []
    try:
        for doc in yaml.load_all(text, Loader=_BoundedLoader):  # a SafeLoader
            raw.append(doc)
    except _RefusedError as exc:
        raise InvalidInput(f"documents[{len(raw)}]", str(exc) or _TOO_DEEP) from None
    except RecursionError:
        raise InvalidInput(f"documents[{len(raw)}]", _TOO_DEEP) from None
    except ValueError as exc:  # a scalar Python cannot build: a 5,000-digit integer, a 13th month
        reason = str(exc).split(";")[0]
        raise InvalidInput(f"documents[{len(raw)}]", f"holds a value that cannot be read: {reason}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InvalidInput("", f"invalid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise InvalidInput("", f"invalid YAML: {exc}") from None
    return raw


def load_documents(text: str) -> list[tuple[int, Mapping[str, object]]]:
    """Non-empty documents with their index in the file (``---`` separators count)."""
    return [(i, mapping(doc, f"documents[{i}]")) for i, doc in enumerate(parse_yaml(text)) if doc is not None]


def _check_kind(doc: Mapping[str, object], index: int, kinds: Mapping[str, str], hint: str) -> str:
    kind = doc.get("kind")
    if not isinstance(kind, str) or kind not in kinds:
        expected = ", ".join(f"{k} ({api})" for k, api in kinds.items())
        raise InvalidInput(f"documents[{index}].kind", f"unknown kind {kind!r} (expected {expected}){hint}")
    api = doc.get("apiVersion")
    if api != kinds[kind]:
        raise InvalidInput(f"documents[{index}].apiVersion",
                           f"{kind} must be apiVersion {kinds[kind]}, got {api!r}")
    return kind


def load_manifests(text: str) -> Submission:
    """Parse a submission file: exactly one Volcano Job and optionally its PropagationPolicy."""
    job_doc: tuple[int, Mapping[str, object]] | None = None
    policy_doc: tuple[int, Mapping[str, object]] | None = None
    for index, doc in load_documents(text):
        kind = _check_kind(doc, index, _SUBMISSION_KINDS, " (queues go through `fedctl queue create -f`)"
                           if doc.get("kind") == "Queue" else "")
        if kind in ("Job", *WORKLOAD_KINDS):
            if job_doc is not None:
                raise InvalidInput(f"documents[{index}].kind",
                                   "only one Job, Deployment or StatefulSet per file "
                                   f"(another at documents[{job_doc[0]}])")
            job_doc = (index, doc)
        else:
            if policy_doc is not None:
                raise InvalidInput(f"documents[{index}].kind",
                                   f"only one PropagationPolicy per file (another at documents[{policy_doc[0]}])")
            policy_doc = (index, doc)
    if job_doc is None:
        raise InvalidInput("documents", f"no Job ({JOB_API}) found")
    job_path = f"documents[{job_doc[0]}]"
    meta = mapping(job_doc[1].get("metadata"), f"{job_path}.metadata")
    propagation = None
    if policy_doc is not None:
        name = meta.get("name")
        propagation = parse_propagation(policy_doc[1], f"documents[{policy_doc[0]}]",
                                        name if isinstance(name, str) else "", job_namespace(meta, job_path),
                                        string_map(meta.get("labels"), f"{job_path}.metadata.labels"))
    parse = parse_workload if job_doc[1].get("kind") in WORKLOAD_KINDS else parse_job
    return Submission(parse(job_doc[1], job_path, propagation), propagation, explicit_priority(job_doc[1]))


def load_queue_manifests(text: str) -> tuple[Queue, ...]:
    """Every Volcano Queue in a file (at least one; names must be distinct)."""
    queues: list[Queue] = []
    for index, doc in load_documents(text):
        _check_kind(doc, index, _QUEUE_KINDS, "")
        queue = parse_queue(doc, f"documents[{index}]")
        if any(q.name == queue.name for q in queues):
            raise InvalidInput(f"documents[{index}].metadata.name", f"duplicate queue {queue.name!r}")
        queues.append(queue)
    if not queues:
        raise InvalidInput("documents", f"no Queue ({QUEUE_API}) found")
    return tuple(queues)


def load_queue_manifest(text: str) -> Queue:
    """Exactly one Volcano Queue (``fedctl queue create -f``)."""
    queues = load_queue_manifests(text)
    if len(queues) > 1:
        raise InvalidInput("documents", f"expected one Queue, found {len(queues)}")
    return queues[0]


def load_jobs(text: str) -> tuple[Job, ...]:
    """The submission's jobs, each carrying its propagation policy: one Job, Deployment or
    StatefulSet, or every job of the file's JobFlows (federation/domain/jobflows.py)."""
    documents = load_documents(text)
    if not any(doc.get("kind") in FLOW_KINDS for _, doc in documents):
        return (load_manifests(text).job,)
    templates: dict[str, tuple[Job, str]] = {}
    flows: list[tuple[int, Mapping[str, object]]] = []
    for index, doc in documents:
        kind = _check_kind(doc, index, dict.fromkeys(FLOW_KINDS, FLOW_API),
                           " (a JobFlow file holds only JobFlows and their JobTemplates)")
        if kind == "JobFlow":
            flows.append((index, doc))
            continue
        template = parse_job(doc, f"documents[{index}]", None)
        if template.name in templates:
            raise InvalidInput(f"documents[{index}].metadata.name", f"duplicate JobTemplate {template.name!r}")
        templates[template.name] = (template, f"documents[{index}]")
    if not flows:
        raise InvalidInput("documents", "JobTemplates are used only by a JobFlow in the same file; none found")
    return flow_jobs(flows, templates)


def load_queues(text: str) -> tuple[Queue, ...]:
    """Alias of ``load_queue_manifests`` for callers that take any number of queues."""
    return load_queue_manifests(text)
