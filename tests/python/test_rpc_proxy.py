"""The RPC proxy (``tvm.rpc.Proxy``) and its command line, with real processes and loopback
sockets: fake servers and clients are plain sockets doing the data-plane handshake."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rpc_helpers import (
    DEADLINE,
    HOST,
    INT32,
    RawConnection,
    command_line,
    fresh_key,
    handshake,
    stop_cleanly,
    wait_until,
)
from tvm import rpc
from tvm.rpc import base
from tvm.rpc.base import TrackerCode

pytestmark = pytest.mark.rpc


class Side(RawConnection):
    """A fake RPC server or client connected to the proxy, past its handshake request."""

    def __init__(self, port: int, key: str, magic: int = base.RPC_MAGIC) -> None:
        super().__init__(port, handshake(key, magic))

    def answer(self) -> tuple[int, str | None]:
        """The proxy's reply: its code and, on success, the peer's key."""
        (code,) = INT32.unpack(base.recvall(self.sock, 4))
        if code != base.RPC_CODE_SUCCESS:
            return code, None
        (length,) = INT32.unpack(base.recvall(self.sock, 4))
        return code, base.recvall(self.sock, length).decode("utf-8")


@pytest.fixture(scope="module")
def proxy() -> Iterator[rpc.Proxy]:
    with rpc.Proxy(port=0, timeout_client=600, timeout_server=600, silent=True) as running:
        yield running


@pytest.fixture
def sides() -> Iterator[Callable[..., Side]]:
    """Opens fake servers and clients, closed after the test."""
    opened: list[Side] = []

    def open_side(port: int, key: str, magic: int = base.RPC_MAGIC) -> Side:
        side = Side(port, key, magic)
        opened.append(side)
        return side

    yield open_side
    for side in opened:
        side.close()


def exchange(left: Side, right: Side, nbytes: int) -> None:
    """Sends ``nbytes`` random bytes each way at once and checks both arrive intact."""
    to_right, to_left = os.urandom(nbytes), os.urandom(nbytes)
    received: dict[str, bytes] = {}

    def read(name: str, side: Side) -> None:
        received[name] = base.recvall(side.sock, nbytes)

    readers = [
        threading.Thread(target=read, args=("right", right)),
        threading.Thread(target=read, args=("left", left)),
    ]
    for thread in readers:
        thread.start()
    writer = threading.Thread(target=right.sock.sendall, args=(to_left,))
    writer.start()
    left.sock.sendall(to_right)
    writer.join(DEADLINE)
    for thread in readers:
        thread.join(DEADLINE)
    assert received["right"] == to_right
    assert received["left"] == to_left


@pytest.mark.parametrize("server_first", [True, False], ids=["server-first", "client-first"])
def test_pairs_and_forwards_both_ways(
    server_first: bool, proxy: rpc.Proxy, sides: Callable[..., Side]
) -> None:
    key = fresh_key()
    server_key, client_key = f"server:{key}", f"client:{key} -timeout=10"
    if server_first:
        server = sides(proxy.port, server_key)
        client = sides(proxy.port, client_key)
    else:
        client = sides(proxy.port, client_key)
        server = sides(proxy.port, server_key)
    assert server.answer() == (base.RPC_CODE_SUCCESS, client_key)
    assert client.answer() == (base.RPC_CODE_SUCCESS, server_key)
    exchange(client, server, 3 * (1 << 20) + 12345)
    exchange(server, client, 17)
    # Closing one side closes the other.
    client.close()
    assert server.closed_by_peer()


def test_empty_key_pairs(proxy: rpc.Proxy, sides: Callable[..., Side]) -> None:
    # rpc.connect(url, port) with no key and a server without key meet on "".
    server = sides(proxy.port, "server:")
    client = sides(proxy.port, "client:")
    assert server.answer() == (base.RPC_CODE_SUCCESS, "client:")
    assert client.answer() == (base.RPC_CODE_SUCCESS, "server:")
    exchange(server, client, 1000)


def test_duplicate_server_key(proxy: rpc.Proxy, sides: Callable[..., Side]) -> None:
    key = fresh_key()
    first = sides(proxy.port, f"server:{key}")
    second = sides(proxy.port, f"server:{key}")
    assert second.answer() == (base.RPC_CODE_DUPLICATE, None)
    assert second.closed_by_peer()
    client = sides(proxy.port, f"client:{key}")
    assert client.answer() == (base.RPC_CODE_SUCCESS, f"server:{key}")
    assert first.answer() == (base.RPC_CODE_SUCCESS, f"client:{key}")
    exchange(first, client, 100)


def test_mismatch_after_timeout(sides: Callable[..., Side]) -> None:
    with rpc.Proxy(port=0, timeout_client=0.2, timeout_server=0.2, silent=True) as short:
        client = sides(short.port, f"client:{fresh_key()}")
        server = sides(short.port, f"server:{fresh_key()}")
        assert client.answer() == (base.RPC_CODE_MISMATCH, None)
        assert client.closed_by_peer()
        assert server.answer() == (base.RPC_CODE_MISMATCH, None)


def test_waiting_server_that_leaves_is_forgotten(
    proxy: rpc.Proxy, sides: Callable[..., Side]
) -> None:
    key = fresh_key()
    sides(proxy.port, f"server:{key}").close()

    # Until the proxy notices, a new server with the key is a duplicate; then it waits.
    def accepted() -> Side | None:
        server = sides(proxy.port, f"server:{key}")
        server.sock.settimeout(0.1)
        try:
            code = server.sock.recv(4)
        except TimeoutError:
            server.sock.settimeout(DEADLINE)
            return server
        assert INT32.unpack(code)[0] == base.RPC_CODE_DUPLICATE
        server.close()
        return None

    server = wait_until(accepted, "the proxy to forget the server that left")
    client = sides(proxy.port, f"client:{key}")
    assert client.answer() == (base.RPC_CODE_SUCCESS, f"server:{key}")
    assert server.answer() == (base.RPC_CODE_SUCCESS, f"client:{key}")
    exchange(server, client, 10)


@pytest.mark.parametrize(
    "payload",
    [
        INT32.pack(base.RPC_TRACKER_MAGIC),
        INT32.pack(base.RPC_MAGIC) + INT32.pack(-1),
        INT32.pack(base.RPC_MAGIC) + INT32.pack(3) + b"abc",
        INT32.pack(base.RPC_MAGIC) + INT32.pack(2) + b"\xff\xfe",
        INT32.pack(base.RPC_MAGIC) + INT32.pack(10) + b"server",
    ],
    ids=["wrong-magic", "negative-length", "no-prefix", "not-utf8", "closed-mid-key"],
)
def test_bad_handshake_closes_only_that_connection(
    payload: bytes, proxy: rpc.Proxy, sides: Callable[..., Side]
) -> None:
    key = fresh_key()
    waiting = sides(proxy.port, f"server:{key}")
    with socket.create_connection((HOST, proxy.port), timeout=DEADLINE) as bad:
        bad.sendall(payload)
        bad.shutdown(socket.SHUT_WR)
        assert bad.recv(1) == b""
    client = sides(proxy.port, f"client:{key}")
    assert client.answer() == (base.RPC_CODE_SUCCESS, f"server:{key}")
    assert waiting.answer() == (base.RPC_CODE_SUCCESS, f"client:{key}")


def test_terminate_stops_listening() -> None:
    proxy = rpc.Proxy(port=0, silent=True)
    assert proxy.host == "127.0.0.1"
    port = proxy.port
    proxy.terminate()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((HOST, port), timeout=5).close()
    proxy.terminate()


# -- with a tracker -----------------------------------------------------------------------------


class TrackerConn(RawConnection):
    """A raw tracker connection."""

    def __init__(self, port: int) -> None:
        super().__init__(port, INT32.pack(base.RPC_TRACKER_MAGIC))
        assert INT32.unpack(base.recvall(self.sock, 4))[0] == base.RPC_TRACKER_MAGIC

    def call(self, *request: Any) -> Any:
        base.sendjson(self.sock, list(request))
        return base.recvjson(self.sock)


def test_proxy_registers_servers_with_tracker(sides: Callable[..., Side]) -> None:
    with (
        rpc.Tracker(port=0, silent=True) as tracker,
        rpc.Proxy(port=0, tracker_addr=(HOST, tracker.port), silent=True) as proxy,
    ):
        conn = TrackerConn(tracker.port)
        try:
            servers = [sides(proxy.port, "server:board") for _ in range(2)]

            def registered() -> bool:
                summary = conn.call(TrackerCode.SUMMARY)[1]
                infos = summary["server_info"]
                return summary["queue_info"].get("board", {}).get("free") == 2 and any(
                    info["key"] == "server:proxy[board]" and info["addr"] == [HOST, proxy.port]
                    for info in infos
                )

            wait_until(registered, "the proxy to offer both servers to the tracker")
            # A client with a key the tracker did not hand out is refused.
            stranger = sides(proxy.port, "client:board:0.5")
            assert stranger.answer() == (base.RPC_CODE_MISMATCH, None)

            for _ in servers:
                reply = conn.call(TrackerCode.REQUEST, "board", "", 1)
                assert reply[0] == TrackerCode.SUCCESS
                addr, port, matchkey = reply[1]
                assert (addr, port) == (HOST, proxy.port)
                assert base.split_random_key(matchkey)[0] == "board"
                client = sides(port, f"client:{matchkey} -timeout=5")
                code, server_key = client.answer()
                assert (code, server_key) == (base.RPC_CODE_SUCCESS, "server:board")
                answers = {server.sock: server for server in servers}
                # The paired server is the one that now has data to read.
                paired = wait_until(
                    lambda answers=answers: _readable(list(answers)), "the server to be paired"
                )
                server = answers[paired]
                assert server.answer() == (base.RPC_CODE_SUCCESS, f"client:{matchkey} -timeout=5")
                servers = [s for s in servers if s is not server]
                exchange(client, server, 1 << 16)
        finally:
            conn.sock.close()


def _readable(socks: list[socket.socket]) -> socket.socket | None:
    ready, _, _ = select.select(socks, [], [], 0.05)
    return ready[0] if ready else None


# -- command line -------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_proxy_command_line(sig: signal.Signals, sides: Callable[..., Side]) -> None:
    with command_line("tvm.exec.rpc_proxy", "--port", "0", "--silent") as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)$", line.strip())
        assert found, line
        port = int(found.group(1))
        server = sides(port, "server:cli")
        client = sides(port, "client:cli")
        assert client.answer() == (base.RPC_CODE_SUCCESS, "server:cli")
        assert server.answer() == (base.RPC_CODE_SUCCESS, "client:cli")
        exchange(client, server, 4096)
        stop_cleanly(proc, sig)
    assert server.closed_by_peer()
