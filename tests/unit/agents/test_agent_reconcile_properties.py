"""Property tests of reconcile against the fake cluster (hypothesis).

1. One pass applied, the next pass asks for nothing (idempotence).
2. From any mess — a pass cut short at any op, room taken by others, nodes lost, pods
   failed or deleted, a new work version — repeated passes converge, every op is accepted
   by the cluster (so no duplicate pod and no double binding), and at every pass boundary
   the gang is all-or-nothing: if any live pod is bound, the gang minimum is bound, and
   only inside the Work's HyperNode.
"""

from __future__ import annotations

import asyncio

from agentkit import LABEL_KEYS, fabric, fake, gpu, job, observe, work
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.core.apply import apply_ops
from agents.core.reconcile import reconcile
from agents.core.snapshot import discover_hypernodes, to_nodes
from agents.fake.cluster import FakeCluster
from federation.domain.topology import build_tree
from federation.domain.works import Work

NODES = [f"n{i:02d}" for i in range(8)]
DOMAINS = ("t1-l0", "t1-l3", "t2-s0", "t2-s1")


@st.composite
def works(draw: st.DrawFn) -> Work:
    tasks = draw(st.lists(st.tuples(st.sampled_from(["master", "worker", "ps"]), st.integers(1, 3),
                                    st.sampled_from([0, 2, 4, 8])), min_size=1, max_size=2,
                          unique_by=lambda t: t[0]))
    total = sum(r for _, r, _ in tasks)
    min_available = draw(st.one_of(st.none(), st.integers(1, total)))
    plugins = draw(st.sampled_from([(), (("svc", ()),), (("svc", ()), ("pytorch", ()), ("deepspeed", ()))]))
    j = job(tasks=tasks, min_available=min_available, plugins=plugins)
    planned = draw(st.lists(st.tuples(st.sampled_from([t for t, _, _ in tasks]), st.integers(0, 2),
                                      st.sampled_from(NODES)), max_size=4, unique_by=lambda p: (p[0], p[1])))
    planned = [(t, i, n) for t, i, n in planned if i < j.task(t).replicas]
    return work(j, draw(st.sampled_from(DOMAINS)), planned)


MESS = st.lists(
    st.one_of(
        st.tuples(st.just("occupy"), st.sampled_from(NODES), st.sampled_from([2, 4, 8])),
        st.tuples(st.just("not-ready"), st.sampled_from(NODES), st.just(0)),
        st.tuples(st.just("fail"), st.integers(0, 5), st.just(0)),
        st.tuples(st.just("delete"), st.integers(0, 5), st.just(0)),
        st.tuples(st.just("new-version"), st.sampled_from(DOMAINS), st.just(0)),
        st.just(("fill-all", "", 0)),  # another scheduler takes every free GPU
    ),
    max_size=4,
)


def domain_nodes(name: str) -> frozenset[str]:
    nodes = fabric()
    return build_tree(discover_hypernodes(nodes, LABEL_KEYS), to_nodes(nodes, [])).domains[name].nodes


def check_gang(cluster: FakeCluster, w: Work) -> None:
    pods = [p for p in cluster.pods({"federation.io/job": w.name}) if p.version == w.version]
    with_node = [p for p in pods if p.node is not None]
    if any(not p.terminal for p in with_node):
        assert len(with_node) >= w.job.gang_size, "half-bound gang"
    allowed = domain_nodes(w.placement.hypernode)
    for p in with_node:
        assert p.node in allowed, f"{p.name} bound outside {w.placement.hypernode}"


async def converge(cluster: FakeCluster, w: Work, passes: int = 6) -> int:
    for n in range(passes):
        result = reconcile(w, await observe(cluster, w))
        if not result.ops:
            return n
        applied = await apply_ops(cluster, result.ops)
        assert applied.ok, applied.error
        check_gang(cluster, w)
    raise AssertionError(f"no fixed point after {passes} passes")


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(works(), st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from([2, 4, 8])), max_size=3))
def test_one_applied_pass_leaves_nothing_to_do(w: Work, squatters: list[tuple[str, int]]) -> None:
    async def scenario() -> None:
        cluster = fake()
        for i, (node, gpus) in enumerate(squatters):
            if cluster.free(node).gpus >= gpus:
                cluster.occupy(f"squatter-{i}", node, gpu(gpus, cpu=0))
        first = reconcile(w, await observe(cluster, w))
        assert (await apply_ops(cluster, first.ops)).ok
        check_gang(cluster, w)
        assert reconcile(w, await observe(cluster, w)).ops == ()

    asyncio.run(scenario())


@SETTINGS
@given(works(), st.floats(0, 1), MESS)
def test_any_mess_converges_without_duplicates_or_half_bound_gangs(
    w: Work, cut: float, mess: list[tuple[str, object, int]]
) -> None:
    async def scenario() -> None:
        cluster = fake()
        current = w
        ops = reconcile(current, await observe(cluster, current)).ops
        assert (await apply_ops(cluster, ops[: round(cut * len(ops))])).ok  # an agent killed mid-pass
        for kind, arg, amount in mess:
            pods = cluster.pods({"federation.io/job": current.name})
            if kind == "occupy" and isinstance(arg, str) and cluster.free(arg).gpus >= amount:
                cluster.occupy(f"squatter-{len(cluster.pods())}", arg, gpu(amount, cpu=0))
            elif kind == "fill-all":
                for n in NODES:
                    if cluster.free(n).gpus:
                        cluster.occupy(f"filler-{n}", n, gpu(cluster.free(n).gpus, cpu=0))
            elif kind == "not-ready" and isinstance(arg, str):
                cluster.set_node_ready(arg, False)
            elif kind == "fail" and isinstance(arg, int) and arg < len(pods) and pods[arg].node is not None:
                cluster.fail_pod(pods[arg].name)  # only a pod that ran can fail
            elif kind == "delete" and isinstance(arg, int) and arg < len(pods):
                await cluster.delete_pod("default", pods[arg].name)
            elif kind == "new-version" and isinstance(arg, str):
                current = work(current.job, arg, version=current.version + 1)
        await converge(cluster, current)
        check_gang(cluster, current)
        stale = [p for p in cluster.pods({"federation.io/job": current.name}) if p.version != current.version]
        assert stale == []
        names = [p.name for p in cluster.pods()]
        assert len(names) == len(set(names))

    asyncio.run(scenario())
