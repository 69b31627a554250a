"""The one place where exceptions become gRPC status codes.

Servicers (ours and the agent hub) raise plain exceptions — ``InvalidInput`` from the
domain, the store's errors, auth's refusals — and never call ``context.abort`` for them.
``ErrorMapping`` is a server interceptor that wraps every handler, so a new RPC cannot
forget the mapping and two RPCs cannot map the same error differently.

INVALID_ARGUMENT messages start with the field path (``spec.tasks[1].replicas: must be
>= 1``) because that is what the CLI prints and what a user needs to fix the request.
Unexpected exceptions become INTERNAL with a generic message; the traceback goes to the
server log only (it may hold request data, never tokens: auth never puts them in errors).
A store outage (``Unavailable``) reaches the client as UNAVAILABLE with a generic message:
the driver's text names the database host and port, which is for the server log only.

Request bytes are checked here too, before any handler runs: a body that does not decode
as the method's message answers INVALID_ARGUMENT (grpc's own answer is UNKNOWN "Unexpected
DecodeError"), and one over the method's byte limit is refused without being parsed.
Why per method: the agent stream must carry a 15,000-node snapshot (tens of MiB) while
every other request stays within a few MiB, and grpc's transport limit is per server.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from federation.domain.errors import InvalidInput
from federation.service.auth import PermissionDenied, Unauthenticated
from federation.store.errors import AlreadyExists, Conflict, IllegalTransition, NotFound, StaleEpoch, Unavailable
from federation.store.leases import NotLeader

log = logging.getLogger(__name__)

# Most specific first: the first matching class wins.
_CODES: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (IllegalTransition, grpc.StatusCode.FAILED_PRECONDITION),
    (StaleEpoch, grpc.StatusCode.FAILED_PRECONDITION),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
)


UNAVAILABLE_MESSAGE = "the federation's database is unavailable; retry later"


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The status code and message for an exception we raise on purpose; None for a bug."""
    if isinstance(exc, Conflict):
        # A lost optimistic race may succeed on retry (ABORTED); a refusal by state will not.
        return (grpc.StatusCode.ABORTED if exc.race else grpc.StatusCode.FAILED_PRECONDITION), str(exc)
    if isinstance(exc, NotLeader):  # our own words (no driver text): say "standby", clients retry
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    if isinstance(exc, Unavailable):
        return grpc.StatusCode.UNAVAILABLE, UNAVAILABLE_MESSAGE
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code, str(exc) or cls.__name__
    return None


# A status message travels in a header: gRPC's default header limit is 8 KiB, and a
# longer message (a refusal echoing a 100,000-character name) reaches the client as
# RESOURCE_EXHAUSTED instead of the refusal.
MAX_MESSAGE_CHARS = 2048


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}… ({len(message)} characters, cut)"


async def _abort(context: grpc.aio.ServicerContext[Any, Any], exc: Exception, method: str) -> None:
    mapped = status_for(exc)
    if mapped is None:
        log.exception("%s failed", method)
        mapped = grpc.StatusCode.INTERNAL, f"internal error in {method} (see the server log)"
    elif mapped[0] in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        log.info("%s refused: %s", method, mapped[1])
    elif mapped[0] == grpc.StatusCode.UNAVAILABLE:
        log.warning("%s: store unavailable: %s", method, exc)
    await context.abort(mapped[0], _bounded(mapped[1]))


def _wrap_unary(behavior: Callable[..., Awaitable[Any]], method: str,
                stream_in: bool = False) -> Callable[..., Awaitable[Any]]:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            if isinstance(request, Undecodable):
                raise request.error
            if stream_in:  # check each message of a request stream as it comes
                request = _checked(request)
            return await behavior(request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, exc, method)
            raise  # unreachable: abort raises

    return wrapped


def _wrap_stream(behavior: Callable[..., Any], method: str, stream_in: bool = False) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(behavior):
        async def wrapped_gen(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            try:
                if isinstance(request, Undecodable):
                    raise request.error
                if stream_in:
                    request = _checked(request)
                async for item in behavior(request, context):
                    yield item
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(context, exc, method)

        return wrapped_gen
    return _wrap_unary(behavior, method, stream_in)  # context.write() style: a coroutine


class Undecodable:
    """What the guarded deserializer hands the handler instead of a message it could not accept."""

    def __init__(self, error: InvalidInput) -> None:
        self.error = error


def _guard(deserialize: Callable[[bytes], Any] | None, limit: int, method: str) -> Callable[[bytes], Any]:
    """Check a request's size, then decode it; either failure becomes an ``Undecodable``."""
    def guarded(data: bytes) -> Any:
        if len(data) > limit:
            return Undecodable(InvalidInput("request", f"is {len(data)} bytes, over the {limit}-byte limit "
                                                       f"of {method}"))
        if deserialize is None:
            return data
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, or anything a malformed body makes the parser raise
            return Undecodable(InvalidInput("request", f"is not a valid {method} request message "
                                                       f"({exc.__class__.__name__})"))
    return guarded


async def _checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A request stream that raises ``InvalidInput`` at the first message that did not decode."""
    async for item in requests:
        if isinstance(item, Undecodable):
            raise item.error
        yield item


if TYPE_CHECKING:
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor


class ErrorMapping(_Interceptor):
    """Wraps every RPC handler so raised errors leave as the right status code, and guards its
    request bytes: at most ``max_request_bytes`` (``method_limits`` overrides it per full
    method name, e.g. the agent stream) and decodable, else INVALID_ARGUMENT."""

    def __init__(self, max_request_bytes: int = 4 * 1024 * 1024,
                 method_limits: dict[str, int] | None = None) -> None:
        self._limit = max_request_bytes
        self._method_limits = dict(method_limits or {})

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        # grpc's handlers are namedtuples; the stubs do not say so, hence Any.
        handler: Any = await continuation(handler_call_details)
        if handler is None:
            return handler
        full = str(handler_call_details.method)
        method = full.rsplit("/", 1)[-1]
        handler = handler._replace(request_deserializer=_guard(
            handler.request_deserializer, self._method_limits.get(full, self._limit), method))
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=_wrap_unary(handler.unary_unary, method))
        if handler.stream_unary is not None:
            return handler._replace(stream_unary=_wrap_unary(handler.stream_unary, method, stream_in=True))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=_wrap_stream(handler.unary_stream, method))
        if handler.stream_stream is not None:
            return handler._replace(stream_stream=_wrap_stream(handler.stream_stream, method, stream_in=True))
        return handler
