"""Each job's pass reads its Service and ConfigMap by the job label: the backends answer
from groups built once per change of the kind (agents/job_index.py), the same lists a
scan of every object gives."""

from __future__ import annotations

from collections.abc import Iterator

from agentkit import fake

from agents.core.records import LABEL_JOB, ConfigMapManifest, ServiceManifest
from agents.job_index import JobIndex, one_job


def _svc(job: str, namespace: str = "default", name: str | None = None) -> ServiceManifest:
    return ServiceManifest(name=name or job, namespace=namespace, labels={LABEL_JOB: job}, selector={LABEL_JOB: job})


async def test_the_fake_answers_a_job_selector_as_a_scan_does_through_changes() -> None:
    cluster = fake()
    for job in ("b", "a", "c"):
        await cluster.create_service(_svc(job))
    await cluster.create_service(_svc("a", namespace="other"))
    await cluster.create_config_map(ConfigMapManifest(name="a-hosts", namespace="default", labels={LABEL_JOB: "a"},
                                                      data={"x": "1"}))

    async def check() -> None:
        for job in ("a", "b", "c", "missing"):
            want = [s for s in await cluster.list_services({}) if s.labels.get(LABEL_JOB) == job]
            assert await cluster.list_services({LABEL_JOB: job}) == want
            want_cm = [c for c in await cluster.list_config_maps({}) if c.labels.get(LABEL_JOB) == job]
            assert await cluster.list_config_maps({LABEL_JOB: job}) == want_cm

    await check()
    await cluster.delete_service("default", "b")
    await cluster.annotate_service("default", "a", "k", "v")
    await check()
    assert (await cluster.list_services({LABEL_JOB: "a"}))[0].annotations.get("k") == "v"


def test_groups_are_built_once_per_version_of_the_kind() -> None:
    index: JobIndex[ServiceManifest] = JobIndex()
    reads = 0
    services = [_svc("a"), _svc("b"), _svc("a", name="a2")]

    def records() -> Iterator[ServiceManifest]:
        nonlocal reads
        reads += 1
        yield from services

    for job in ("a", "b", "a", "c") * 50:  # a pass over many jobs, nothing changed
        index.of(job, 7, records)
    assert reads == 1
    assert [s.name for s in index.of("a", 7, records)] == ["a", "a2"]
    services.append(_svc("c"))
    assert index.of("c", 8, records) == [services[-1]] and reads == 2


def test_only_the_exact_job_selector_takes_the_index() -> None:
    assert one_job({LABEL_JOB: "a"}) == "a"
    assert one_job({}) is None and one_job({LABEL_JOB: "a", "x": "y"}) is None and one_job({"x": "a"}) is None


async def test_the_kubernetes_backend_regroups_after_an_informer_change() -> None:
    from kubernetes_asyncio.client import ApiClient

    from agents.k8s.backend import KubernetesBackend

    def obj(job: str, rv: int) -> dict[str, object]:
        return {"kind": "Service", "metadata": {"namespace": "d", "name": job, "resourceVersion": str(rv),
                                                "labels": {LABEL_JOB: job}}, "spec": {"selector": {LABEL_JOB: job}}}

    async with ApiClient() as api:
        backend = KubernetesBackend(api, "c1", owns_client=False)
        backend._ready.set()  # no informers to start: the cache is fed by hand
        backend.services.upsert(obj("a", 5))
        assert [s.name for s in await backend.list_services({LABEL_JOB: "a"})] == ["a"]
        backend.services.upsert(obj("b", 6))
        assert [s.name for s in await backend.list_services({LABEL_JOB: "b"})] == ["b"]
        backend.services.remove(("d", "a"), "7")
        assert await backend.list_services({LABEL_JOB: "a"}) == []
