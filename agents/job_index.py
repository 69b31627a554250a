"""Objects of one kind grouped by their job label, for the backends' ``list_services`` and
``list_config_maps`` with the one selector a pass uses (``{LABEL_JOB: job}``).

Why: every job's pass reads its Service and ConfigMap by that label, and scanning (and
sorting) every object of the kind for each job cost jobs x objects per pass: 4.6 s of a
7.4 s pass over 1,000 jobs (docs/benchmarks.md, "Agent pass over many jobs"). The groups
are rebuilt only when the kind has changed since, which a backend counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from agents.core.records import LABEL_JOB


class Labelled(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


L = TypeVar("L", bound=Labelled)


def one_job(selector: Mapping[str, str]) -> str | None:
    """The job a selector asks for when it is exactly ``{LABEL_JOB: job}``."""
    return selector.get(LABEL_JOB) if len(selector) == 1 else None


class JobIndex(Generic[L]):
    def __init__(self) -> None:
        self._version: int | None = None
        self._groups: dict[str, tuple[L, ...]] = {}

    def of(self, job: str, version: int, records: Callable[[], Iterable[L]]) -> list[L]:
        """Job ``job``'s objects in (namespace, name) order, as of the kind's ``version``."""
        if version != self._version:
            groups: dict[str, list[L]] = {}
            for record in records():
                owner = record.labels.get(LABEL_JOB)
                if owner is not None:
                    groups.setdefault(owner, []).append(record)
            self._groups = {owner: tuple(sorted(members, key=lambda r: (r.namespace, r.name)))
                            for owner, members in groups.items()}
            self._version = version
        return list(self._groups.get(job, ()))
