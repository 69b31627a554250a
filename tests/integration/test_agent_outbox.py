"""An agent that sends and never reads cannot grow the central service's memory, over real
gRPC and a real store (docs/design/work-protocol.md).

The reviewer's reproduction: every status report is answered with an ack, queued for the
agent without bound. An agent that wrote 300,000 five-byte reports and read nothing left
109,349 acks queued in central (and they kept coming as fast as it wrote). Now at most
``OUTBOX_LIMIT`` messages wait for an agent; past that the stream's worker waits for the
agent to read, and the agent's writes back up into gRPC's flow control (here 9,912 of
10,240 answers were waiting before). Nothing is lost: once it reads, every report is answered.
"""

from __future__ import annotations

import asyncio

import grpc.aio
from servicekit import EAST, running, secured
from test_agent_stream_bounds import Stream

from federation.service.agent_session import OUTBOX_LIMIT
from federation.store import Store
from federation.v1 import agent_pb2, agent_pb2_grpc

REPORTS = 40 * OUTBOX_LIMIT
# gRPC grows a reader's receive window to megabytes (BDP probing), which would hide the queue.
NO_WINDOW_GROWTH = [("grpc.http2.bdp_probe", 0)]
WORK_ID = "x" * 64  # answered status-rejected at once (no store work), naming the id: ~200 bytes


async def test_an_agent_that_never_reads_holds_at_most_the_outbox_limit_and_loses_no_ack(store: Store) -> None:
    async with running(store, secured(), control_loop=True) as srv, \
            grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}", options=NO_WINDOW_GROWTH) as channel:
        assert srv.hub is not None
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(  # type: ignore[call-arg]  # grpc-stubs lack the no-argument stream-stream call; requests go through write()
            metadata=(("authorization", f"Bearer {EAST}"),))
        await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster="east", agent_id="a", epoch=1)))
        await Stream(call).next("sync")
        report = agent_pb2.AgentMessage(status=agent_pb2.WorkStatus(work_id=WORK_ID, version=1))
        writer = asyncio.create_task(_write(call, report, REPORTS))
        peak, settled = 0, 0
        for _ in range(6000):  # until every report is written, then a second more for the worker
            peak = max(peak, srv.hub.queued("east"))
            settled += writer.done()
            if settled == 100:
                break
            await asyncio.sleep(0.01)
        assert peak <= OUTBOX_LIMIT, peak
        acks = await asyncio.wait_for(_count_acks(call, REPORTS), 120)
        await writer
        assert acks == REPORTS
        call.cancel()


async def _write(call: grpc.aio.StreamStreamCall[agent_pb2.AgentMessage, agent_pb2.CentralMessage],
                 msg: agent_pb2.AgentMessage, n: int) -> None:
    for _ in range(n):
        await call.write(msg)


async def _count_acks(call: grpc.aio.StreamStreamCall[agent_pb2.AgentMessage, agent_pb2.CentralMessage],
                      n: int) -> int:
    acks = 0
    while acks < n:
        reply = await call.read()
        assert isinstance(reply, agent_pb2.CentralMessage), "the stream ended"
        acks += reply.ack.what == "status-rejected" and reply.ack.id == f"{WORK_ID}@1"
    return acks
