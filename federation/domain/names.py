"""Kubernetes name grammars: DNS-1123 labels and subdomains, qualified names, label values.

Everything a tenant names ends up in a member cluster's API (namespace, labels, resource
names on pods), so the federation refuses at the edge what the kube-apiserver would refuse
later, after the job had been queued, planned and dispatched. The grammars and lengths are
Kubernetes' own (``k8s.io/apimachinery/pkg/util/validation``: ``IsDNS1123Label``,
``IsDNS1123Subdomain``, ``IsQualifiedName``, ``IsValidLabelValue``).

Bounded time: every check tests the length first, so a regex never sees more than 253
characters (a 10k-character namespace costs one ``len``).
"""

from __future__ import annotations

import re

from federation.domain.errors import InvalidInput

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

# Namespaces Kubernetes itself runs in; a tenant's pods never go there unless an admin says so.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


def is_system_namespace(namespace: str) -> bool:
    """``kube-system``, ``kube-public``, ``kube-node-lease`` and every other ``kube-*`` namespace
    (the prefix Kubernetes reserves for itself)."""
    return namespace in SYSTEM_NAMESPACES or namespace.startswith("kube-")


def dns_label(value: str, path: str) -> str:
    """A DNS-1123 label (namespace, job, task, queue names): lowercase alphanumerics and '-', <= 63."""
    if not isinstance(value, str) or not value or len(value) > DNS1123_LABEL_MAX or not _LABEL.fullmatch(value):
        raise InvalidInput(path, f"must be a DNS-1123 label (lowercase letters, digits and '-', starting and "
                                 f"ending with a letter or digit, at most {DNS1123_LABEL_MAX} characters)")
    return value


def dns_subdomain(value: str, path: str) -> str:
    """A DNS-1123 subdomain (node and HyperNode names, label-key prefixes): labels joined by '.', <= 253."""
    if (not isinstance(value, str) or not value or len(value) > DNS1123_SUBDOMAIN_MAX
            or not _SUBDOMAIN.fullmatch(value)):
        raise InvalidInput(path, f"must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "
                                 f"at most {DNS1123_SUBDOMAIN_MAX} characters)")
    return value


def qualified_name(value: str, path: str, what: str = "qualified name") -> str:
    """``[prefix/]name``: prefix a DNS-1123 subdomain, name <= 63 of alphanumerics, '-', '_', '.'
    (label keys, annotation keys, resource names such as ``nvidia.com/gpu``)."""
    if not isinstance(value, str) or not value or len(value) > DNS1123_SUBDOMAIN_MAX + 1 + QUALIFIED_NAME_MAX:
        raise InvalidInput(path, f"{value[:80]!r} is not a valid {what} (empty or too long)"
                           if isinstance(value, str) else f"must be a string {what}")
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > DNS1123_SUBDOMAIN_MAX or not _SUBDOMAIN.fullmatch(prefix)):
        raise InvalidInput(path, f"{value!r} is not a valid {what}: the prefix before '/' must be a "
                                 f"DNS-1123 subdomain")
    if not name or len(name) > QUALIFIED_NAME_MAX or not _QUALIFIED.fullmatch(name):
        raise InvalidInput(path, f"{value!r} is not a valid {what}: the name part must be at most "
                                 f"{QUALIFIED_NAME_MAX} characters of letters, digits, '-', '_' and '.', starting "
                                 f"and ending with a letter or digit")
    return value


def label_value(value: str, path: str) -> str:
    """A label value: empty, or <= 63 of alphanumerics, '-', '_', '.', starting and ending alphanumeric."""
    if not isinstance(value, str):
        raise InvalidInput(path, "must be a string")
    if value and (len(value) > QUALIFIED_NAME_MAX or not _QUALIFIED.fullmatch(value)):
        raise InvalidInput(path, f"must be a label value (at most {QUALIFIED_NAME_MAX} characters of letters, "
                                 f"digits, '-', '_' and '.', starting and ending with a letter or digit)")
    return value
