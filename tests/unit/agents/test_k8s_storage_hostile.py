"""The Kubernetes backend's claim writes against a cluster that answers with objects of the
wrong shape: what a claim of the job's name holds is hostile input, so it is refused as a
``BackendError`` (the pass reports it and backs off), never an exception that escapes the
pass, and a claim that is not this job's is never deleted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentkit import HttpAnswer

from agents.backend import AlreadyExists
from agents.core.records import LABEL_JOB, ClaimManifest
from agents.k8s import api as k8s
from agents.k8s.storage import StorageObjects
from federation.domain.job_volumes import ClaimSpec


class Answer(HttpAnswer):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__([json.dumps(body).encode()])
        self.status = status


class Core:
    """The two claim calls of CoreV1Api the writes use, answering what a test says."""

    def __init__(self, stored: Any, create_status: int = 409) -> None:
        self.stored, self.create_status, self.deleted = stored, create_status, False

    async def create_namespaced_persistent_volume_claim(self, *_: Any, **__: Any) -> Answer:
        return Answer(self.create_status, {"reason": "AlreadyExists", "message": "exists"})

    async def read_namespaced_persistent_volume_claim(self, *_: Any, **__: Any) -> Answer:
        return Answer(200, self.stored)

    async def delete_namespaced_persistent_volume_claim(self, *_: Any, **__: Any) -> Answer:
        self.deleted = True
        return Answer(200, {})


def _backend(monkeypatch: pytest.MonkeyPatch, core: Core) -> StorageObjects:
    monkeypatch.setattr(k8s, "core_api", lambda _api: core)
    backend = StorageObjects()
    backend._api = object()
    return backend


MALFORMED = [
    pytest.param({"metadata": "not a mapping"}, id="metadata-a-string"),
    pytest.param({"metadata": {"name": "train-pvc-0", "labels": ["a", "list"]}}, id="labels-a-list"),
]


@pytest.mark.parametrize("stored", MALFORMED)
async def test_a_malformed_claim_of_the_jobs_name_is_not_deleted(monkeypatch: pytest.MonkeyPatch,
                                                                 stored: Any) -> None:
    core = Core(stored)
    assert await _backend(monkeypatch, core).delete_claim("default", "train-pvc-0", "train") is False
    assert not core.deleted


@pytest.mark.parametrize("stored", MALFORMED)
async def test_a_malformed_claim_in_the_way_of_a_create_is_already_exists(monkeypatch: pytest.MonkeyPatch,
                                                                          stored: Any) -> None:
    manifest = ClaimManifest("train-pvc-0", "default", ClaimSpec(("ReadWriteOnce",), 1 << 30),
                             labels={LABEL_JOB: "train"})
    with pytest.raises(AlreadyExists, match="train-pvc-0"):
        await _backend(monkeypatch, Core(stored)).create_claim(manifest)
