"""Central → agent protocol messages (docs/design/work-protocol.md), built in one place."""

from __future__ import annotations

import grpc

from federation.domain.errors import InvalidInput
from federation.v1 import agent_pb2


def ack(what: str, id_: str, epoch: int) -> agent_pb2.CentralMessage:
    return agent_pb2.CentralMessage(ack=agent_pb2.Ack(what=what, id=id_, epoch=epoch))


def rejection(what: str, exc: InvalidInput, epoch: int, id_: str | None = None) -> agent_pb2.CentralMessage:
    """An Ack refusing what the agent sent with INVALID_ARGUMENT, the field path and the rule.
    ``id_`` names what is refused when the agent needs to know (a status report's
    ``work_id@version``, as its ack would); by default the id is "path: rule"."""
    refused = agent_pb2.Rejection(code=grpc.StatusCode.INVALID_ARGUMENT.value[0], field_path=exc.path, rule=exc.rule)
    return agent_pb2.CentralMessage(ack=agent_pb2.Ack(what=what, id=str(exc) if id_ is None else id_, epoch=epoch,
                                                      rejection=refused))


def fence(reason: str, epoch: int) -> agent_pb2.CentralMessage:
    return agent_pb2.CentralMessage(fence=agent_pb2.Fence(reason=reason, current_epoch=epoch))
