"""JSON codecs for the domain types the store keeps whole (job specs, cluster snapshots).

The codec is driven by the dataclasses' own type hints rather than hand-written per
type. Why: the domain grows additively (new optional fields appear as features land), and
a hand-written codec silently drops a field nobody remembered to add. Here every init
field round-trips as long as it is built from str/int/float/bool/None, tuples, str-keyed
mappings, ``Resources`` and other frozen dataclasses; anything else raises ``TypeError``
at encode time instead of losing data.

Fields equal to their default are omitted. Why: the spec digest (idempotent submission)
then stays the same for an unchanged job when a later release adds a defaulted field,
so a resubmission after an upgrade is still recognised as identical. Decoding tolerates
missing keys (defaults apply) for the same reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from federation.domain.clusters import ClusterSnapshot
from federation.domain.jobs import Job
from federation.domain.queues import Queue
from federation.domain.resources import Resources

T = TypeVar("T")
_MISSING = dataclasses.MISSING


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory()
    return _MISSING


def _encode(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {tp!r}")
        return _encode(inner[0], value)
    if tp is Resources:
        return {k: int(v) for k, v in value.amounts.items()}
    if dataclasses.is_dataclass(tp):
        return _encode_dataclass(value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return [_encode(args[0], v) for v in value]
        return [_encode(a, v) for a, v in zip(args, value, strict=True)]
    if origin in (Mapping, dict, typing.Mapping):
        _, vt = typing.get_args(tp)
        return {str(k): _encode(vt, v) for k, v in value.items()}
    return _scalar(tp, value, "encode")


def _encode_dataclass(obj: Any) -> dict[str, Any]:
    hints = _hints(type(obj))
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        if value == _default_of(f):
            continue
        out[f.name] = _encode(hints[f.name], value)
    return out


def _decode(tp: Any, value: Any, trusted: bool = False) -> Any:
    """``value`` as ``tp``; ``trusted``: nested dataclasses as stored (``_decode_dataclass``)."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(inner[0], value, trusted)
    if tp is Resources:
        return Resources({str(k): int(v) for k, v in value.items()})
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(typing.cast(type, tp), value, trusted)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, trusted) for v in value)
        return tuple(_decode(a, v, trusted) for a, v in zip(args, value, strict=True))
    if origin in (Mapping, dict, typing.Mapping):
        _, vt = typing.get_args(tp)
        return {str(k): _decode(vt, v, trusted) for k, v in value.items()}
    return _scalar(tp, value, "decode")


def _decode_dataclass(cls: type[T], data: Mapping[str, Any], trusted: bool = False) -> T:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # T is bound to dataclasses only by convention
        if f.init and f.name in data:
            kwargs[f.name] = _decode(hints[f.name], data[f.name], trusted)
    if not trusted or cls in _NORMALISED:
        return cls(**kwargs)
    obj = object.__new__(cls)  # as stored: the release that stored it checked it
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # as above
        value = kwargs.get(f.name, _default_of(f))
        if value is _MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} is missing from the stored data")
        object.__setattr__(obj, f.name, value)
    return obj


# Their __post_init__ derives fields (a snapshot's tree, a queue's parent), so they are
# always constructed, trusted or not.
_NORMALISED: tuple[type, ...] = (ClusterSnapshot, Queue)


def to_json(obj: Any) -> dict[str, Any]:
    """Encode any supported frozen domain dataclass into JSON-ready data."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"expected a dataclass instance, got {type(obj).__name__}")
    return _encode_dataclass(obj)


def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
    """Decode data produced by ``to_json`` (domain validation runs again on construction)."""
    return _decode_dataclass(cls, data)


def canonical_json(data: Any) -> str:
    """Stable text for hashing: sorted keys, no whitespace."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def job_to_json(job: Job) -> dict[str, Any]:
    return to_json(job)


def job_from_json(data: Mapping[str, Any], trusted: bool = False) -> Job:
    """``trusted``: as stored, without this release's checks (``lifecycle.decode_spec``)."""
    return _decode_dataclass(Job, data, trusted)


def spec_digest(job: Job) -> str:
    """sha256 of the canonical spec: equal digests mean an identical resubmission."""
    return digest_of(job_to_json(job))


def digest_of(data: Any) -> str:
    """sha256 hex of the canonical JSON of already-encoded data."""
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def snapshot_to_json(snapshot: ClusterSnapshot) -> dict[str, Any]:
    return to_json(snapshot)


def snapshot_from_json(data: Mapping[str, Any]) -> ClusterSnapshot:
    return from_json(ClusterSnapshot, data)


def queue_to_json(queue: Queue) -> dict[str, Any]:
    return to_json(queue)


def queue_from_json(data: Mapping[str, Any]) -> Queue:
    return from_json(Queue, data)


def resources_to_json(resources: Resources | None) -> dict[str, int] | None:
    return None if resources is None else {k: int(v) for k, v in resources.amounts.items()}


def resources_from_json(data: Mapping[str, Any] | None) -> Resources | None:
    return None if data is None else Resources({str(k): int(v) for k, v in data.items()})


def _scalar(tp: Any, value: Any, verb: str) -> Any:
    """The JSON scalars, the same both ways (bool before int: a bool is an int)."""
    for kind in (float, bool, int, str):
        if tp is kind:
            return kind(value)
    raise TypeError(f"cannot {verb} {tp!r}")
