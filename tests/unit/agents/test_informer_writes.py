"""The informer orders our own writes against watch events and lists.

A write-through arrives after the watch may have moved on; it must never bring back an
object the cluster has deleted. The first row is the case a real kube-apiserver produced
in the e2e suite: the DELETE of a Failed pod answered with the pod and no
resourceVersion, after the watch had delivered the pod's DELETED event. The cache then
held the pod as terminating forever and the gang waited for its name to be freed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from agents.k8s.informer import Informer

KEY = ("default", "job-worker-0")


def pod(rv: int | None, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": KEY[0], "name": KEY[1]}
    if rv is not None:
        meta["resourceVersion"] = str(rv)
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T23:34:07Z"
    return {"kind": "Pod", "metadata": meta, "status": {"phase": phase}}


class ListAnswer:
    """What ``call`` reads from a generated list method called with ``_preload_content=False``."""

    status = 200

    def __init__(self, items: list[dict[str, Any]], rv: int) -> None:
        self.body = json.dumps({"items": items, "metadata": {"resourceVersion": str(rv)}}).encode()

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        return None


def informer(listed: list[dict[str, Any]] | None = None, list_rv: int = 0) -> Informer[Mapping[str, Any]]:
    async def answer() -> ListAnswer:
        return ListAnswer(listed or [], list_rv)

    def list_fn(**_: Any) -> Any:
        return answer()

    return Informer("pods", list_fn, lambda obj: obj, lambda *_: None)


def watch(kind: str, obj: dict[str, Any]) -> Callable[[Informer[Mapping[str, Any]]], None]:
    return lambda inf: inf._apply(kind, obj)  # the watch loop's own entry point


def upsert(obj: dict[str, Any]) -> Callable[[Informer[Mapping[str, Any]]], None]:
    return lambda inf: inf.upsert(obj)


def phase(inf: Informer[Mapping[str, Any]]) -> str | None:
    held = inf.get(KEY)
    if held is None:
        return None
    return str(held["status"]["phase"]) + (" deleting" if held["metadata"].get("deletionTimestamp") else "")


CASES = {
    "delete answered without a resourceVersion after the DELETED event": (
        [watch("ADDED", pod(450, "Failed")), watch("DELETED", pod(452, "Failed", True)),
         upsert(pod(None, "Failed", True))], None),
    "delete answered at the deletion's version after the DELETED event": (
        [watch("ADDED", pod(450, "Failed")), watch("DELETED", pod(452, "Failed", True)),
         upsert(pod(452, "Failed", True))], None),
    "delete answered before the DELETED event": (
        [watch("ADDED", pod(450, "Failed")), upsert(pod(451, "Failed", True)),
         watch("DELETED", pod(452, "Failed", True))], None),
    "terminating until the watch says it is gone": (
        [watch("ADDED", pod(450)), upsert(pod(451, deleting=True))], "Running deleting"),
    "an answer without a resourceVersion updates a held object": (
        [watch("ADDED", pod(450)), upsert(pod(None, deleting=True))], "Running deleting"),
    "the next watch event replaces an unordered answer": (
        [watch("ADDED", pod(450)), upsert(pod(None, deleting=True)), watch("MODIFIED", pod(451, "Failed"))],
        "Failed"),
    "a stale watch event does not replace a newer write": (
        [upsert(pod(460, "Pending")), watch("MODIFIED", pod(455))], "Pending"),
    "a create is read back at once": ([upsert(pod(460, "Pending"))], "Pending"),
    "the name is reused after a deletion": (
        [watch("ADDED", pod(450)), watch("DELETED", pod(452)), upsert(pod(460, "Pending"))], "Pending"),
}


@pytest.mark.parametrize("steps,expected", list(CASES.values()), ids=list(CASES))
def test_our_writes_are_ordered_against_the_watch(
        steps: list[Callable[[Informer[Mapping[str, Any]]], None]], expected: str | None) -> None:
    inf = informer()
    for step in steps:
        step(inf)
    assert phase(inf) == expected


async def test_a_late_write_for_an_object_the_last_list_lacked_is_dropped() -> None:
    """A relist clears the tombstones; the list's own resourceVersion still says that an
    object older than the list and absent from it was deleted."""
    inf = informer(listed=[], list_rv=500)
    inf.upsert(pod(450))
    await inf.relist()
    assert phase(inf) is None
    inf.upsert(pod(480, deleting=True))  # a DELETE answered after the relist
    assert phase(inf) is None
    inf.upsert(pod(510, "Pending"))  # created after the list
    assert phase(inf) == "Pending"
