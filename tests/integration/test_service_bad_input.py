"""Every bad input of issue 2 is INVALID_ARGUMENT naming the field path, and changes nothing.

Jobs go through JobService.SubmitJob; snapshots through AgentService.Connect (the agent
hub validates them with ``convert.snapshot_from_proto`` and refuses a bad tree on the
open stream, see the snapshot test's docstring). Invalid YAML and unknown kinds
cannot reach the server (the wire carries a JobSpec, not YAML): ``fedctl`` refuses them
while loading the file, tested in ``test_fedctl_bad_input.py`` together with every case
here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import grpc.aio
import pytest
from servicekit import ADMIN, EAST, client, counts, queue, running, secured, spec

from federation.client import ServiceError
from federation.store import Store
from federation.v1 import agent_pb2, agent_pb2_grpc, types_pb2

Mutation = Callable[[types_pb2.JobSpec], None]


def _policy(action: str, event: str) -> Mutation:
    def mutate(s: types_pb2.JobSpec) -> None:
        s.policies.append(types_pb2.LifecyclePolicy(action=action, events=[event]))

    return mutate


def _duplicate_task(s: types_pb2.JobSpec) -> None:
    s.tasks.append(types_pb2.TaskSpec(name="worker", replicas=1, resources={"cpu": "1"}))


def _tiers(allowed: int | None, name: str | None) -> Mutation:
    def mutate(s: types_pb2.JobSpec) -> None:
        s.network_topology.mode = "hard"
        if allowed is not None:
            s.network_topology.highest_tier_allowed = allowed
        if name is not None:
            s.network_topology.highest_tier_name = name

    return mutate


def _set(**fields: object) -> Mutation:
    def mutate(s: types_pb2.JobSpec) -> None:
        for key, value in fields.items():
            setattr(s, key, value)

    return mutate


def _task(**fields: object) -> Mutation:
    def mutate(s: types_pb2.JobSpec) -> None:
        for key, value in fields.items():
            if key == "resources":
                s.tasks[0].resources.update(value)  # type: ignore[call-overload]  # deliberately wrong value types for the protobuf map
            else:
                setattr(s.tasks[0], key, value)

    return mutate


CASES: list[tuple[str, Mutation, str]] = [
    ("unknown queue", _set(queue="no-such-queue"), "spec.queue"),
    ("replicas below one", _task(replicas=0), "spec.tasks[0].replicas"),
    ("minAvailable above total replicas", _set(min_available=3), "spec.minAvailable"),
    ("minSuccess above total replicas", _set(min_success=3), "spec.minSuccess"),
    ("minSuccess zero", _set(min_success=0), "spec.minSuccess"),
    ("ttlSecondsAfterFinished negative", _set(ttl_seconds_after_finished=-1), "spec.ttlSecondsAfterFinished"),
    ("malformed quantity 8Gx", _task(resources={"memory": "8Gx"}), "spec.tasks[0].resources.memory"),
    ("duplicate task names", _duplicate_task, "spec.tasks[1].name"),
    ("highestTierAllowed below one", _tiers(0, None), "spec.networkTopology.highestTierAllowed"),
    ("both tier limits", _tiers(2, "spine"), "spec.networkTopology.highestTierName"),
    ("unknown restart event", _policy("RestartPod", "PodExploded"), "spec.policies[0].events[0]"),
    ("unknown restart action", _policy("Reboot", "PodFailed"), "spec.policies[0].action"),
    ("over the JobSpec size limit", _task(template_json='{"pad": "' + "x" * (1100 * 1024) + '"}'), "spec"),
]


@pytest.mark.parametrize(("mutate", "path"), [pytest.param(m, p, id=n) for n, m, p in CASES])
async def test_a_bad_job_is_invalid_argument_naming_the_field_and_stores_nothing(
        store: Store, mutate: Mutation, path: str) -> None:
    async with running(store) as srv, client(srv) as c:
        await c.create_queue(queue("research"))
        bad = spec("bad-job")
        mutate(bad)
        before = counts(store)
        with pytest.raises(ServiceError) as err:
            await c.submit_job(bad)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.message.startswith(f"{path}:"), err.value.message
        assert counts(store) == before


async def test_a_request_over_the_request_limit_is_refused_before_any_handler(store: Store) -> None:
    async with running(store) as srv, client(srv) as c:
        await c.create_queue(queue("research"))
        before = counts(store)
        huge = spec("huge", **{})
        huge.tasks[0].template_json = '{"pad": "' + "x" * (5 * 1024 * 1024) + '"}'
        with pytest.raises(ServiceError) as err:
            await c.submit_job(huge)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "over the 4194304-byte limit of SubmitJob" in err.value.message
        assert counts(store) == before


# ---------------------------------------------------------------------- snapshots


def _hn(name: str, tier: int, *members: types_pb2.HyperNodeMember) -> types_pb2.HyperNode:
    return types_pb2.HyperNode(name=name, tier=tier, members=list(members))


def _node(name: str) -> types_pb2.HyperNodeMember:
    return types_pb2.HyperNodeMember(type=types_pb2.MEMBER_TYPE_NODE, exact_name=name)


def _hyper(name: str) -> types_pb2.HyperNodeMember:
    return types_pb2.HyperNodeMember(type=types_pb2.MEMBER_TYPE_HYPERNODE, exact_name=name)


def _snapshot(*tree: types_pb2.HyperNode) -> types_pb2.ClusterSnapshot:
    nodes = [types_pb2.Node(name=f"n{i}", allocatable={"cpu": "8", "nvidia.com/gpu": "8"},
                            free={"cpu": "8", "nvidia.com/gpu": "8"}, ready=True) for i in range(2)]
    return types_pb2.ClusterSnapshot(cluster="east", nodes=nodes, hyper_nodes=list(tree))


GOOD_TREE = (_hn("spine", 2, _hyper("leaf-1")), _hn("leaf-1", 1, _node("n0"), _node("n1")))
BAD_TREES = [
    pytest.param((_hn("a", 2, _hyper("b")), _hn("b", 1, _hyper("a"))), "snapshot.hyperNodes[0]", id="cycle"),
    pytest.param((_hn("a", 1, _node("n0"), _hyper("zzz")),), "snapshot.hyperNodes[0].spec.members[1]",
                 id="unknown member"),
    pytest.param((_hn("a", 2, types_pb2.HyperNodeMember(type=types_pb2.MEMBER_TYPE_HYPERNODE, regex="leaf-.*")),
                  _hn("leaf-1", 1, _node("n0"))), "snapshot.hyperNodes[0].spec.members[0].selector",
                 id="regex selector on a HyperNode member"),
    pytest.param((_hn("a", 2, types_pb2.HyperNodeMember(type=types_pb2.MEMBER_TYPE_HYPERNODE,
                                                         labels=types_pb2.LabelMatch(match_labels={"x": "y"}))),
                  _hn("leaf-1", 1, _node("n0"))), "snapshot.hyperNodes[0].spec.members[0].selector",
                 id="label selector on a HyperNode member"),
    pytest.param(tuple(_hn(f"p{k}", 1, types_pb2.HyperNodeMember(type=types_pb2.MEMBER_TYPE_NODE, regex=f"^n|z{k}"))
                       for k in range(65)),
                 "snapshot.hyperNodes[64].spec.members[0].selector.regexMatch.pattern",
                 id="a node matched by 65 distinct regexMatch patterns"),
]


async def _session(port: int, *messages: agent_pb2.AgentMessage) -> list[agent_pb2.CentralMessage]:
    """Send ``messages`` on one Connect stream as the east agent; collect replies until it ends."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        call = stub.Connect(metadata=(("authorization", f"Bearer {EAST}"),))  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
        replies: list[agent_pb2.CentralMessage] = []
        for msg in messages:
            if call.done():  # refused: the status is raised below
                break
            await call.write(msg)
            await asyncio.sleep(0.3)
        if not call.done():
            await call.done_writing()
        async for reply in call:
            replies.append(reply)
        return replies


@pytest.mark.parametrize(("tree", "path"), BAD_TREES)
async def test_a_bad_hypernode_tree_is_refused_naming_the_field_and_the_last_good_snapshot_stays(
        store: Store, tree: tuple[types_pb2.HyperNode, ...], path: str) -> None:
    """The hub answers on the open stream (Ack ``snapshot-rejected`` carrying "path: rule")
    instead of ending it with INVALID_ARGUMENT: ending the stream would also stop the
    agent's heartbeats and status reports, and the cluster would be declared lost over a
    topology typo. The refusal is visible in ``fedctl cluster list`` as the tree error."""
    async with running(store, secured(), control_loop=True) as srv:
        hello = agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="east", agent_id="agent-1", epoch=1))
        good, bad = (agent_pb2.AgentMessage(snapshot=_snapshot(*t)) for t in (GOOD_TREE, tree))
        replies = await asyncio.wait_for(_session(srv.port, hello, good), 20)
        assert [r.ack.what for r in replies] == ["hello", "sync", "snapshot"]
        kept = store.clusters.get("east").summary
        assert kept is not None and kept.hypernodes == 2
        before = counts(store)
        replies = await asyncio.wait_for(_session(srv.port, hello, bad), 20)
        rejected = [r.ack for r in replies if r.ack.what == "snapshot-rejected"]
        assert len(rejected) == 1 and rejected[0].id.startswith(f"{path}:"), replies
        assert rejected[0].rejection.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert rejected[0].rejection.field_path == path and rejected[0].rejection.rule
        assert store.clusters.get("east").summary == kept and counts(store) == before
        async with client(srv, ADMIN) as admin:
            (east,) = await admin.list_clusters()
        assert east.last_snapshot.hypernodes == 2 and east.last_snapshot.tree_error.startswith(f"{path}:")


async def test_an_agent_stream_that_does_not_start_with_hello_is_invalid_argument(store: Store) -> None:
    async with running(store, secured(), control_loop=True) as srv:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await asyncio.wait_for(_session(srv.port, agent_pb2.AgentMessage(snapshot=_snapshot(*GOOD_TREE))), 20)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith("hello:")
