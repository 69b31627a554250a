"""Kubernetes label selectors (``matchLabels`` + ``matchExpressions``).

Semantics of k8s.io/apimachinery ``pkg/apis/meta/v1`` LabelSelector: every
``matchLabels`` pair and every requirement must hold (AND); ``In``/``NotIn`` take a
non-empty ``values``, ``Exists``/``DoesNotExist`` none; keys are label keys and values
label values (``pkg/labels/selector.go`` ``NewRequirement``); ``NotIn`` and ``DoesNotExist``
hold for an object without the key. An empty selector selects everything. Used by
Karmada ``resourceSelectors[].labelSelector`` (which jobs a policy selects) and
``clusterAffinity.labelSelector`` (which clusters a job may use).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from federation.domain.errors import require
from federation.domain.names import label_value, qualified_name

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        require(bool(self.key), "key", "must not be empty")
        # apimachinery's ``labels.NewRequirement`` refuses a key or value no label can have;
        # Karmada then treats the selector as matching nothing, while ``NotIn`` or
        # ``DoesNotExist`` on such a key here would match every object.
        qualified_name(self.key, "key", "label key")
        require(self.operator in OPERATORS, "operator", f"must be one of {', '.join(OPERATORS)}")
        if self.operator in ("In", "NotIn"):
            require(bool(self.values), "values", f"must not be empty for {self.operator}")
        else:
            require(not self.values, "values", f"must be empty for {self.operator}")
        for i, value in enumerate(self.values):
            label_value(value, f"values[{i}]")

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelRequirement, ...] = ()

    def __post_init__(self) -> None:
        for key, value in self.match_labels:  # as apimachinery's LabelSelectorAsSelector checks them
            where = f"matchLabels[{key[:80]!r}]"
            qualified_name(key, where, "label key")
            label_value(value, where)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (all(labels.get(k) == v for k, v in self.match_labels)
                and all(r.matches(labels) for r in self.match_expressions))

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions
