"""Kubernetes quantities and resource vectors.

Quantities are parsed once at the edge into integers in canonical units so that every
later comparison is exact: ``cpu`` in millicores, ``memory`` and ``ephemeral-storage``
in bytes, every other resource (``nvidia.com/gpu``, ``pods``) as a plain count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from federation.domain.errors import InvalidInput

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
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


def parse_quantity(resource: str, value: object, path: str = "") -> int:
    """Parse a Kubernetes quantity for ``resource`` into canonical integer units.

    CPU becomes millicores (``"500m"`` -> 500, ``"2"`` -> 2000); everything else is
    rounded up to a whole unit (``"8Gi"`` -> 8589934592). Negative values and malformed
    strings such as ``"8Gx"`` are refused with the field path.
    """
    if isinstance(value, bool):
        raise InvalidInput(path, f"quantity must be a number or string, got {value!r}")
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise InvalidInput(path, f"malformed quantity {text!r} (expected e.g. '8', '500m', '64Gi')")
    try:
        number = Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation as exc:  # pragma: no cover - regex already filters
        raise InvalidInput(path, f"malformed quantity {text!r}") from exc
    if number < 0:
        raise InvalidInput(path, f"quantity must not be negative, got {text!r}")
    if resource == CPU:
        number *= 1000
    whole = int(number.to_integral_value(rounding="ROUND_CEILING"))
    return whole


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
        clean = {k: int(v) for k, v in sorted(self.amounts.items()) if int(v) != 0}
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
            if not isinstance(key, str) or not key:
                raise InvalidInput(path, f"resource name must be a non-empty string, got {key!r}")
            out[key] = parse_quantity(key, raw, f"{path}.{key}" if path else key)
        return Resources(out)

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

    def __add__(self, other: Resources) -> Resources:
        keys = set(self.amounts) | set(other.amounts)
        return Resources({k: self.get(k) + other.get(k) for k in keys})

    def __sub__(self, other: Resources) -> Resources:
        keys = set(self.amounts) | set(other.amounts)
        return Resources({k: self.get(k) - other.get(k) for k in keys})

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
        for key, value in self.amounts.items():
            cap = total.get(key)
            if cap > 0:
                share = max(share, value / cap)
        return share

    def to_quantities(self) -> dict[str, str]:
        return {k: format_quantity(k, v) for k, v in self.amounts.items()}


def total(vectors: Iterable[Resources]) -> Resources:
    """Sum of resource vectors."""
    acc: dict[str, int] = {}
    for vec in vectors:
        for key, value in vec:
            acc[key] = acc.get(key, 0) + value
    return Resources(acc)
