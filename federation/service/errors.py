"""The one place where exceptions become gRPC status codes.

Servicers (ours and the agent hub) raise plain exceptions — ``InvalidInput`` from the
domain, the store's errors, auth's refusals — and never call ``context.abort`` for them.
``ErrorMapping`` is a server interceptor that wraps every handler, so a new RPC cannot
forget the mapping and two RPCs cannot map the same error differently.

INVALID_ARGUMENT messages start with the field path (``spec.tasks[1].replicas: must be
>= 1``) because that is what the CLI prints and what a user needs to fix the request.
Unexpected exceptions become INTERNAL with a generic message; the traceback goes to the
server log only (it may hold request data, never tokens: auth never puts them in errors).
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


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The status code and message for an exception we raise on purpose; None for a bug."""
    if isinstance(exc, Conflict):
        # A lost optimistic race may succeed on retry (ABORTED); a refusal by state will not.
        return (grpc.StatusCode.ABORTED if exc.race else grpc.StatusCode.FAILED_PRECONDITION), str(exc)
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code, str(exc) or cls.__name__
    return None


async def _abort(context: grpc.aio.ServicerContext[Any, Any], exc: Exception, method: str) -> None:
    mapped = status_for(exc)
    if mapped is None:
        log.exception("%s failed", method)
        mapped = grpc.StatusCode.INTERNAL, f"internal error in {method} (see the server log)"
    elif mapped[0] in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        log.info("%s refused: %s", method, mapped[1])
    await context.abort(mapped[0], mapped[1])


def _wrap_unary(behavior: Callable[..., Awaitable[Any]], method: str) -> Callable[..., Awaitable[Any]]:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await behavior(request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, exc, method)
            raise  # unreachable: abort raises

    return wrapped


def _wrap_stream(behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(behavior):
        async def wrapped_gen(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            try:
                async for item in behavior(request, context):
                    yield item
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(context, exc, method)

        return wrapped_gen
    return _wrap_unary(behavior, method)  # context.write() style: a coroutine


if TYPE_CHECKING:
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor


class ErrorMapping(_Interceptor):
    """Wraps every RPC handler so raised errors leave as the right status code."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        # grpc's handlers are namedtuples; the stubs do not say so, hence Any.
        handler: Any = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = str(handler_call_details.method).rsplit("/", 1)[-1]
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=_wrap_unary(handler.unary_unary, method))
        if handler.stream_unary is not None:
            return handler._replace(stream_unary=_wrap_unary(handler.stream_unary, method))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=_wrap_stream(handler.unary_stream, method))
        if handler.stream_stream is not None:
            return handler._replace(stream_stream=_wrap_stream(handler.stream_stream, method))
        return handler
