"""Send messages a handler serialized itself as they are (``PRESERIALIZED`` methods).

Why: ``WatchJobs`` sends the same event to every watching stream. grpc serializes each
yielded message with the method's response serializer, once per stream; with 200 streams
that is 200 ``SerializeToString`` calls per event on the event loop. The event feed
serializes each event once, off the loop (``event_feed.FeedItem.wire``), and this
interceptor lets those bytes through the serializer untouched (a message object still
goes through the generated serializer, so the handler's contract is unchanged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

PRESERIALIZED = frozenset({"/federation.v1.JobService/WatchJobs", "/federation.v1.JobService/WatchJobBatches"})

if TYPE_CHECKING:
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:  # not subscriptable at run time
    _Interceptor = grpc.aio.ServerInterceptor


def _pass_bytes(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    def serialized(message: Any) -> bytes:
        if isinstance(message, bytes):
            return message
        assert serialize is not None  # every generated handler has one
        return serialize(message)

    return serialized


class PassBytes(_Interceptor):
    """For ``PRESERIALIZED`` methods: a yielded ``bytes`` is sent as it is (module doc)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler: Any = await continuation(handler_call_details)  # a namedtuple; the stubs do not say so
        if handler is None or handler_call_details.method not in PRESERIALIZED:
            return handler
        return handler._replace(response_serializer=_pass_bytes(handler.response_serializer))
