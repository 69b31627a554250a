"""Kubernetes quantities and resource vectors.

Quantities are parsed once at the edge into integers in canonical units so that every
later comparison is exact: ``cpu`` in millicores, ``memory`` and ``ephemeral-storage``
in bytes, every other resource (``nvidia.com/gpu``, ``pods``) as a plain count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

from federation.domain.errors import InvalidInput
from federation.domain.names import qualified_name

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"

# Kubernetes' quantity grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go):
#   <quantity> ::= <signedNumber><suffix>;  <number> ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>;  <decimalExponent> ::= "e" <signedNumber> | "E" ...
# An exponent and an SI suffix never go together ("1e3Gi" is refused, as Kubernetes does).
_QUANTITY = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:([eE])([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?")
_SUFFIX = {
    None: Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
# Bounds that keep parsing O(length) with small numbers (docs/design/limits.md). Kubernetes
# keeps quantities in an int64 of its canonical unit; so do we (millicores, bytes, counts).
QUANTITY_MAX_CHARS = 64
QUANTITY_MAX = 2**63 - 1
_EXPONENT_CAP = 64  # beyond +-64 the value is either out of range or rounds to one unit


def parse_quantity(resource: str, value: object, path: str = "") -> int:
    """Parse a Kubernetes quantity for ``resource`` into canonical integer units.

    CPU becomes millicores (``"500m"`` -> 500, ``"2"`` -> 2000); memory and the other native
    resources are rounded up to a whole unit (``"8Gi"`` -> 8589934592); an extended resource
    (``nvidia.com/gpu``) must be a whole number (``"0.5"`` and ``"500m"`` are refused). Negative values, malformed
    strings such as ``"8Gx"`` and values above 2^63-1 canonical units are refused with the
    field path. Why the exponent is capped before any arithmetic: ``Decimal("1e999999")``
    is cheap, but turning it into an int costs seconds of CPU (issue 10's event-loop stall).
    """
    if isinstance(value, bool):
        raise InvalidInput(path, f"quantity must be a number or string, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(path, f"quantity must be finite, got {value!r}")
    text = str(value).strip() if isinstance(value, str | int | float | Decimal) else None
    if text is None:
        raise InvalidInput(path, f"quantity must be a number or string, got {type(value).__name__}")
    if len(text) > QUANTITY_MAX_CHARS:
        raise InvalidInput(path, f"quantity is {len(text)} characters, over the {QUANTITY_MAX_CHARS}-character "
                                 f"limit")
    try:
        return _canonical(resource, text)
    except InvalidInput as exc:
        raise InvalidInput(path, exc.rule) from None


@lru_cache(maxsize=4096)
def _canonical(resource: str, text: str) -> int:
    """``text`` in canonical units of ``resource`` (errors without a path). Cached: the nodes
    of a snapshot repeat a few quantities (``"8"``, ``"2048Gi"``) 20,000 times each."""
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise InvalidInput("", f"malformed quantity {text!r} (expected e.g. '8', '500m', '64Gi', '1e3')")
    sign, digits, exp_mark, exponent, suffix = match.groups()
    mantissa = Decimal(digits)
    if sign == "-" and mantissa != 0:
        raise InvalidInput("", f"quantity must not be negative, got {text!r}")
    if mantissa == 0:
        return 0
    scale = _SUFFIX[suffix] if not exp_mark else Decimal(1)
    power = int(exponent) if exp_mark else 0
    if power > _EXPONENT_CAP:
        raise InvalidInput("", f"quantity {text!r} is out of range (at most {QUANTITY_MAX} canonical units)")
    whole_units = is_extended(resource)
    if power < -_EXPONENT_CAP:
        if whole_units:
            raise _fraction(resource, text, "")
        return 1  # a positive amount below one unit rounds up to one, like any other fraction
    number = mantissa.scaleb(power) * scale
    if resource == CPU:
        number *= 1000
    whole = int(number.to_integral_value(rounding="ROUND_CEILING"))
    if whole_units and whole != number:
        raise _fraction(resource, text, "")
    if whole > QUANTITY_MAX:
        raise InvalidInput("", f"quantity {text!r} is out of range (at most {QUANTITY_MAX} canonical units)")
    return whole


@lru_cache(maxsize=1024)
def _check_resource_name(name: str) -> None:
    """Cached for the same reason as ``_canonical``: a snapshot names a few resources per node."""
    qualified_name(name, "", "resource name")


def is_extended(resource: str) -> bool:
    """Kubernetes' extended resources (``nvidia.com/gpu``, ``rdma/hca``): a domain-prefixed name
    outside ``kubernetes.io/`` (``IsExtendedResourceName``, k8s.io/api). The API server takes
    them only in whole units, with requests equal to limits: they cannot be overcommitted."""
    return "/" in resource and "kubernetes.io/" not in resource and not resource.startswith("requests.")


def _fraction(resource: str, text: str, path: str) -> InvalidInput:
    return InvalidInput(path, f"{text!r} is not a whole number: {resource} is an extended resource, which "
                              "Kubernetes counts in whole units (a fraction of a device cannot be requested)")


def format_quantity(resource: str, amount: int) -> str:
    """Render canonical units back to a readable Kubernetes quantity."""
    if resource == CPU:
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if resource == MEMORY or resource.endswith("storage"):
        for suffix, power in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
            if amount and amount % (1 << power) == 0:
                return f"{amount >> power}{suffix}"
    return str(amount)


@dataclass(frozen=True)
class Resources:
    """An immutable resource vector in canonical units; absent keys are zero."""

    amounts: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Normalise: drop zeros, freeze into a sorted tuple-backed dict for hashing.
        clean: dict[str, int] = {}
        for k, v in sorted(self.amounts.items()):
            if (amount := int(v)) != 0:  # one int() per key: every vector the planner builds passes here
                clean[k] = amount
        object.__setattr__(self, "amounts", clean)

    @staticmethod
    def parse(values: Mapping[str, object] | None, path: str = "") -> Resources:
        """Parse a ``{resource: quantity}`` mapping from user input."""
        if values is None:
            return Resources()
        if not isinstance(values, Mapping):
            raise InvalidInput(path, "must be a mapping of resource name to quantity")
        out: dict[str, int] = {}
        for key, raw in values.items():
            key_path = f"{path}.{str(key)[:80]}" if path else str(key)[:80]
            if not isinstance(key, str) or not key:
                raise InvalidInput(path, f"resource name must be a non-empty string, got {key!r}")
            try:
                _check_resource_name(key)
            except InvalidInput as exc:
                raise InvalidInput(key_path, exc.rule) from None
            out[key] = parse_quantity(key, raw, f"{path}.{key}" if path else key)
        return Resources(out)

    @staticmethod
    def shared(amounts: Mapping[str, int]) -> Resources:
        """The vector of ``amounts`` (canonical integer units), one object per distinct
        vector: what the store decodes and keeps (cluster snapshots, job specs).

        Why: a full garbage collection walks every object the collector tracks, holding
        the GIL, and a fleet's vectors repeat (a cluster's nodes have a few shapes, its
        jobs a few pod sizes): 100 clusters of 100 nodes and 5,000 jobs held 25,000, a quarter of
        what a full collection walked (docs/benchmarks.md, "twenty-seventh stop"). Sharing
        is safe because a vector is immutable and compared by value; bounded (least
        recently used dropped), since the amounts come from agents and submitters."""
        return _shared(tuple(sorted(amounts.items())))

    @staticmethod
    def of(**kwargs: int) -> Resources:
        """Convenience for tests: ``Resources.of(cpu=1000, gpu=8)`` (``gpu`` = nvidia.com/gpu)."""
        return Resources({(GPU if k == "gpu" else k): v for k, v in kwargs.items()})

    def get(self, resource: str) -> int:
        return self.amounts.get(resource, 0)

    @property
    def gpus(self) -> int:
        return self.get(GPU)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self.amounts.items())

    def __hash__(self) -> int:
        return hash(tuple(self.amounts.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resources) and self.amounts == other.amounts

    def __bool__(self) -> bool:
        return bool(self.amounts)

    # Arithmetic and shares read the plain dicts (``dict.get``, not ``Resources.get``): the
    # planner does this per placement and per job, 10,000 times in a fleet re-plan.
    def __add__(self, other: Resources) -> Resources:
        acc = dict(self.amounts)
        for k, v in other.amounts.items():
            acc[k] = acc.get(k, 0) + v
        return Resources(acc)

    def __sub__(self, other: Resources) -> Resources:
        acc = dict(self.amounts)
        for k, v in other.amounts.items():
            acc[k] = acc.get(k, 0) - v
        return Resources(acc)

    def scaled(self, factor: int) -> Resources:
        return Resources({k: v * factor for k, v in self.amounts.items()})

    def fits_in(self, capacity: Resources) -> bool:
        """True when every requested amount is available in ``capacity``."""
        return all(v <= capacity.get(k) for k, v in self.amounts.items())

    def clamp_min_zero(self) -> Resources:
        return Resources({k: max(0, v) for k, v in self.amounts.items()})

    def dominant_share(self, total: Resources) -> float:
        """Max over resources of amount / total (0 when the total lacks the resource)."""
        share = 0.0
        caps = total.amounts
        for key, value in self.amounts.items():
            cap = caps.get(key, 0)
            if cap > 0 and value / cap > share:
                share = value / cap
        return share

    def to_quantities(self) -> dict[str, str]:
        return {k: format_quantity(k, v) for k, v in self.amounts.items()}


@lru_cache(maxsize=4096)
def _shared(amounts: tuple[tuple[str, int], ...]) -> Resources:
    return Resources(dict(amounts))


def total(vectors: Iterable[Resources]) -> Resources:
    """Sum of resource vectors."""
    acc: dict[str, int] = {}
    for vec in vectors:
        for key, value in vec:
            acc[key] = acc.get(key, 0) + value
    return Resources(acc)


def pod_request(containers: Iterable[Resources], init_containers: Iterable[tuple[Resources, bool]]) -> Resources:
    """What the kube-scheduler counts for one pod (``PodRequests`` in k8s.io/component-helpers
    ``resource/helpers.go``), without the overhead: the containers' sum plus every sidecar
    (an init container with ``restartPolicy: Always``, flagged True, which keeps running
    beside them), raised per resource to the init phase's peak, each init container's own
    request plus the sidecars started before it."""
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for request, sidecar in init_containers:
        phase = dict(sidecars)
        for key, amount in request:
            phase[key] = phase.get(key, 0) + amount
        if sidecar:
            sidecars = dict(phase)
        for key, amount in phase.items():
            peak[key] = max(peak.get(key, 0), amount)
    running = total(containers).amounts
    keys = {*running, *sidecars, *peak}
    return Resources({k: max(running.get(k, 0) + sidecars.get(k, 0), peak.get(k, 0)) for k in keys})
