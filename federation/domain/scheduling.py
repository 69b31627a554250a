"""Node constraints of a pod template: nodeSelector, node affinity, tolerations, anti-affinity.

Why here, read from the template: a real kubelet admits a pod only on a node that
matches the pod's ``nodeSelector`` and required node affinity and whose NoSchedule /
NoExecute taints it tolerates; a federation that places a GPU-model-pinned gang on the
wrong model gets pods that never run. So the planner, every baseline, ``validate()`` and
the agent's node choice all ask :meth:`NodeConstraints.allows` the same question, with
the semantics of Kubernetes ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``
(terms ORed, expressions ANDed; ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``,
``Lt``; ``matchFields`` on ``metadata.name`` only; an empty term matches nothing).

Pod affinity and ``topologySpreadConstraints`` need the placement of other pods across
the federation; the one form honoured is the common "one pod per node": a required pod
anti-affinity on ``kubernetes.io/hostname`` whose ``matchLabels`` select the task's own
pods. Every other form is refused with the field's path, never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from federation.domain.errors import InvalidInput, require
from federation.domain.nodes import Node, Toleration, untolerated
from federation.domain.pod_security import TEMPLATE_MAX_DEPTH, parse_template

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
HOSTNAME = "kubernetes.io/hostname"
# A template's schedulerName may name Volcano or ours: the agent sets ours on every pod it
# creates, so any other scheduler named there would be overridden, not honoured.
SCHEDULER_NAMES = ("", "volcano", "federation-scheduler")
MAX_TERMS = 32       # per list of terms (bounded: checked at the edge before any work)
MAX_EXPRESSIONS = 32  # per term
MAX_VALUES = 256     # per expression


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` (or ``matchFields``) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        require(bool(self.key), "key", "must not be empty")
        require(self.operator in OPERATORS, "operator", f"must be one of {', '.join(OPERATORS)}")
        if self.operator in ("In", "NotIn"):
            require(len(self.values) >= 1, "values", f"at least one value is required for {self.operator}")
        elif self.operator in ("Exists", "DoesNotExist"):
            require(not self.values, "values", f"must be empty for {self.operator}")
        else:
            require(len(self.values) == 1, "values", f"exactly one integer value is required for {self.operator}")
            require(_integer(self.values[0]) is not None, "values[0]", "must be an integer")
        require(len(self.values) <= MAX_VALUES, "values", f"at most {MAX_VALUES} values")

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        have, limit = _integer(value), _integer(self.values[0])
        if have is None or limit is None:
            return False
        return have > limit if op == "Gt" else have < limit

    def describe(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({','.join(self.values)})"


def _integer(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Term:
    """A node selector term: expressions on labels and fields, ANDed; empty matches nothing."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()  # metadata.name only

    def matches(self, node: Node) -> bool:
        if not self.expressions and not self.fields:
            return False
        name = {"metadata.name": node.name}
        return all(r.matches(node.labels) for r in self.expressions) and all(r.matches(name) for r in self.fields)

    def describe(self) -> str:
        return " and ".join(r.describe() for r in (*self.expressions, *self.fields)) or "(empty term)"


@dataclass(frozen=True)
class NodeConstraints:
    """What a node must offer one pod of a task (see the module docstring)."""

    selector: tuple[tuple[str, str], ...] = ()
    required: tuple[Term, ...] | None = None  # None: no required node affinity; () matches nothing
    preferred: tuple[tuple[int, Term], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    one_per_node: bool = False  # required pod anti-affinity on the hostname against its own pods

    def allows(self, node: Node) -> bool:
        """True when a pod with these constraints may be bound to ``node`` (health aside)."""
        if node.taints and untolerated(node.taints, self.tolerations):
            return False
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        return self.required is None or any(t.matches(node) for t in self.required)

    def preference(self, node: Node) -> int:
        """Sum of the weights of the preferred node affinity terms ``node`` matches."""
        return sum(w for w, t in self.preferred if t.matches(node))

    @property
    def selective(self) -> bool:
        """Whether anything beyond taints narrows the nodes (a node selector or affinity)."""
        return bool(self.selector) or self.required is not None

    def describe(self) -> str:
        """The constraint as a user wrote it, for "matches no node" reasons."""
        parts = []
        if self.selector:
            parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in self.selector))
        if self.required is not None:
            parts.append("required node affinity " + " or ".join(f"[{t.describe()}]" for t in self.required))
        if self.tolerations or not parts:
            parts.append("tolerations (" + (",".join(_toleration(t) for t in self.tolerations) or "none")
                         + ") against the nodes' taints")
        return "; ".join(parts)

    def with_tolerations(self, extra: tuple[Toleration, ...]) -> NodeConstraints:
        missing = tuple(t for t in extra if t not in self.tolerations)
        if not missing:
            return self
        return NodeConstraints(self.selector, self.required, self.preferred, self.tolerations + missing,
                               self.one_per_node)


NONE = NodeConstraints()


def _toleration(t: Toleration) -> str:
    head = t.key or "*"
    if t.operator == "Equal" and t.value:
        head += f"={t.value}"
    return head + (f":{t.effect}" if t.effect else "")


# ---------------------------------------------------------------- parsing (from the pod template)


def _map(value: object, path: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(path, "must be a mapping")
    return value


def _list(value: object, path: str, limit: int) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(path, "must be a list")
    require(len(value) <= limit, path, f"at most {limit} entries")
    return value


def _text(value: object, path: str) -> str:
    """A string field (Kubernetes label keys and values, operators): ``true`` or ``8`` in YAML
    is a bool or int that the member apiserver refuses, so it is refused here rather than
    matched as ``"True"`` or ``"8"``."""
    if not isinstance(value, str):
        raise InvalidInput(path, f"must be a string, got {type(value).__name__} {value!r:.40}")
    return value


def _as_stored(value: object, path: str) -> str:
    """How ``template_constraints(strict=False)`` reads a string field: as text, whatever it is."""
    del path
    return str(value)


Text = Callable[[object, str], str]


def _keys(item: Mapping[str, object], path: str, allowed: tuple[str, ...]) -> None:
    for key in item:
        if key not in allowed:
            raise InvalidInput(f"{path}.{key}", "not supported")


def _requirement(raw: object, path: str, text: Text, fields: bool = False) -> Requirement:
    item = _map(raw, path)
    _keys(item, path, ("key", "operator", "values"))
    values = _list(item.get("values"), f"{path}.values", MAX_VALUES)
    if fields and item.get("key") != "metadata.name":
        raise InvalidInput(f"{path}.key", "only metadata.name is supported in matchFields")
    try:
        return Requirement(text(item.get("key", ""), f"{path}.key"),
                           text(item.get("operator", ""), f"{path}.operator"),
                           tuple(text(v, f"{path}.values[{i}]") for i, v in enumerate(values)))
    except InvalidInput as exc:
        raise exc.under(path) from None


def _term(raw: object, path: str, text: Text) -> Term:
    item = _map(raw, path)
    _keys(item, path, ("matchExpressions", "matchFields"))
    exprs = _list(item.get("matchExpressions"), f"{path}.matchExpressions", MAX_EXPRESSIONS)
    fields = _list(item.get("matchFields"), f"{path}.matchFields", MAX_EXPRESSIONS)
    return Term(tuple(_requirement(r, f"{path}.matchExpressions[{i}]", text) for i, r in enumerate(exprs)),
                tuple(_requirement(r, f"{path}.matchFields[{i}]", text, True) for i, r in enumerate(fields)))


def _node_affinity(raw: object, path: str,
                   text: Text) -> tuple[tuple[Term, ...] | None, tuple[tuple[int, Term], ...]]:
    item = _map(raw, path)
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
    _keys(item, path, (req_key, pref_key))
    required = None
    if item.get(req_key) is not None:
        sel = _map(item[req_key], f"{path}.{req_key}")
        _keys(sel, f"{path}.{req_key}", ("nodeSelectorTerms",))
        terms = _list(sel.get("nodeSelectorTerms"), f"{path}.{req_key}.nodeSelectorTerms", MAX_TERMS)
        required = tuple(_term(t, f"{path}.{req_key}.nodeSelectorTerms[{i}]", text) for i, t in enumerate(terms))
    preferred = []
    for i, raw_pref in enumerate(_list(item.get(pref_key), f"{path}.{pref_key}", MAX_TERMS)):
        where = f"{path}.{pref_key}[{i}]"
        pref = _map(raw_pref, where)
        _keys(pref, where, ("weight", "preference"))
        weight = pref.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise InvalidInput(f"{where}.weight", "must be an integer between 1 and 100")
        preferred.append((weight, _term(pref.get("preference"), f"{where}.preference", text)))
    return required, tuple(preferred)


def node_selector_terms(raw: object, path: str) -> tuple[Term, ...]:
    """A Kubernetes NodeSelector (``{"nodeSelectorTerms": [...]}``) read strictly, with
    the bounds above: a PersistentVolume's ``spec.nodeAffinity.required`` as the agent
    reads it from its cluster (agents/core/volumes.py)."""
    sel = _map(raw, path)
    _keys(sel, path, ("nodeSelectorTerms",))
    terms = _list(sel.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", MAX_TERMS)
    return tuple(_term(t, f"{path}.nodeSelectorTerms[{i}]", _text) for i, t in enumerate(terms))


def _one_per_node(raw: object, path: str, own: Mapping[str, str]) -> bool:
    """The supported podAntiAffinity: required, on the hostname, selecting the task's own pods."""
    item = _map(raw, path)
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    for key in item:
        if key != req_key:
            raise InvalidInput(f"{path}.{key}", "not supported (only the required one-pod-per-node form is honoured)")
    terms = _list(item.get(req_key), f"{path}.{req_key}", MAX_TERMS)
    for i, raw_term in enumerate(terms):
        where = f"{path}.{req_key}[{i}]"
        term = _map(raw_term, where)
        _keys(term, where, ("labelSelector", "topologyKey"))
        if term.get("topologyKey") != HOSTNAME:
            raise InvalidInput(f"{where}.topologyKey", f"not supported (only {HOSTNAME}: one pod per node)")
        selector = _map(term.get("labelSelector"), f"{where}.labelSelector")
        _keys(selector, f"{where}.labelSelector", ("matchLabels",))
        labels = _map(selector.get("matchLabels"), f"{where}.labelSelector.matchLabels")
        if not labels or any(own.get(str(k)) != str(v) for k, v in labels.items()):
            raise InvalidInput(f"{where}.labelSelector", "not supported (only a selector of the task's own pods, "
                               "from template.metadata.labels, is honoured: one pod per node)")
    return bool(terms)


@lru_cache(maxsize=8192)
def template_constraints(template_json: str, strict: bool = True) -> NodeConstraints:
    """The node constraints of a pod template (canonical JSON); paths are below ``template``.

    Raises ``InvalidInput`` for a malformed or unsupported scheduling field. ``strict``
    (submission, ``Task.__post_init__``) also refuses what a member cluster would refuse or
    override: ``nodeName``, another scheduler, a number in ``priority`` (admission sets
    it from the class), a label value that is not a string, a toleration with an empty key
    and operator Equal. The planner reads a stored job's
    constraints with ``strict=False``: a job an earlier release accepted is planned as it
    was then (non-strings read as text), never failing a round.
    """
    if not template_json:
        return NONE
    text: Text = _text if strict else _as_stored
    # Bounded: never a JSONDecodeError or RecursionError escaping as INTERNAL (issue 10).
    template = parse_template(template_json, "", TEMPLATE_MAX_DEPTH)
    meta = _map(template.get("metadata"), "metadata")
    spec = _map(template.get("spec"), "spec")
    own = {str(k): text(v, f"metadata.labels.{k}") for k, v in _map(meta.get("labels"), "metadata.labels").items()}
    if strict:
        _check_binding(spec)
        if "priority" in spec:  # Kubernetes' Priority admission refuses any value it did not compute
            raise InvalidInput("spec.priority", "not supported: the member cluster sets it from priorityClassName "
                               "(use priorityClassName)")
    if spec.get("topologySpreadConstraints"):
        raise InvalidInput("spec.topologySpreadConstraints",
                           "not supported (a gang stays inside one HyperNode; use networkTopology)")
    selector = _map(spec.get("nodeSelector"), "spec.nodeSelector")
    affinity = _map(spec.get("affinity"), "spec.affinity")
    _keys(affinity, "spec.affinity", ("nodeAffinity", "podAntiAffinity", "podAffinity"))
    if affinity.get("podAffinity"):
        raise InvalidInput("spec.affinity.podAffinity", "not supported (pods of other jobs are not co-located "
                           "across a federation; use networkTopology to keep a gang together)")
    required, preferred = _node_affinity(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity", text)
    tolerations = []
    for i, raw in enumerate(_list(spec.get("tolerations"), "spec.tolerations", 64)):
        where = f"spec.tolerations[{i}]"
        t = _map(raw, where)
        key = text(t.get("key", ""), f"{where}.key")
        operator = text(t.get("operator", ""), f"{where}.operator") or "Equal"  # "" is Equal, as in Kubernetes
        if strict and not key and operator != "Exists":  # Kubernetes' ValidateTolerations: the API server refuses it
            raise InvalidInput(f"{where}.operator", "must be Exists when key is empty (an empty key with Exists "
                               "tolerates every taint)")
        try:
            tolerations.append(Toleration(key, operator, text(t.get("value", ""), f"{where}.value"),
                                          text(t.get("effect", ""), f"{where}.effect")))
        except InvalidInput as exc:
            raise exc.under(where) from None
    return NodeConstraints(
        selector=tuple(sorted((str(k), text(v, f"spec.nodeSelector.{k}")) for k, v in selector.items())),
        required=required,
        preferred=preferred,
        tolerations=tuple(tolerations),
        one_per_node=_one_per_node(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity", own),
    )


def _check_binding(spec: Mapping[str, object]) -> None:
    """Binding is the federation's: a template may not pick a node or another scheduler."""
    if "nodeName" in spec:
        raise InvalidInput("spec.nodeName", "not supported: the federation binds the pods (inside the HyperNode "
                           "it chose)")
    scheduler = spec.get("schedulerName", "")
    if scheduler not in SCHEDULER_NAMES:
        raise InvalidInput("spec.schedulerName", f"{scheduler!r:.80} not supported: the federation schedules these "
                           "pods (leave it out or use volcano)")


def template_for(node_selector: Mapping[str, str] | None = None, affinity: Mapping[str, object] | None = None,
                 tolerations: Sequence[Mapping[str, object]] | None = None,
                 labels: Mapping[str, str] | None = None) -> str:
    """A minimal canonical template JSON carrying only scheduling fields (simulator jobs)."""
    spec: dict[str, object] = {}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    template: dict[str, object] = {"spec": spec} if spec else {}
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    return json.dumps(template, sort_keys=True, separators=(",", ":")) if template else ""
