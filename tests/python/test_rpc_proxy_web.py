"""The proxy's web side (``Proxy(web_port=...)``): websocket peers paired with TCP peers, with a
real RPC server behind a websocket relay, over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import tvm
from rpc_helpers import (
    DEADLINE,
    HOST,
    INT32,
    RawConnection,
    command_line,
    fresh_key,
    handshake,
    stop_cleanly,
)
from tvm import rpc
from tvm.error import RPCError
from tvm.rpc import base

websockets_sync = pytest.importorskip("websockets.sync.client")
ConnectionClosed = pytest.importorskip("websockets.exceptions").ConnectionClosed

pytestmark = pytest.mark.rpc

#: The first web port tried (the proxy takes the first free one of the next hundred).
WEB_PORT = 19300


@pytest.fixture(scope="module")
def proxy() -> Iterator[rpc.Proxy]:
    with rpc.Proxy(port=0, web_port=WEB_PORT, silent=True) as running:
        yield running


class WebPeer:
    """A websocket peer of the proxy (as a browser page is), past its handshake request."""

    def __init__(self, proxy: rpc.Proxy, key: str) -> None:
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            websockets_sync.connect(f"ws://{HOST}:{proxy.web_port}/ws", max_size=None)
        )
        self.pending = b""
        # Message boundaries mean nothing: the handshake goes in two pieces.
        greeting = handshake(key)
        self.ws.send(greeting[:3])
        self.ws.send(greeting[3:])

    def recv_exactly(self, n: int) -> bytes:
        while len(self.pending) < n:
            self.pending += self.ws.recv(timeout=DEADLINE)
        data, self.pending = self.pending[:n], self.pending[n:]
        return data

    def answer(self) -> tuple[int, str | None]:
        (code,) = INT32.unpack(self.recv_exactly(4))
        if code != base.RPC_CODE_SUCCESS:
            return code, None
        (length,) = INT32.unpack(self.recv_exactly(4))
        return code, self.recv_exactly(length).decode("utf-8")

    def close(self) -> None:
        self._stack.close()


def test_a_websocket_server_and_a_tcp_client_are_paired_and_forwarded(proxy: rpc.Proxy) -> None:
    key = fresh_key()
    page = WebPeer(proxy, f"server:{key}")
    client = RawConnection(proxy.port, handshake(f"client:{key}"))
    try:
        (code,) = INT32.unpack(base.recvall(client.sock, 4))
        assert code == base.RPC_CODE_SUCCESS
        (length,) = INT32.unpack(base.recvall(client.sock, 4))
        assert base.recvall(client.sock, length).decode() == f"server:{key}"
        assert page.answer() == (base.RPC_CODE_SUCCESS, f"client:{key}")
        # 3 MiB each way: more than one websocket message (1 MiB at most) and one read.
        payload = bytes(range(256)) * (3 * 4096)
        client.sock.sendall(payload)
        assert page.recv_exactly(len(payload)) == payload
        for start in range(0, len(payload), 1 << 20):
            page.ws.send(payload[start : start + (1 << 20)])
        assert base.recvall(client.sock, len(payload)) == payload
        # The page leaving closes the client's connection.
        page.close()
        assert client.closed_by_peer()
    finally:
        page.close()
        client.close()


def test_a_second_page_with_a_waiting_key_is_a_duplicate(proxy: rpc.Proxy) -> None:
    key = fresh_key()
    first = WebPeer(proxy, f"server:{key}")
    second = WebPeer(proxy, f"server:{key}")
    try:
        assert second.answer() == (base.RPC_CODE_DUPLICATE, None)
    finally:
        first.close()
        second.close()


async def _relay(web_port: int, key: str, server_port: int) -> None:
    """Plays a browser page that serves RPC by relaying to a real server: registers with the
    proxy over a websocket, takes the pairing answer, asks the server for a session with the
    client's key, then copies bytes both ways until either side ends."""
    from websockets.asyncio.client import connect

    async with connect(f"ws://{HOST}:{web_port}/ws", max_size=None) as page:
        await page.send(handshake(f"server:{key}"))
        received = b""
        while len(received) < 8:
            received += await page.recv()
        code, length = INT32.unpack(received[:4])[0], INT32.unpack(received[4:8])[0]
        assert code == base.RPC_CODE_SUCCESS
        while len(received) < 8 + length:
            received += await page.recv()
        client_key = received[8 : 8 + length].decode()
        early = received[8 + length :]
        reader, writer = await asyncio.open_connection(HOST, server_port)
        # The client negotiated with the page's key (the proxy gave it, without options): the
        # relay asks the server for the plain protocol the client will speak.
        writer.write(handshake(client_key.split()[0]))
        (code,) = INT32.unpack(await reader.readexactly(4))
        assert code == base.RPC_MAGIC
        (length,) = INT32.unpack(await reader.readexactly(4))
        await reader.readexactly(length)
        writer.write(early)

        async def page_to_server() -> None:
            async for message in page:
                assert isinstance(message, bytes)
                writer.write(message)
                await writer.drain()
            writer.close()

        async def server_to_page() -> None:
            while chunk := await reader.read(1 << 16):
                await page.send(chunk)
            await page.close()

        await asyncio.gather(page_to_server(), server_to_page())


def test_a_client_calls_a_real_server_behind_a_websocket_page(proxy: rpc.Proxy) -> None:
    np = pytest.importorskip("numpy")
    key = fresh_key()
    server = rpc.Server(host=HOST, port=0, key=key)
    try:
        # The relay is a process of its own, as a browser is.
        relay = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import asyncio, sys, test_rpc_proxy_web as t; "
                "asyncio.run(t._relay(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))",
                str(proxy.web_port),
                key,
                str(server.port),
            ],
            cwd=Path(__file__).parent,
        )
        session = rpc.connect(HOST, proxy.port, key=key)
        assert session.get_function("rpc.test.addone")(41) == 42
        assert session.get_function("rpc.test.strcat")("web", 7) == "web:7"
        # The page's key carries no protocol option, so the session speaks 0.8.0: the error
        # arrives as RPCError with its kind in the message.
        with pytest.raises(RPCError, match="ValueError: boom"):
            session.get_function("rpc.test.except")("boom")
        # A tensor of 2 MiB each way: copy packets larger than a websocket message.
        data = np.arange(1 << 19, dtype="float32")
        remote_tensor = tvm.runtime.tensor(data, session.cpu())
        np.testing.assert_array_equal(remote_tensor.numpy(), data)
        del remote_tensor
        session.close()
        assert relay.wait(DEADLINE) == 0
    finally:
        if relay.poll() is None:
            relay.kill()
        server.terminate()


def test_the_web_listener_answers_unknown_paths_with_404(proxy: rpc.Proxy) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"http://{HOST}:{proxy.web_port}/etc/passwd", timeout=DEADLINE)
    info.value.close()
    assert info.value.code == 404


def test_a_text_message_ends_that_page_and_the_proxy_goes_on(proxy: rpc.Proxy) -> None:
    key = fresh_key()
    with websockets_sync.connect(f"ws://{HOST}:{proxy.web_port}/ws") as page:
        page.send("not binary")
        with pytest.raises(ConnectionClosed) as info:
            page.recv(timeout=DEADLINE)
        assert info.value.rcvd is not None
        assert info.value.rcvd.code == 1003
        assert "binary only" in info.value.rcvd.reason
    good = WebPeer(proxy, f"server:{key}")
    client = RawConnection(proxy.port, handshake(f"client:{key}"))
    try:
        assert good.answer() == (base.RPC_CODE_SUCCESS, f"client:{key}")
    finally:
        good.close()
        client.close()


@pytest.mark.parametrize("web_port", [-1, 65536])
def test_a_web_port_out_of_range_is_a_value_error(web_port: int) -> None:
    with pytest.raises(ValueError, match=f"web_port must be 0 or a port number, got {web_port}"):
        rpc.Proxy(port=0, web_port=web_port)


def test_the_command_line_serves_the_web_side() -> None:
    with command_line("tvm.exec.rpc_proxy", "--port", "0", "--web-port", "19400") as proc:
        assert proc.stdout is not None
        web_line = proc.stdout.readline()
        found = re.search(r"web side on http://127\.0\.0\.1:(\d+)/ ", web_line)
        assert found, web_line
        assert "listening on 127.0.0.1:" in proc.stdout.readline()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://{HOST}:{found.group(1)}/nothing", timeout=DEADLINE)
        info.value.close()
        assert info.value.code == 404
        stop_cleanly(proc)
