"""Who is calling, and what they may touch (docs/design/auth.md).

Bearer tokens in the ``authorization`` metadata map to an identity: a tenant (maybe an
admin) or a member cluster's agent. The rules live here, in one place, as plain
functions over an ``Identity`` so each rule is testable without a server; the servicers
only ask "may this identity see this queue?" and raise what these functions raise.

Tokens are secrets: the tokens file should hold their SHA-256 digests, the service keeps
only digests in memory, and no message or log line ever contains a token.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from federation.domain.queues import Queue

log = logging.getLogger(__name__)

_DIGEST = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")
OPEN_TENANT = "dev"


class AccessError(Exception):
    """Base of the two refusals; the error mapper turns them into gRPC codes."""


class Unauthenticated(AccessError):
    """No token, or a token nobody issued (gRPC UNAUTHENTICATED)."""


class PermissionDenied(AccessError):
    """A known caller reaching for a queue, job or cluster that is not theirs (PERMISSION_DENIED)."""


@dataclass(frozen=True)
class Identity:
    """The caller: exactly one of a tenant or a cluster agent; admins are tenants."""

    tenant: str | None = None
    cluster: str | None = None
    admin: bool = False

    @property
    def name(self) -> str:
        return self.tenant or (f"cluster:{self.cluster}" if self.cluster else "anonymous")


class MetadataContext(Protocol):
    """The part of a gRPC servicer context auth needs (sync and aio contexts both fit)."""

    def invocation_metadata(self) -> Any: ...


def digest(token: str) -> str:
    """SHA-256 hex digest of a token: what the tokens file should store."""
    return hashlib.sha256(token.encode()).hexdigest()


def _as_digest(key: str) -> tuple[str, bool]:
    """The digest a tokens-file key stands for, and whether it was given in plain text."""
    match = _DIGEST.match(key.strip())
    if match:
        return match.group(1), False
    return digest(key), True


@dataclass(frozen=True)
class Authenticator:
    """Token digests → identities, plus the access rules.

    ``open`` is development mode (no tokens file): every caller is an admin tenant
    ``dev`` and every agent may speak for any cluster. It is explicit so it can be
    announced at startup and never happens by accident in production.
    """

    tenants: Mapping[str, str] = field(default_factory=dict)  # digest -> tenant
    clusters: Mapping[str, str] = field(default_factory=dict)  # digest -> cluster
    admins: frozenset[str] = frozenset()  # tenant names
    open: bool = False
    plain_tokens: int = 0

    # ------------------------------------------------------------------ construction

    @classmethod
    def open_mode(cls) -> Authenticator:
        return cls(open=True)

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any]) -> Authenticator:
        """Build from the parsed tokens file; a malformed file raises ``ValueError`` naming the key."""
        if not isinstance(doc, Mapping):
            raise ValueError("tokens file: must be a mapping with tenants, admins, clusters")
        unknown = set(doc) - {"tenants", "admins", "clusters"}
        if unknown:
            raise ValueError(f"tokens file: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        tenants: dict[str, str] = {}
        clusters: dict[str, str] = {}
        plain = 0
        raw_tenants = doc.get("tenants") or {}
        if not isinstance(raw_tenants, Mapping):
            raise ValueError("tokens file: tenants must map token (or sha256 digest) to tenant name")
        for i, (key, tenant) in enumerate(raw_tenants.items()):
            if not isinstance(key, str) or not isinstance(tenant, str) or not key or not tenant:
                raise ValueError(f"tokens file: tenants entry {i} must map a non-empty token to a tenant name")
            d, was_plain = _as_digest(key)
            plain += was_plain
            if d in tenants or d in clusters:
                raise ValueError(f"tokens file: tenants entry {i} ({tenant}) reuses a token")
            tenants[d] = tenant
        raw_clusters = doc.get("clusters") or {}
        if not isinstance(raw_clusters, Mapping):
            raise ValueError("tokens file: clusters must map cluster name to token (or sha256 digest)")
        for cluster, key in raw_clusters.items():
            if not isinstance(cluster, str) or not isinstance(key, str) or not key:
                raise ValueError(f"tokens file: clusters.{cluster} must be a non-empty token")
            d, was_plain = _as_digest(key)
            plain += was_plain
            if d in tenants or d in clusters:
                raise ValueError(f"tokens file: clusters.{cluster} reuses a token")
            clusters[d] = cluster
        raw_admins = doc.get("admins") or []
        if not isinstance(raw_admins, Sequence) or isinstance(raw_admins, str):
            raise ValueError("tokens file: admins must be a list of tenant names")
        known = set(tenants.values())
        for i, name in enumerate(raw_admins):
            if not isinstance(name, str):
                raise ValueError(f"tokens file: admins entry {i} must be a tenant name")
            if name not in known:
                raise ValueError(f"tokens file: admins names {name!r}, which no tenants entry maps to")
        return cls(tenants=tenants, clusters=clusters, admins=frozenset(raw_admins), plain_tokens=plain)

    @classmethod
    def from_file(cls, path: str | Path) -> Authenticator:
        with open(path, encoding="utf-8") as fh:
            try:
                doc = yaml.safe_load(fh)
            except yaml.YAMLError as exc:
                raise ValueError(f"tokens file {path}: invalid YAML ({exc.__class__.__name__})") from None
        return cls.from_mapping(doc or {})

    def describe(self) -> str:
        """A startup line that says how callers are checked, without any secret."""
        if self.open:
            return "WARNING: no --tokens file: open development mode, every caller is an admin"
        text = (f"auth: {len(set(self.tenants.values()))} tenant(s), {len(self.admins)} admin(s), "
                f"{len(self.clusters)} cluster token(s)")
        if self.plain_tokens:
            text += f"; WARNING: {self.plain_tokens} token(s) stored in plain text, store sha256 digests instead"
        return text

    # ------------------------------------------------------------------ authentication

    def identify(self, metadata: Iterable[tuple[str, Any]] | None) -> Identity:
        """The caller behind the ``authorization: Bearer TOKEN`` metadata entry."""
        if self.open:
            return Identity(tenant=OPEN_TENANT, admin=True)
        token = bearer_token(metadata)
        if token is None:
            raise Unauthenticated("missing bearer token (authorization metadata)")
        d = digest(token)
        tenant = self.tenants.get(d)
        if tenant is not None:
            return Identity(tenant=tenant, admin=tenant in self.admins)
        cluster = self.clusters.get(d)
        if cluster is not None:
            return Identity(cluster=cluster)
        raise Unauthenticated("unknown bearer token")

    def identity(self, context: MetadataContext) -> Identity:
        return self.identify(context.invocation_metadata())

    # ------------------------------------------------------------------ authorisation

    def require_tenant(self, context: MetadataContext) -> Identity:
        """A submitter (not an agent token) is calling."""
        who = self.identity(context)
        if who.tenant is None:
            raise PermissionDenied(f"{who.name} is an agent token; it cannot use the submitter API")
        return who

    def require_admin(self, context: MetadataContext) -> Identity:
        """Only admins create, update and delete queues."""
        who = self.require_tenant(context)
        if not who.admin:
            raise PermissionDenied(f"tenant {who.tenant} is not an admin; "
                                   "only admins manage queues, policies and priority classes")
        return who

    def authorize_cluster(self, context: MetadataContext, cluster: str) -> Identity:
        """The caller is the agent of ``cluster`` (AgentHub calls this on Hello and every message naming a cluster)."""
        who = self.identity(context)
        if self.open or who.cluster == cluster:
            return who
        raise PermissionDenied(f"{who.name} may not speak for cluster {cluster}")


def bearer_token(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    """The token of the first ``authorization: Bearer …`` entry, if any."""
    for key, value in metadata or ():
        if key.lower() != "authorization":
            continue
        text = value.decode() if isinstance(value, bytes) else str(value)
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


def may_use_queue(who: Identity, owners: Sequence[str]) -> bool:
    """Admins use every queue; a tenant uses a queue that lists it, or one with no owners."""
    if who.admin:
        return True
    if who.tenant is None:
        return False
    return not owners or who.tenant in owners


def usable_queues(who: Identity, queues: Iterable[Queue]) -> list[str] | None:
    """The names of ``queues`` that ``who`` may use: what a tenant's listings and counts
    are restricted to. ``None`` for admins (no restriction)."""
    if who.admin:
        return None
    return [q.name for q in queues if may_use_queue(who, q.owners)]


def check_queue(who: Identity, queue: str, owners: Sequence[str]) -> None:
    """Raise PERMISSION_DENIED unless ``who`` may submit to, see and cancel jobs of ``queue``."""
    if not may_use_queue(who, owners):
        raise PermissionDenied(f"tenant {who.name} is not an owner of queue {queue}")
