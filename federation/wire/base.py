"""Small pieces every proto <-> domain converter needs: timestamps, quantities, taints,
and re-rooting domain errors so a caller always sees the full field path.

Domain constructors validate their own fields and report paths relative to themselves
(``replicas``); the converters know where the object sits in the request
(``spec.tasks[1]``) and re-root the error, so the user reads ``spec.tasks[1].replicas``.
Paths use the proto JSON (lowerCamelCase) field names, matching the Volcano/Karmada YAML
spelling users already know.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from federation.domain.errors import InvalidInput
from federation.domain.nodes import Taint, Toleration
from federation.domain.resources import Resources
from federation.v1 import types_pb2

P = ParamSpec("P")
T = TypeVar("T")


def build(path: str, factory: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Call a domain constructor; re-root any ``InvalidInput`` it raises below ``path``."""
    try:
        return factory(*args, **kwargs)
    except InvalidInput as exc:
        raise exc.under(path) from None


def timestamp_to_proto(seconds: float) -> Timestamp:
    """Epoch seconds (the domain's clock unit) as a protobuf Timestamp."""
    whole = math.floor(seconds)  # split first: seconds * 1e9 would lose float precision
    nanos = round((seconds - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    return Timestamp(seconds=whole, nanos=nanos)


def timestamp_from_proto(stamp: Timestamp) -> float:
    """A protobuf Timestamp as epoch seconds (an unset Timestamp is 0.0)."""
    return float(stamp.seconds) + stamp.nanos / 1e9


def resources_to_proto(resources: Resources) -> dict[str, str]:
    """Canonical units back to Kubernetes quantity strings (``{"memory": "64Gi"}``)."""
    return resources.to_quantities()


def resources_from_proto(quantities: Mapping[str, str], path: str) -> Resources:
    """Parse quantity strings; a malformed one names ``path.<resource>``."""
    return Resources.parse(dict(quantities), path)


def taint_to_proto(taint: Taint) -> types_pb2.Taint:
    return types_pb2.Taint(key=taint.key, value=taint.value, effect=taint.effect, time_added=taint.time_added)


def taint_from_proto(msg: types_pb2.Taint, path: str) -> Taint:
    return build(path, Taint, key=msg.key, value=msg.value, effect=msg.effect or "NoSchedule",
                 time_added=msg.time_added if msg.HasField("time_added") else None)


def toleration_to_proto(toleration: Toleration) -> types_pb2.Toleration:
    return types_pb2.Toleration(
        key=toleration.key, operator=toleration.operator, value=toleration.value, effect=toleration.effect,
        toleration_seconds=toleration.seconds,
    )


def toleration_from_proto(msg: types_pb2.Toleration, path: str) -> Toleration:
    return build(path, Toleration, key=msg.key, operator=msg.operator or "Equal", value=msg.value, effect=msg.effect,
                 seconds=msg.toleration_seconds if msg.HasField("toleration_seconds") else None)
