"""The proxy's web side: a websocket connection as the byte stream the proxy pairs and forwards,
and the HTTP answers that serve the browser runtime's page and script.

A browser page connects to ``ws://<proxy>:<web_port>/ws`` and speaks the data-plane protocol
over it exactly as a TCP peer does (handshake, then packets): binary messages carry the bytes,
and message boundaries mean nothing. :class:`WebSocketStream` gives such a connection the
``read``/``readexactly``/``write``/``drain``/``close`` surface of asyncio's streams, so the proxy's
handshake, pairing and forwarding serve both kinds of peer with one code path.

Uses the ``websockets`` package (``pip install "tvm[web]"``), imported only when a proxy has a
``web_port``.
"""

from __future__ import annotations

import asyncio
import collections
from importlib import resources
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

__all__ = ["WEB_FILES", "WebSocketStream", "answer_http"]

#: The files the web listener serves by path, from the package's ``rpc/web`` folder.
_HTML = "text/html; charset=utf-8"
_SCRIPT = "text/javascript; charset=utf-8"
WEB_FILES = {
    "/": ("index.html", _HTML),
    "/index.html": ("index.html", _HTML),
    **{
        f"/{name}": (name, _SCRIPT)
        for name in (
            "auth.js",
            "tvm_rpc.js",
            "rpc_session.js",
            "rpc_wire.js",
            "timing.js",
            "webgpu_device.js",
            "wgsl_module.js",
        )
    },
}

#: The path of the websocket endpoint.
WEBSOCKET_PATH = "/ws"

#: Bytes received and not yet read after which the stream stops taking messages off the
#: connection (websockets then stops reading the socket: the browser's sends wait).
_READ_AHEAD = 4 << 20


def answer_http(connection: ServerConnection, request: Request) -> Response | None:
    """``process_request`` of the web listener: the page and its scripts for GET of their paths,
    None (go on with the websocket handshake) for the websocket path, 404 otherwise."""
    path = request.path.split("?", 1)[0]
    if path == WEBSOCKET_PATH:
        return None
    served = WEB_FILES.get(path)
    if served is None:
        return connection.respond(404, f"no such page: {path}\n")
    name, content_type = served
    resource = resources.files("tvm.rpc").joinpath("web").joinpath(name)
    if not resource.is_file():
        return connection.respond(404, f"{name} is not part of this installation\n")
    body = resource.read_bytes()
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ]
    )
    return Response(200, "OK", headers, body)


class WebSocketStream:
    """A websocket connection as an asyncio stream pair (reader and writer in one object)."""

    def __init__(self, connection: ServerConnection) -> None:
        self.connection = connection
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._eof = False
        self._error: BaseException | None = None
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._outgoing: collections.deque[bytes] = collections.deque()
        self._sender: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None

    # -- reading ---------------------------------------------------------------------------

    async def pump(self) -> None:
        """Takes messages off the connection until it closes (run as the connection's task
        while the proxy reads; returns at the close). A text message ends the connection."""
        try:
            while True:
                await self._room.wait()
                message = await self.connection.recv()
                if isinstance(message, str):
                    raise ConnectionError("a text message on the RPC websocket (binary only)")
                if message:
                    self._chunks.append(message)
                    self._buffered += len(message)
                    if self._buffered >= _READ_AHEAD:
                        self._room.clear()
                    self._readable.set()
        except ConnectionClosed:
            pass
        except ConnectionError as err:
            self._error = err
            await self.connection.close(1003, str(err))
        finally:
            self._eof = True
            self._readable.set()

    def _take(self, limit: int) -> bytes:
        taken: list[bytes] = []
        size = 0
        while self._chunks and size < limit:
            chunk = self._chunks.popleft()
            if size + len(chunk) > limit:
                keep = limit - size
                self._chunks.appendleft(chunk[keep:])
                chunk = chunk[:keep]
            taken.append(chunk)
            size += len(chunk)
        self._buffered -= size
        if self._buffered < _READ_AHEAD:
            self._room.set()
        if not self._chunks and not self._eof:
            self._readable.clear()
        return b"".join(taken)

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all buffered if ``n < 0``), waiting for at least one; ``b""`` at
        the end of the stream."""
        while not self._chunks and not self._eof:
            await self._readable.wait()
        if self._error is not None and not self._chunks:
            raise ConnectionError(str(self._error))
        return self._take(self._buffered if n < 0 else n)

    async def readexactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes; ``asyncio.IncompleteReadError`` if the stream ends first."""
        parts: list[bytes] = []
        need = n
        while need:
            chunk = await self.read(need)
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(parts), n)
            parts.append(chunk)
            need -= len(chunk)
        return b"".join(parts)

    # -- writing ---------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queues ``data`` to send as a binary message (sent in order, in the background)."""
        if self._closer is not None or not data:
            return
        self._outgoing.append(bytes(data))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_queued())

    async def _send_queued(self) -> None:
        try:
            while self._outgoing:
                await self.connection.send(self._outgoing.popleft())
        except ConnectionClosed:
            self._outgoing.clear()

    async def drain(self) -> None:
        """Waits until everything written has been handed to the connection; a
        ``ConnectionResetError`` once the connection is closing or closed (what was written
        since is lost), so that a forwarder stops reading what it can no longer deliver."""
        sender = self._sender
        if sender is not None and not sender.done():
            await asyncio.shield(sender)
        if self.connection.state in (State.CLOSING, State.CLOSED):
            raise ConnectionResetError("the websocket peer closed the connection")

    def close(self) -> None:
        """Closes the connection once what was written is sent."""
        if self._closer is None:
            self._closer = asyncio.get_running_loop().create_task(self._close_after_sending())

    async def _close_after_sending(self) -> None:
        sender = self._sender
        if sender is not None:
            await asyncio.gather(sender, return_exceptions=True)
        await self.connection.close()

    async def wait_closed(self) -> None:
        """Waits for :meth:`close` to finish (at once if it was not called)."""
        if self._closer is not None:
            await asyncio.gather(self._closer, return_exceptions=True)

    # -- what the proxy asks of a writer ----------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """``peername`` and the other transport details of the underlying connection."""
        return self.connection.transport.get_extra_info(name, default)

    @property
    def transport(self) -> asyncio.Transport:
        """The connection's transport (``abort()`` drops it at once)."""
        return self.connection.transport  # type: ignore[return-value]
