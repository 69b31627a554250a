"""The pooled-connection liveness check that replaced ``pool_pre_ping`` (issue 2).

Table of what a connection looks like at checkout and what the check does: a socket the
server wrote to while the connection sat in the pool (its goodbye before closing) or a
closed connection is refused without a round trip; a quiet one is handed out as is
unless it sat idle past the threshold, which costs one real ping.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy.exc import DisconnectionError

from federation.store.engine import check_alive


@dataclass
class FakeResult:
    status: int


@dataclass
class FakePgConn:
    status: int = 2  # TUPLES_OK
    fails: bool = False
    queries: list[bytes] = field(default_factory=list)

    def exec_(self, query: bytes) -> FakeResult:
        self.queries.append(query)
        if self.fails:
            raise OSError("server closed the connection unexpectedly")
        return FakeResult(self.status)


@dataclass
class FakeConnection:
    sock: socket.socket
    pgconn: FakePgConn = field(default_factory=FakePgConn)
    closed: bool = False

    def fileno(self) -> int:
        return self.sock.fileno()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, server = socket.socketpair()
    try:
        yield ours, server
    finally:
        ours.close()
        server.close()


def test_recently_used_quiet_connection_costs_no_round_trip(pair: tuple[socket.socket, socket.socket]) -> None:
    conn = FakeConnection(pair[0])
    check_alive(conn, idle=0.5, idle_seconds=5.0)
    assert conn.pgconn.queries == []


def test_connection_idle_past_the_threshold_is_pinged(pair: tuple[socket.socket, socket.socket]) -> None:
    conn = FakeConnection(pair[0])
    check_alive(conn, idle=6.0, idle_seconds=5.0)
    assert conn.pgconn.queries == [b"SELECT 1"]


@pytest.mark.parametrize("pgconn", [FakePgConn(fails=True), FakePgConn(status=7)], ids=["ping raises", "ping errors"])
def test_idle_connection_whose_ping_fails_is_replaced(pair: tuple[socket.socket, socket.socket],
                                                      pgconn: FakePgConn) -> None:
    with pytest.raises(DisconnectionError, match="ping failed"):
        check_alive(FakeConnection(pair[0], pgconn), idle=60.0, idle_seconds=5.0)


def test_server_goodbye_in_the_socket_is_seen_without_a_ping(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, server = pair
    server.sendall(b"E\x00\x00\x00\x10FATAL")  # what a terminated backend sends before closing
    conn = FakeConnection(ours)
    with pytest.raises(DisconnectionError, match="closed"):
        check_alive(conn, idle=0.1, idle_seconds=5.0)
    assert conn.pgconn.queries == []


def test_socket_closed_by_the_server_is_replaced(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, server = pair
    server.close()
    with pytest.raises(DisconnectionError):
        check_alive(FakeConnection(ours), idle=0.1, idle_seconds=5.0)


def test_connection_closed_on_our_side_is_replaced(pair: tuple[socket.socket, socket.socket]) -> None:
    with pytest.raises(DisconnectionError):
        check_alive(FakeConnection(pair[0], closed=True), idle=0.1, idle_seconds=5.0)
