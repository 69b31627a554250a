"""Raw calls to one kube-apiserver through ONE private ``kubernetes_asyncio`` ApiClient.

Every call passes ``_preload_content=False`` and decodes the JSON itself:

- the Binding subresource answers with a ``Status`` that the generated client cannot
  turn into ``V1Binding`` (kubernetes-client/python#547, #825) although the bind happened;
- building the generated model classes for thousands of pods is slow and not needed;
- with ``_preload_content=False`` the client does NOT raise on 4xx/5xx, so ``call``
  checks the status and raises ``ApiError`` with the apiserver's own reason and message.

Configuration is per cluster (``load_kube_config(client_configuration=cfg,
persist_config=False)``), never ``Configuration.set_default``: an agent process may hold
clients of several clusters (tests do) and they must never leak into each other.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

JSON = dict[str, Any]

# Generous but finite: a hung apiserver must not hang the agent's reconcile pass.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=10)
# One watch event is one object (etcd takes at most 1.5 MiB by default, some clusters a
# few times that) in a JSON envelope: a line past this is no object the apiserver sends,
# and buffering it would grow without end.
MAX_WATCH_LINE_BYTES = 16 * 1024 * 1024


class ApiError(Exception):
    """A non-2xx answer (``status`` 0 when the apiserver could not be reached)."""

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"HTTP {status} {reason}: {message}" if message else f"HTTP {status} {reason}")


class Gone(ApiError):
    """HTTP 410: the resource version is too old (compacted); the caller must relist."""


def _error(status: int, body: bytes) -> ApiError:
    reason, message = "", body.decode("utf-8", "replace")[:500]
    try:
        decoded = json.loads(body)
        if isinstance(decoded, dict):
            reason, message = str(decoded.get("reason") or ""), str(decoded.get("message") or message)
    except ValueError:
        pass
    cls = Gone if status == 410 else ApiError
    return cls(status, reason, message)


async def call(request: Awaitable[Any]) -> JSON:
    """Await a generated API call made with ``_preload_content=False``; return its JSON."""
    try:
        resp = await request
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
    try:
        body: bytes = await resp.read()
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
    finally:
        resp.release()
    if not 200 <= resp.status <= 299:
        raise _error(resp.status, body)
    if not body:
        return {}
    decoded = json.loads(body)
    return decoded if isinstance(decoded, dict) else {}


async def stream(request: Awaitable[Any]) -> AsyncGenerator[JSON, None]:
    """The events of a watch request (``watch=True``) until the server ends the stream.

    Lines are split here rather than with ``readline`` (aiohttp refuses lines over its
    128 KiB buffer; a ConfigMap can be larger). An ``ERROR`` event becomes ``ApiError``
    (``Gone`` for 410) so the informer relists.
    """
    try:
        resp = await request
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise ApiError(0, "Unreachable", f"{type(exc).__name__}: {exc}") from exc
    try:
        if not 200 <= resp.status <= 299:
            raise _error(resp.status, await resp.read())
        # One buffer, cut once per chunk: slicing the rest off after every line copied it
        # once per line (quadratic in a buffered burst of events), and searching a long
        # line from its start at every chunk was quadratic in its length.
        buffer = bytearray()
        searched = 0  # the buffer's first bytes hold no newline
        async for chunk in resp.content.iter_any():
            buffer += chunk
            start = 0
            while (cut := buffer.find(b"\n", max(start, searched))) >= 0:
                line, start = bytes(buffer[start:cut]), cut + 1
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise _error(int(obj.get("code") or 500), json.dumps(obj).encode())
                yield event
            del buffer[:start]
            searched = len(buffer)
            if searched > MAX_WATCH_LINE_BYTES:
                raise ApiError(0, "LineTooLong", f"a watch event over {MAX_WATCH_LINE_BYTES} bytes without its end")
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ApiError(0, "Unreachable", f"watch interrupted: {type(exc).__name__}: {exc}") from exc
    finally:
        resp.release()
        resp.close()


async def client_from_kubeconfig(path: str | None, context: str | None = None) -> Any:
    """An ApiClient with a private Configuration, from a kubeconfig file (or, when
    ``path`` is None, the in-cluster service account, as in the DaemonSet)."""
    cfg = k8s_client.Configuration()
    if path is None:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]  # untyped in kubernetes_asyncio
    else:
        await k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=cfg, persist_config=False
        )
    return k8s_client.ApiClient(configuration=cfg)


def core_api(api: Any) -> Any:
    return k8s_client.CoreV1Api(api)


def apps_api(api: Any) -> Any:
    return k8s_client.AppsV1Api(api)


def networking_api(api: Any) -> Any:
    return k8s_client.NetworkingV1Api(api)


def scheduling_api(api: Any) -> Any:
    return k8s_client.SchedulingV1Api(api)


def custom_api(api: Any) -> Any:
    return k8s_client.CustomObjectsApi(api)


def coordination_api(api: Any) -> Any:
    return k8s_client.CoordinationV1Api(api)


def storage_api(api: Any) -> Any:
    return k8s_client.StorageV1Api(api)
