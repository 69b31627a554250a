"""One read of the cluster shared by every job of a pass (agents/core/view.py): reused
while the backend's revision stands, rebuilt after any change, and never staler than the
per-job read it replaces."""

from __future__ import annotations

from agentkit import LABEL_KEYS, fake, gpu, job, work

from agents.core.apply import observe_job
from agents.core.controller import JobController
from agents.core.view import ClusterViews
from agents.runtime_jobs import JobBook
from federation.domain.jobs import Job
from federation.domain.works import Work


def _one_pod(name: str, node: str, leaf: str = "t1-l0") -> Work:
    j: Job = job(name, (("worker", 1, 8),))
    return work(j, leaf, [("worker", 0, node)])


async def test_a_steady_pass_over_many_jobs_reads_the_cluster_once() -> None:
    cluster = fake()
    book = JobBook(LABEL_KEYS)
    for i, node in enumerate(["n00", "n01", "n02", "n03"]):
        book.accept(_one_pod(f"j{i}", node))
    for now in (0.0, 1.0):  # bind, then see them run
        for slot in book.slots.values():
            await slot.controller.sync(cluster, now, None)
    cluster.occupy("theirs", "n07", gpu(8))  # a change from outside: the next pass must read again
    before = book.views.builds
    for slot in book.slots.values():
        report = await slot.controller.sync(cluster, 2.0, None)
        assert not report.error
    assert book.views.builds == before + 1  # four jobs, one read


async def test_room_one_job_takes_is_seen_by_the_next_job_of_the_same_pass() -> None:
    """Both jobs were planned onto n00, which holds one of them. The first binds; the
    second must see n00 full (its own pass reads after the first one's writes), not a
    view from before them, or it would bind onto a full node."""
    cluster = fake()
    views = ClusterViews()
    first = JobController(_one_pod("a", "n00"), label_keys=LABEL_KEYS, views=views)
    second = JobController(_one_pod("b", "n00"), label_keys=LABEL_KEYS, views=views)
    await views.get(cluster, LABEL_KEYS)  # a view from before either pass
    assert not (await first.sync(cluster, 0.0, None)).error
    report = await second.sync(cluster, 0.0, None)
    assert not report.error
    assert cluster.pod("a-worker-0").node == "n00"  # type: ignore[union-attr]
    assert cluster.pod("b-worker-0").node == "n01"  # type: ignore[union-attr]  # the other node of leaf l0


async def test_a_change_from_outside_moves_the_revision_and_the_view() -> None:
    cluster = fake()
    views = ClusterViews()
    before = await views.get(cluster, LABEL_KEYS)
    assert await views.get(cluster, LABEL_KEYS) is before
    cluster.occupy("theirs", "n00", gpu(8))
    after = await views.get(cluster, LABEL_KEYS)
    assert after is not before and after.revision > before.revision
    assert next(n for n in after.nodes if n.name == "n00").free.gpus == 0


async def test_other_label_keys_get_their_own_view() -> None:
    cluster = fake()
    views = ClusterViews()
    with_tree = await views.get(cluster, LABEL_KEYS)
    without = await views.get(cluster, ())
    assert with_tree.tree is not None and with_tree.tree.by_tier != without.tree.by_tier  # type: ignore[union-attr]


async def test_a_shared_view_observes_exactly_what_a_fresh_read_does() -> None:
    cluster = fake()
    views = ClusterViews()
    jobs = [_one_pod("a", "n00"), _one_pod("b", "n02")]
    for w in jobs:
        await JobController(w, label_keys=LABEL_KEYS, views=views).sync(cluster, 0.0, None)
    cluster.occupy("theirs", "n03", gpu(4))
    for w in jobs:
        shared = await observe_job(cluster, w.name, tree=None, label_keys=LABEL_KEYS, views=views)
        fresh = await observe_job(cluster, w.name, tree=None, label_keys=LABEL_KEYS)
        assert shared.pods == fresh.pods and shared.nodes == fresh.nodes
        assert shared.tree is not None and fresh.tree is not None
        assert shared.tree.by_tier == fresh.tree.by_tier


async def test_the_kubernetes_backend_moves_its_revision_on_nodes_pods_and_hypernodes_only() -> None:
    """The informers' write-through and watch events share one entry point, so a pod the
    agent creates and a pod another scheduler binds both move the revision; a Service
    or ConfigMap (no part of the view) does not."""
    from kubernetes_asyncio.client import ApiClient

    from agents.k8s.backend import KubernetesBackend

    async with ApiClient() as api:
        backend = KubernetesBackend(api, "c1", owns_client=False)
        start = backend.revision
        backend.services.upsert({"kind": "Service", "metadata": {"namespace": "d", "name": "s", "resourceVersion": "5",
                                                                 "labels": {"federation.io/job": "s"}}, "spec": {}})
        assert backend.revision == start
        backend.pods.upsert({"kind": "Pod", "metadata": {"namespace": "d", "name": "p", "resourceVersion": "6"},
                             "spec": {"containers": []}, "status": {"phase": "Pending"}})
        assert backend.revision == start + 1
        backend.nodes.upsert({"kind": "Node", "metadata": {"name": "n", "resourceVersion": "7"},
                              "status": {"allocatable": {"cpu": "1"}}})
        assert backend.revision == start + 2


class _Ticks:
    """A clock each read of which advances by ``step`` (so a build takes one step)."""

    def __init__(self, step: float = 1.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def test_inside_a_pass_others_changes_wait_for_the_reuse_window_but_own_writes_never_do() -> None:
    cluster = fake()
    clock = _Ticks()
    views = ClusterViews(clock=clock)
    first = await views.get(cluster, LABEL_KEYS)  # built in one tick: reused for REUSE_FACTOR more
    cluster.occupy("theirs", "n00", gpu(8))
    with views.one_pass(cluster):
        assert await views.get(cluster, LABEL_KEYS) is not first  # changed before the pass began
        inside = await views.get(cluster, LABEL_KEYS)
        cluster.occupy("more", "n01", gpu(8))  # others, during the pass
        assert await views.get(cluster, LABEL_KEYS) is inside
        clock.now += 10  # past the window
        later = await views.get(cluster, LABEL_KEYS)
        assert later is not inside and next(n for n in later.nodes if n.name == "n01").free.gpus == 0
        cluster.occupy("again", "n02", gpu(8))
        assert await views.get(cluster, LABEL_KEYS) is later
        ctl = JobController(_one_pod("a", "n03", "t1-l1"), label_keys=LABEL_KEYS, views=views)
        assert not (await ctl.sync(cluster, 0.0, None)).error  # creates and binds: own writes
        mine = await views.get(cluster, LABEL_KEYS)
        assert mine is not later and next(n for n in mine.nodes if n.name == "n03").free.gpus == 0
    cluster.occupy("outside", "n04", gpu(8))
    assert await views.get(cluster, LABEL_KEYS) is not mine  # no pass: the revision alone decides
