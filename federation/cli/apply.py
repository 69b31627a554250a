"""``fedctl apply -f FILE|DIR``: many documents of many kinds, applied kubectl-style.

The dispatcher knows no kind itself. Each kind registers a ``Kind`` (``register``): its
``apiVersion``s, a dependency ``order``, a local ``parse`` that validates the document and
raises ``InvalidInput`` naming the field path, and an ``apply`` coroutine that sends the
parsed object to the server and answers an ``Applied`` (the object's ref, what happened,
and how to undo it). Built-in kinds live in ``apply_kinds``; other packages add theirs
with ``register`` at import time and list their module in ``KIND_MODULES``.

Why this shape:

- **Dependency order, not file order.** Objects are applied by ``order`` (priority classes,
  queues, policies, templates, workloads, flows; file order within one rank), so a file
  may list a Job before the Queue it uses, as Helm charts and kustomize output often do.
- **Every document is parsed before anything is sent.** A typo in the last document of a
  directory costs nothing; without ``--atomic`` the valid documents are still applied and
  each bad one gets its own error line (kubectl's behaviour).
- **One line per object**, ``kind/name outcome``, and a process exit code for the worst
  outcome: 0 all applied, 2 bad input (a document or the server's INVALID_ARGUMENT), 1 any
  other failure.
- **``--atomic`` is all-or-nothing.** Any invalid document refuses the whole set. Then,
  rank by rank, every object of the rank is first checked by the server without storing
  (``Kind.check``, a dry run) and only then applied; when anything fails, what this run
  already created or changed is undone in reverse order (``Applied.undo``: a created
  object deleted, a changed one put back). An object whose kind has no undo (a submitted
  Job cannot be un-submitted, only cancelled) is applied only after every check of its
  rank passed; if the server still refuses one of them afterwards (a race with another
  writer), the run reports which objects stayed applied instead of claiming atomicity.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from federation.cli.errors import EXIT_FAILURE, EXIT_USAGE
from federation.client import FederationClient, ServiceError
from federation.domain.errors import InvalidInput
from federation.domain.manifests import load_documents
from federation.files import MAX_MANIFEST_BYTES

# Dependency ranks: lower is applied first.
ORDER_PRIORITY_CLASSES = 10
ORDER_QUEUES = 20
ORDER_POLICIES = 30
ORDER_TEMPLATES = 40
ORDER_WORKLOADS = 50
ORDER_FLOWS = 60

# Modules that register kinds when imported (the built-ins, then other engineers' kinds).
KIND_MODULES: list[str] = ["federation.cli.apply_kinds", "federation.cli.apply_workloads"]

_SUFFIXES = (".yaml", ".yml", ".json")
_USAGE_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE)

Undo = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Applied:
    """What applying one object did: ``outcome`` is created, configured or unchanged."""

    ref: str
    outcome: str
    undo: Undo | None = None


@dataclass(frozen=True)
class Kind:
    """How ``apply`` handles one ``kind``; ``parse`` must not touch the network."""

    kind: str
    api_versions: tuple[str, ...]
    order: int
    parse: Callable[[Mapping[str, object], str], Any]
    apply: Callable[[FederationClient, Any], Awaitable[Applied]]
    ref: Callable[[Any], str]
    check: Callable[[FederationClient, Any], Awaitable[None]] | None = None


REGISTRY: dict[str, Kind] = {}


def register(kind: Kind) -> None:
    """Add a kind (a second registration of the same kind is a programming error)."""
    if kind.kind in REGISTRY:
        raise ValueError(f"kind {kind.kind} registered twice")
    REGISTRY[kind.kind] = kind


def registry() -> Mapping[str, Kind]:
    """Every kind, after importing ``KIND_MODULES`` (idempotent)."""
    for module in KIND_MODULES:
        importlib.import_module(module)
    return REGISTRY


@dataclass(frozen=True)
class Document:
    """One parsed document: where it came from, its kind and the kind's parsed object."""

    source: str  # "FILE documents[i]"
    index: int  # position over all files, the tie-break inside one rank
    kind: Kind
    obj: Any


@dataclass(frozen=True)
class Line:
    text: str
    code: int = 0  # 0 ok, EXIT_USAGE bad input, EXIT_FAILURE other failure


def files(path: str) -> list[Path]:
    """``path`` itself, or a directory's YAML/JSON files in name order (not recursive, like kubectl).

    Whether ``path`` can be read (it exists, is no symlink loop, is within the size limit)
    is for the reader to say, naming the flag.
    """
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.iterdir() if f.is_file() and f.suffix in _SUFFIXES)
    return [p]


def parse_text(text: str, source: str, kinds: Mapping[str, Kind], start: int = 0) -> tuple[list[Document], list[Line]]:
    """Every document of one file: parsed ones, and one error line per refused one."""
    docs: list[Document] = []
    errors: list[Line] = []
    try:
        raw = load_documents(text)
    except InvalidInput as exc:
        return [], [Line(f"{source} error: {exc}", EXIT_USAGE)]
    for position, (index, doc) in enumerate(raw):
        path = f"documents[{index}]"
        try:
            kind = _kind_of(doc, path, kinds)
            obj = kind.parse(doc, path)
        except InvalidInput as exc:
            errors.append(Line(f"{_doc_ref(doc)} error: {source}: {exc}", EXIT_USAGE))
            continue
        docs.append(Document(f"{source} {path}", start + position, kind, obj))
    return docs, errors


def _doc_ref(doc: Mapping[str, object]) -> str:
    """``kind/name`` as far as the document says (for error lines of unparsable documents)."""
    kind, meta = doc.get("kind"), doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{str(kind).lower() if isinstance(kind, str) else 'document'}/{name if isinstance(name, str) else '?'}"


def _kind_of(doc: Mapping[str, object], path: str, kinds: Mapping[str, Kind]) -> Kind:
    name = doc.get("kind")
    if not isinstance(name, str) or name not in kinds:
        known = ", ".join(sorted(kinds))
        raise InvalidInput(f"{path}.kind", f"kind {name!r} not supported (supported: {known})")
    kind = kinds[name]
    api = doc.get("apiVersion")
    if api not in kind.api_versions:
        raise InvalidInput(f"{path}.apiVersion",
                           f"{name} apiVersion {api!r} not supported (supported: {', '.join(kind.api_versions)})")
    return kind


def read(paths: Sequence[str], read_text: Callable[[str], str]) -> tuple[list[Document], list[Line]]:
    """Every document under ``paths`` (``-`` is stdin through ``read_text``).

    Each file is bounded by the reader; together they are bounded by ``MAX_MANIFEST_BYTES``
    too, since every document is parsed (and kept) before the first is sent: a directory of
    a thousand 16 MiB files would otherwise be read and parsed for hours.
    """
    kinds = registry()
    docs: list[Document] = []
    errors: list[Line] = []
    total = 0
    for arg in paths:
        targets = [arg] if arg == "-" else [str(f) for f in files(arg)]
        for target in targets:
            text = read_text(target)
            total += len(text)
            if total > MAX_MANIFEST_BYTES:
                raise InvalidInput("-f", f"the files hold over {MAX_MANIFEST_BYTES} characters together (at "
                                         f"{target}); apply them in several runs")
            got, bad = parse_text(text, target, kinds, start=len(docs) + len(errors))
            docs += got
            errors += bad
    return docs, errors


def in_order(docs: Iterable[Document]) -> list[Document]:
    return sorted(docs, key=lambda d: (d.kind.order, d.index))


def _failure(doc: Document, exc: Exception) -> Line:
    ref = doc.kind.ref(doc.obj)
    if isinstance(exc, InvalidInput):
        return Line(f"{ref} error: {doc.source}: {exc}", EXIT_USAGE)
    assert isinstance(exc, ServiceError)
    code = EXIT_USAGE if exc.code in _USAGE_CODES else EXIT_FAILURE
    return Line(f"{ref} error: {' '.join(exc.message.split())} ({exc.code.name})", code)


async def apply_all(client: FederationClient, docs: Sequence[Document]) -> list[Line]:
    """Apply each object in dependency order; a failure does not stop the others."""
    lines: list[Line] = []
    for doc in in_order(docs):
        try:
            done = await doc.kind.apply(client, doc.obj)
        except (InvalidInput, ServiceError) as exc:
            lines.append(_failure(doc, exc))
            continue
        lines.append(Line(f"{done.ref} {done.outcome}"))
    return lines


async def apply_atomic(client: FederationClient, docs: Sequence[Document]) -> list[Line]:
    """All or nothing (module doc): check each rank, apply it, undo everything on failure."""
    ordered = in_order(docs)
    done: list[Applied] = []
    lines: list[Line] = []
    ranks = sorted({d.kind.order for d in ordered})
    for rank in ranks:
        group = [d for d in ordered if d.kind.order == rank]
        for doc in group:
            try:
                if doc.kind.check is not None:
                    await doc.kind.check(client, doc.obj)
            except (InvalidInput, ServiceError) as exc:
                return await _roll_back(done, [*lines, _failure(doc, exc)])
        for doc in group:
            try:
                applied = await doc.kind.apply(client, doc.obj)
            except (InvalidInput, ServiceError) as exc:
                return await _roll_back(done, [*lines, _failure(doc, exc)])
            done.append(applied)
            lines.append(Line(f"{applied.ref} {applied.outcome}"))
    return lines


async def _roll_back(done: list[Applied], lines: list[Line]) -> list[Line]:
    """Undo ``done`` newest first; report what could not be undone."""
    out = [Line(line.text, line.code) for line in lines if line.code]
    kept: list[str] = []
    for applied in reversed(done):
        if applied.outcome == "unchanged":
            continue
        if applied.undo is None:
            kept.append(applied.ref)
            continue
        try:
            await applied.undo()
        except ServiceError as exc:
            kept.append(f"{applied.ref} (undo failed: {exc.message})")
            continue
        out.append(Line(f"{applied.ref} rolled back"))
    if kept:
        out.append(Line(f"atomic apply failed part-way; still applied: {', '.join(kept)}", EXIT_FAILURE))
    else:
        out.append(Line("nothing applied (--atomic)", max(line.code for line in lines)))
    return out


def exit_code(lines: Iterable[Line]) -> int:
    """2 if any input was refused, else 1 if anything else failed, else 0."""
    codes = {line.code for line in lines}
    return EXIT_USAGE if EXIT_USAGE in codes else EXIT_FAILURE if EXIT_FAILURE in codes else 0
