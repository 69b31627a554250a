"""The in-memory cluster honours the ClusterBackend contract strictly."""

from __future__ import annotations

import asyncio

import pytest
from agentkit import fake, gpu, node

from agents.backend import AlreadyExists, BindingRejected, ClusterBackend, NotFound
from agents.core.records import ConfigMapManifest, PodManifest, ServiceManifest
from agents.fake.clock import ManualClock
from agents.fake.cluster import FakeCluster
from federation.domain.errors import InvalidInput
from federation.domain.resources import Resources


def manifest(name: str = "p", gpus: int = 8, labels: dict[str, str] | None = None) -> PodManifest:
    return PodManifest(name, "default", labels=labels or {"app": "x"}, requests=gpu(gpus))


def test_fake_satisfies_the_protocol() -> None:
    backend: ClusterBackend = fake()
    assert isinstance(backend, ClusterBackend)
    assert backend.cluster == "c1"


async def test_create_is_unique_per_name_and_list_round_trips_the_manifest() -> None:
    cluster = fake()
    created = await cluster.create_pod(manifest(labels={"app": "x", "k": "v"}))
    assert created.phase == "Pending" and created.node is None
    with pytest.raises(AlreadyExists):
        await cluster.create_pod(manifest())
    [listed] = await cluster.list_pods({"k": "v"})
    assert listed.labels == {"app": "x", "k": "v"} and listed.requests == gpu(8)
    assert await cluster.list_pods({"k": "other"}) == []


BIND_REJECTIONS = [
    pytest.param("nope", "does not exist", id="missing-node"),
    pytest.param("n01", "not ready", id="not-ready-node"),
    pytest.param("n00", "no room", id="full-node"),
]


@pytest.mark.parametrize(("target", "message"), BIND_REJECTIONS)
async def test_binding_is_validated(target: str, message: str) -> None:
    cluster = fake([node("n00"), node("n01", ready=False)])
    cluster.occupy("squatter", "n00", gpu(4))
    await cluster.create_pod(manifest())
    with pytest.raises(BindingRejected, match=message):
        await cluster.bind_pod("default", "p", target)


async def test_a_pod_is_never_bound_twice_and_binding_a_missing_pod_fails() -> None:
    cluster = fake([node("n00"), node("n01")])
    await cluster.create_pod(manifest(gpus=1))
    await cluster.bind_pod("default", "p", "n00")
    with pytest.raises(BindingRejected, match="already bound"):
        await cluster.bind_pod("default", "p", "n01")
    with pytest.raises(NotFound):
        await cluster.bind_pod("default", "ghost", "n00")
    assert cluster.bind_count == 1


async def test_bound_pods_run_and_succeed_after_their_runtime_on_the_injected_clock() -> None:
    clock = ManualClock(1000.0)
    cluster = fake([node("n00")], clock=clock, runtime=60.0)
    await cluster.create_pod(manifest())
    await cluster.bind_pod("default", "p", "n00")
    pod = cluster.pod("p")
    assert pod is not None and (pod.phase, pod.node, pod.phase_since) == ("Running", "n00", 1000.0)
    assert cluster.advance(59.0) == []
    [done] = cluster.advance(1.0)
    assert (done.phase, done.exit_code, done.phase_since) == ("Succeeded", 0, 1060.0)
    assert cluster.free("n00") == Resources.of(gpu=8, cpu=64000)


async def test_shared_clock_drives_tick() -> None:
    clock = ManualClock()
    cluster = FakeCluster("c1", [node("n00")], clock=clock, runtime=lambda _m: 5.0)
    await cluster.create_pod(manifest())
    await cluster.bind_pod("default", "p", "n00")
    clock.advance(5.0)
    assert [p.name for p in cluster.tick()] == ["p"]


async def test_advance_needs_a_manual_clock() -> None:
    cluster = FakeCluster("c1", clock=lambda: 0.0)
    with pytest.raises(TypeError):
        cluster.advance(1.0)


async def test_faults_fail_evict_node_not_ready_and_node_removed() -> None:
    clock = ManualClock(10.0)
    cluster = fake([node("n00"), node("n01")], clock=clock)
    for name, target in (("a", "n00"), ("b", "n00"), ("c", "n01")):
        await cluster.create_pod(manifest(name, gpus=1))
        await cluster.bind_pod("default", name, target)
    clock.advance(5.0)
    cluster.fail_pod("a", exit_code=137, reason="OOMKilled")
    cluster.evict_pod("b")
    cluster.set_node_ready("n01", False)
    a, b, c = (cluster.pod(x) for x in "abc")
    assert a is not None and (a.phase, a.exit_code, a.reason, a.phase_since) == ("Failed", 137, "OOMKilled", 15.0)
    assert b is not None and (b.phase, b.reason) == ("Failed", "Evicted")
    assert c is not None and c.phase == "Running"
    node01 = cluster.node("n01")
    assert node01 is not None and not node01.ready
    cluster.remove_node("n01")
    c = cluster.pod("c")
    assert c is not None and (c.phase, c.reason, c.node) == ("Unknown", "NodeLost", "n01")
    assert [n.name for n in await cluster.list_nodes()] == ["n00"]


async def test_an_unbound_pod_cannot_fail_because_it_never_ran() -> None:
    cluster = fake()
    await cluster.create_pod(manifest())
    with pytest.raises(ValueError, match="never ran"):
        cluster.fail_pod("p")


async def test_services_and_config_maps_are_unique_and_deletes_idempotent() -> None:
    cluster = fake()
    svc = ServiceManifest("j", "default", labels={"job": "j"})
    cm = ConfigMapManifest("j-hosts", "default", labels={"job": "j"}, data={"a": "b"})
    await cluster.create_service(svc)
    await cluster.create_config_map(cm)
    with pytest.raises(AlreadyExists):
        await cluster.create_service(svc)
    assert await cluster.list_services({"job": "j"}) == [svc]
    assert await cluster.list_config_maps({"job": "j"}) == [cm]
    assert await cluster.delete_service("default", "j") is True
    assert await cluster.delete_service("default", "j") is False
    assert await cluster.delete_config_map("default", "j-hosts") is True
    assert await cluster.delete_pod("default", "nothing") is False


async def test_hypernode_error_is_raised_as_invalid_input() -> None:
    cluster = fake()
    cluster.set_hypernode_error("spec.members[0]: bad selector")
    with pytest.raises(InvalidInput):
        await cluster.list_hypernodes()
    cluster.set_hypernodes([])
    assert await cluster.list_hypernodes() == []


async def test_watch_emits_an_event_for_every_mutation_from_subscription_on() -> None:
    cluster = fake([node("n00")])
    watch = cluster.watch()
    await cluster.create_pod(manifest(gpus=1))
    await cluster.bind_pod("default", "p", "n00")
    cluster.set_node_ready("n00", False)
    await cluster.delete_pod("default", "p")
    seen = [await asyncio.wait_for(watch.__anext__(), 1) for _ in range(4)]
    assert [(e.kind, e.type) for e in seen] == [("Pod", "ADDED"), ("Pod", "MODIFIED"), ("Node", "MODIFIED"),
                                                ("Pod", "DELETED")]
    await watch.aclose()  # type: ignore[attr-defined]  # an async generator, typed as AsyncIterator
