"""Serve a registry on ``http://HOST:PORT/metrics`` (``--metrics-listen``), off the event loop.

``prometheus_client``'s WSGI server runs in its own daemon threads: a scrape (and the
store queries the scrape-time gauges make) never waits for, or holds up, the asyncio
loop that serves gRPC. Port 0 picks a free port (tests); ``port`` says which.
Used by ``federation serve`` and ``federation-agent`` alike.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, start_http_server


def parse_listen(value: str, flag: str = "--metrics-listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9090`` for IPv6) -> (host, port); ValueError naming the flag otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{flag}: {value!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def with_process_metrics(registry: CollectorRegistry) -> CollectorRegistry:
    """Add the standard ``process_*``, ``python_info`` and ``python_gc_*`` families (CPU, memory, fds)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint; ``stop()`` closes its socket."""

    server: WSGIServer
    thread: threading.Thread
    host: str

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(listen: str, registry: CollectorRegistry) -> MetricsServer:
    """Start serving ``registry`` on ``listen``; raises OSError when the address is taken."""
    host, port = parse_listen(listen)
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server, thread, host)
