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
from collections.abc import Callable, Mapping
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


# Encoders and decoders are built once per type from its hints and cached: a 20,000-node
# snapshot is ~800,000 values, and looking up each value's type hint origin, dataclass-ness
# and fields again per value was most of the time of storing it (4 s) and reading it back
# (9 s). The rules are the same as walking the hints per value; only the walk is hoisted.
_Fn = Callable[[Any], Any]
_ENCODERS: dict[Any, _Fn] = {}
_DECODERS: dict[tuple[Any, bool], _Fn] = {}
_ENCODE_PLANS: dict[type, list[tuple[str, Any, _Fn]]] = {}
_DECODE_PLANS: dict[type, list[tuple[str, Any]]] = {}


def _encode(tp: Any, value: Any) -> Any:
    return _encoder(tp)(value)


def _encoder(tp: Any) -> _Fn:
    fn = _ENCODERS.get(tp)
    if fn is None:
        fn = _ENCODERS[tp] = _build_encoder(tp)
    return fn


def _build_encoder(tp: Any) -> _Fn:
    """``value`` as JSON data for ``tp``; None is None whatever the type."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]

        def union(value: Any) -> Any:
            if value is None:
                return None
            if len(inner) != 1:
                raise TypeError(f"unsupported union {tp!r}")
            return _encoder(inner[0])(value)
        return union
    if tp is Resources:
        return lambda value: None if value is None else {k: int(v) for k, v in value.amounts.items()}
    if dataclasses.is_dataclass(tp):
        return lambda value: None if value is None else _encode_dataclass(value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = args[0]
            return lambda value: None if value is None else [_encoder(item)(v) for v in value]
        return lambda value: None if value is None else [
            _encoder(a)(v) for a, v in zip(args, value, strict=True)]
    if origin in (Mapping, dict, typing.Mapping):
        _, vt = typing.get_args(tp)
        return lambda value: None if value is None else {str(k): _encoder(vt)(v) for k, v in value.items()}
    kind = _scalar_kind(tp)
    if kind is None:
        return lambda value: None if value is None else _scalar(tp, value, "encode")
    return lambda value: None if value is None else kind(value)


def _encode_dataclass(obj: Any) -> dict[str, Any]:
    cls = type(obj)
    plan = _ENCODE_PLANS.get(cls)
    if plan is None:
        hints = _hints(cls)
        plan = _ENCODE_PLANS[cls] = [(f.name, _default_of(f), _encoder(hints[f.name]))
                                     for f in dataclasses.fields(obj) if f.init]
    out: dict[str, Any] = {}
    for name, default, encode in plan:
        value = getattr(obj, name)
        if value == default:
            continue
        out[name] = encode(value)
    return out


def _decode(tp: Any, value: Any, trusted: bool = False) -> Any:
    """``value`` as ``tp``; ``trusted``: nested dataclasses as stored (``_decode_dataclass``)."""
    return _decoder(tp, trusted)(value)


def _decoder(tp: Any, trusted: bool) -> _Fn:
    fn = _DECODERS.get((tp, trusted))
    if fn is None:
        fn = _DECODERS[(tp, trusted)] = _build_decoder(tp, trusted)
    return fn


def _build_decoder(tp: Any, trusted: bool) -> _Fn:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return lambda value: None if value is None else _decoder(inner[0], trusted)(value)
    if tp is Resources:
        return lambda value: Resources.shared({str(k): int(v) for k, v in value.items()})
    if dataclasses.is_dataclass(tp):
        cls = typing.cast(type, tp)
        return lambda value: _decode_dataclass(cls, value, trusted)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = args[0]
            return lambda value: tuple(_decoder(item, trusted)(v) for v in value)
        return lambda value: tuple(_decoder(a, trusted)(v) for a, v in zip(args, value, strict=True))
    if origin in (Mapping, dict, typing.Mapping):
        _, vt = typing.get_args(tp)
        return lambda value: {str(k): _decoder(vt, trusted)(v) for k, v in value.items()}
    kind = _scalar_kind(tp)
    if kind is None:
        return lambda value: _scalar(tp, value, "decode")
    return kind


def _decode_dataclass(cls: type[T], data: Mapping[str, Any], trusted: bool = False) -> T:
    plan = _DECODE_PLANS.get(cls)
    if plan is None:
        hints = _hints(cls)
        plan = _DECODE_PLANS[cls] = [(f.name, hints[f.name]) for f in dataclasses.fields(cls)  # type: ignore[arg-type]  # T is bound to dataclasses only by convention
                                     if f.init]
    kwargs: dict[str, Any] = {}
    for name, tp in plan:
        if name in data:
            kwargs[name] = _decoder(tp, trusted)(data[name])
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
    return None if data is None else Resources.shared({str(k): int(v) for k, v in data.items()})


def _scalar_kind(tp: Any) -> type | None:
    return next((kind for kind in (float, bool, int, str) if tp is kind), None)


def _scalar(tp: Any, value: Any, verb: str) -> Any:
    """The JSON scalars, the same both ways (bool before int: a bool is an int)."""
    for kind in (float, bool, int, str):
        if tp is kind:
            return kind(value)
    raise TypeError(f"cannot {verb} {tp!r}")
