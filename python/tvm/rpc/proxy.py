"""The RPC proxy: pairs RPC servers and clients that cannot reach each other directly.

Both sides connect to the proxy with the data-plane handshake (``<i RPC_MAGIC``, ``<i`` key
length, key): servers with ``server:<key>``, clients with ``client:<key>[ options]``. The proxy
pairs a server and a client of the same key, sends each ``<i RPC_CODE_SUCCESS`` and the other's
key (``<i`` length, bytes), and from then on forwards bytes verbatim in both directions until
either side closes, which closes the other.

Without a tracker, whichever side comes first waits (``timeout_server`` or ``timeout_client``
seconds) for the other, then gets ``RPC_CODE_MISMATCH``; a second connection of the same side
and key while one waits gets ``RPC_CODE_DUPLICATE``.

With a tracker (``tracker_addr``), every waiting server is offered to the tracker under its key
with a fresh random match key (``PUT [key, [proxy port, match key], null]``), and the proxy
describes itself with ``UPDATE_INFO {"key": "server:proxy[k1,k2,...]", "addr": [null, port]}``.
Clients must present a match key the tracker handed out, else they get ``RPC_CODE_MISMATCH``.
Every two seconds the proxy asks the tracker which of its keys are still on offer
(``GET_PENDING_MATCHKEYS``); a key handed out to a client that does not connect within five
seconds is replaced by a new one. A lost tracker connection is reopened, with new keys.

With a shared secret (``auth_key`` or ``TVM_RPC_KEY``), the proxy plays the server's part of
the mutual handshake of ``crates/tvm-rpc/src/handshake.rs`` with every peer: a server or client
that cannot prove the key is refused before it is pooled (so nobody registers a key without
it), and keyed peers check that the proxy holds the key. A handshake must complete within
``ProxyLimits.handshake_timeout`` seconds in total; connections and waiting peers are capped
(:class:`ProxyLimits`), and each refused peer is one log line.

With a ``web_port``, a second listener (on the same host) serves the browser runtime: its page
(``/``) and script (``/tvm_rpc.js``) over HTTP, and at ``/ws`` websocket peers, which speak the
same handshake and protocol in binary messages and are paired and forwarded like TCP peers
(``tvm.rpc._websocket``; needs the ``websockets`` package, ``pip install "tvm[web]"``).

The proxy runs in a :class:`~tvm.support.popen_pool.PopenWorker` process, on an asyncio event
loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from ..support.popen_pool import PopenWorker
from . import base
from ._listen import (
    LoopErrors,
    WorkerService,
    bind_listener,
    run_in_thread,
    stderr_logger,
    stop_worker,
)
from .base import (
    MAX_TRACKER_MSG_BYTES,
    RPC_CODE_BUSY,
    RPC_CODE_DUPLICATE,
    RPC_CODE_MISMATCH,
    RPC_CODE_SUCCESS,
    RPC_MAGIC,
    TrackerCode,
)

__all__ = ["Proxy", "ProxyLimits"]

logger = logging.getLogger("RPCProxy")

_INT32 = struct.Struct("<i")


@dataclass(frozen=True)
class ProxyLimits:
    """What peers can make the proxy hold. ``handshake_timeout``: seconds, in total, for a
    peer's handshake (and its proof of the key). ``max_connections``: connections at once
    (the next is closed at accept). ``max_waiting``: peers of one side (servers, or clients)
    waiting for a partner; the next gets ``RPC_CODE_BUSY``."""

    handshake_timeout: float = 10.0
    max_connections: int = 512
    max_waiting: int = 256

    def check(self) -> None:
        """``ValueError`` naming a limit that is not positive."""
        for name, value in vars(self).items():
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"proxy limit {name} must be positive, got {value!r}")


#: Bytes read at once when forwarding (and the largest websocket message taken).
_CHUNK = 1 << 20

#: Ports tried from ``web_port`` on: the first free one of ``[web_port, web_port + 100)``.
_WEB_PORT_RANGE = 100


@dataclass(eq=False)
class _Peer:
    """One connection that completed the handshake and waits to be paired."""

    #: An asyncio stream, or a websocket (``_websocket.WebSocketStream``) as both.
    reader: Any
    writer: Any
    rpc_key: str
    match_key: str
    paired: asyncio.Future[_Peer] = field(repr=False)
    alloc_time: float | None = None
    #: Whether the peer proved the proxy's shared secret (it then gets the keyed pairing).
    authenticated: bool = False

    @property
    def is_server(self) -> bool:
        return self.rpc_key.startswith("server:")

    @property
    def name(self) -> str:
        return f"{self.writer.get_extra_info('peername')} ({self.rpc_key})"


class _Handshake(Exception):
    """The peer broke the handshake; its connection is closed."""


class _ProxyServer:
    """The proxy's pools and its asyncio handlers."""

    def __init__(
        self,
        sock: socket.socket,
        listen_port: int,
        timeout_client: float,
        timeout_server: float,
        tracker_addr: tuple[str, int] | None,
        auth_key: str | None = None,
        limits: ProxyLimits | None = None,
        web_sock: socket.socket | None = None,
    ) -> None:
        self._sock = sock
        self._web_sock = web_sock
        self._auth_key = auth_key
        self.limits = limits or ProxyLimits()
        self._connections = 0
        self._loop_errors = LoopErrors(logger)
        self._listen_port = listen_port
        self._timeout_client = timeout_client
        self._timeout_server = timeout_server
        self._tracker_addr = tracker_addr
        self._servers: dict[str, _Peer] = {}
        self._clients: dict[str, _Peer] = {}
        # Tracker mode
        self.timeout_alloc = 5.0
        self.update_period = 2.0
        self._pending_puts: list[str] = []
        self._reported_keys: set[str] = set()
        self._wake: asyncio.Event | None = None

    async def main(self) -> None:
        """Serves until :func:`_stop_proxy` cancels it (or the worker process is killed)."""
        _RUNNING["loop"] = asyncio.get_running_loop()
        _RUNNING["task"] = asyncio.current_task()
        self._wake = asyncio.Event()
        asyncio.get_running_loop().set_exception_handler(self._loop_errors)
        server = await asyncio.start_server(self._serve, sock=self._sock, limit=_CHUNK)
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(server)
            if self._web_sock is not None:
                await stack.enter_async_context(await self._web_server(self._web_sock))
            if self._tracker_addr is not None:
                await self._tracker_loop(self._tracker_addr)
            else:
                await server.serve_forever()

    # -- connections ------------------------------------------------------------------------

    async def _web_server(self, sock: socket.socket) -> Any:
        """The web listener: the runtime's page and script over HTTP, websocket peers at
        ``/ws``."""
        from websockets.asyncio.server import serve

        from ._websocket import answer_http

        return await serve(
            self._serve_websocket,
            sock=sock,
            process_request=answer_http,
            max_size=_CHUNK,
            compression=None,
            logger=logger,
        )

    async def _serve_websocket(self, connection: Any) -> None:
        """One websocket peer: served as a TCP peer is, through a stream over the connection."""
        from ._websocket import WebSocketStream

        stream = WebSocketStream(connection)
        pump = asyncio.ensure_future(stream.pump())
        try:
            await self._serve(stream, stream)
            await stream.wait_closed()
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump

    async def _serve(self, reader: Any, writer: Any) -> None:
        """One peer, TCP (an asyncio stream pair) or websocket (a ``WebSocketStream`` as both):
        handshake, pairing, then forwarding until either side closes."""
        name = str(writer.get_extra_info("peername"))
        self._loop_errors.accepted()
        if self._connections >= self.limits.max_connections:
            logger.warning("%s: refused, %d connections are open", name, self._connections)
            writer.transport.abort()
            return
        self._connections += 1
        try:
            try:
                peer = await asyncio.wait_for(
                    self._handshake(reader, writer), self.limits.handshake_timeout
                )
            except asyncio.TimeoutError:
                raise _Handshake(
                    f"no handshake within {self.limits.handshake_timeout:g} s"
                ) from None
            logger.info("Handler ready %s", peer.name)
            partner = await self._pair(peer)
            if partner is not None:
                await self._forward(peer, partner)
        except _Handshake as err:
            logger.warning("%s: %s; closing the connection", name, err)
        except (ConnectionError, asyncio.IncompleteReadError) as err:
            logger.info("%s: connection lost: %s", name, err)
        except asyncio.CancelledError:
            # The proxy is stopping. Ending normally (not cancelled) keeps Python 3.11's
            # stream callback from reporting the cancellation as an error.
            logger.info("%s: closed, the proxy is stopping", name)
        finally:
            self._connections -= 1
            writer.close()

    async def _handshake(self, reader: Any, writer: Any) -> _Peer:
        try:
            (magic,) = _INT32.unpack(await reader.readexactly(4))
            if magic != RPC_MAGIC:
                raise _Handshake(f"invalid RPC magic {magic:#x}")
            (length,) = _INT32.unpack(await reader.readexactly(4))
            if length < 0 or length > base.MAX_KEY_BYTES:
                raise _Handshake(f"invalid key length {length}")
            raw = await reader.readexactly(length)
        except asyncio.IncompleteReadError as err:
            raise _Handshake(
                f"connection closed during the handshake ({len(err.partial)} of "
                f"{err.expected} bytes)"
            ) from None
        try:
            rpc_key = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _Handshake(f"key is not UTF-8: {err}") from None
        if not rpc_key.startswith(("server:", "client:")):
            raise _Handshake(f"key {rpc_key[:100]!r} starts with neither 'server:' nor 'client:'")
        # "client:<key> -timeout=10" matches "server:<key>"
        words = rpc_key[len("client:") :].split()
        match_key = words[0] if words else ""
        future: asyncio.Future[_Peer] = asyncio.get_running_loop().create_future()
        peer = _Peer(reader, writer, rpc_key, match_key, future)
        if self._auth_key is not None:
            await self._authenticate(peer, words[1:])
        return peer

    async def _authenticate(self, peer: _Peer, options: list[str]) -> None:
        """The server's part of the mutual proof of the shared secret (the handshake of
        ``crates/tvm-rpc/src/handshake.rs``), played by the proxy with each side: the peer's
        ``-cnonce``, the proxy's nonce and proof, the peer's 32-byte proof. A peer that cannot
        prove the key is refused before it is pooled."""
        assert self._auth_key is not None
        writer = peer.writer
        if base.OWN_PROTOCOL_OPTION not in options:
            writer.write(_INT32.pack(RPC_CODE_MISMATCH))
            raise _Handshake("refused: the peer cannot prove the authentication key")
        role = "client" if peer.is_server else "server"
        reply = f"{role}:{peer.match_key} {base.OWN_PROTOCOL_OPTION}"
        client_nonce = next((o[len("-cnonce=") :] for o in options if o.startswith("-cnonce=")), "")
        if len(client_nonce) != 32 or any(c not in "0123456789abcdef" for c in client_nonce):
            _write_key(writer, RPC_MAGIC, f"{reply} -auth=required")
            raise _Handshake("refused: no authentication key")
        nonce = base.fresh_nonce()
        proof = base.auth_proof(self._auth_key, base.SERVER_PROOF, client_nonce, nonce)
        _write_key(writer, RPC_MAGIC, f"{reply} -nonce={nonce} -proof={proof}")
        try:
            answer = await peer.reader.readexactly(32)
        except asyncio.IncompleteReadError:
            raise _Handshake("closed before proving the authentication key") from None
        expected = bytes.fromhex(
            base.auth_proof(self._auth_key, base.CLIENT_PROOF, client_nonce, nonce)
        )
        if not hmac.compare_digest(answer, expected):
            writer.write(_INT32.pack(RPC_CODE_MISMATCH))
            raise _Handshake("refused: wrong proof of the authentication key")
        peer.authenticated = True

    async def _pair(self, peer: _Peer) -> _Peer | None:
        """Finds or awaits the partner of ``peer``; None if there is none (the peer has been
        answered and is to be closed)."""
        if self._tracker_addr is not None:
            timeout: float | None = None
            if peer.is_server:
                if len(self._servers) >= self.limits.max_waiting:
                    peer.writer.write(_INT32.pack(RPC_CODE_BUSY))
                    raise _Handshake(f"refused: {len(self._servers)} servers are waiting")
                key = base.random_key(peer.match_key, cmap=self._servers)
                peer.match_key = key
                self._servers[key] = peer
                self._pending_puts.append(key)
                assert self._wake is not None
                self._wake.set()
                pool = self._servers
            else:
                server = self._servers.pop(peer.match_key, None)
                if server is None:
                    peer.writer.write(_INT32.pack(RPC_CODE_MISMATCH))
                    return None
                return self._pair_up(server, peer)
        else:
            own, other = (
                (self._servers, self._clients) if peer.is_server else (self._clients, self._servers)
            )
            timeout = self._timeout_server if peer.is_server else self._timeout_client
            partner = other.pop(peer.match_key, None)
            if partner is not None:
                return self._pair_up(partner, peer)
            if peer.match_key in own:
                logger.info("Duplicate connection with same key=%s", peer.match_key)
                peer.writer.write(_INT32.pack(RPC_CODE_DUPLICATE))
                return None
            if len(own) >= self.limits.max_waiting:
                peer.writer.write(_INT32.pack(RPC_CODE_BUSY))
                raise _Handshake(f"refused: {len(own)} peers of its side are waiting")
            own[peer.match_key] = peer
            pool = own
        return await self._wait_for_partner(peer, pool, timeout)

    async def _wait_for_partner(
        self, peer: _Peer, pool: dict[str, _Peer], timeout: float | None
    ) -> _Peer | None:
        # Watch the connection while waiting: a peer that leaves is taken out of the pool.
        eof = asyncio.ensure_future(peer.reader.read(1))
        waits: set[asyncio.Future[Any]] = {peer.paired, eof}
        try:
            done, _ = await asyncio.wait(
                waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not eof.done():
                eof.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await eof
        if peer.paired.done():
            if eof.done() and not eof.cancelled() and eof.exception() is None:
                early = eof.result()
                if early:
                    partner = peer.paired.result()
                    partner.writer.write(early)
            return peer.paired.result()
        if pool.get(peer.match_key) is peer:
            del pool[peer.match_key]
        if not done:
            logger.info("Timeout %s, cannot find match key=%s", peer.name, peer.match_key)
            peer.writer.write(_INT32.pack(RPC_CODE_MISMATCH))
        elif eof.exception() is None and eof.result():
            logger.warning("%s: data before the pairing; closing the connection", peer.name)
        return None

    def _pair_up(self, waiting: _Peer, arriving: _Peer) -> _Peer:
        for side, other in ((waiting, arriving), (arriving, waiting)):
            key = other.rpc_key.encode("utf-8")
            if side.authenticated and not side.is_server:
                # The keyed handshake's last reply: the client already has the key it checked.
                side.writer.write(_INT32.pack(RPC_CODE_SUCCESS))
            else:
                side.writer.write(_INT32.pack(RPC_CODE_SUCCESS) + _INT32.pack(len(key)) + key)
        logger.info("Pair up %s and %s", waiting.name, arriving.name)
        waiting.paired.set_result(arriving)
        return waiting

    async def _forward(self, source: _Peer, target: _Peer) -> None:
        """Copies what ``source`` sends to ``target`` until ``source`` ends; then closes
        ``target`` (once what was written to it is flushed)."""
        try:
            while True:
                chunk = await source.reader.read(_CHUNK)
                if not chunk:
                    break
                target.writer.write(chunk)
                await target.writer.drain()
        except (ConnectionError, OSError) as err:
            logger.info("%s: forwarding ended: %s", source.name, err)
        finally:
            target.writer.close()

    # -- tracker ----------------------------------------------------------------------------

    async def _tracker_loop(self, addr: tuple[str, int]) -> None:
        assert self._wake is not None
        logger.info("Tracker address: %s", addr)
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        last_poll = time.monotonic()
        while True:
            periodic = time.monotonic() - last_poll >= self.update_period
            try:
                if conn is None:
                    conn = await _open_tracker(addr, self._auth_key)
                    # A new connection: offer every waiting server again.
                    self._pending_puts = list(self._servers)
                if periodic:
                    last_poll = time.monotonic()
                    await self._refresh_keys(conn)
                await self._report(conn)
            except (OSError, asyncio.IncompleteReadError, ValueError) as err:
                logger.warning(
                    "Lost tracker connection: %s; reconnecting in %g s", err, self.update_period
                )
                if conn is not None:
                    conn[1].close()
                conn = None
                self._reported_keys.clear()
                self._regenerate(list(self._servers))
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                remaining = self.update_period - (time.monotonic() - last_poll)
                await asyncio.wait_for(self._wake.wait(), max(remaining, 0.01))

    async def _refresh_keys(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        pending = set(await _tracker_call(conn, [TrackerCode.GET_PENDING_MATCHKEYS]))
        stale = []
        now = time.monotonic()
        for key, peer in self._servers.items():
            if key in pending:
                peer.alloc_time = None
            elif peer.alloc_time is None:
                peer.alloc_time = now
            elif now - peer.alloc_time > self.timeout_alloc:
                stale.append(key)
        if stale:
            logger.info("No incoming connection on %s; new keys", stale)
            self._pending_puts += self._regenerate(stale)

    async def _report(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        new_key = False
        while self._pending_puts:
            key = self._pending_puts[0]
            if key in self._servers:
                rpc_key = base.split_random_key(key)[0]
                request = [TrackerCode.PUT, rpc_key, [self._listen_port, key], None]
                reply = await _tracker_call(conn, request)
                if reply != TrackerCode.SUCCESS:
                    raise ValueError(f"tracker refused PUT: {reply!r}")
                if rpc_key not in self._reported_keys:
                    self._reported_keys.add(rpc_key)
                    new_key = True
            self._pending_puts.pop(0)
        if new_key:
            info = {
                "key": "server:proxy[" + ",".join(sorted(self._reported_keys)) + "]",
                "addr": [None, self._listen_port],
            }
            reply = await _tracker_call(conn, [TrackerCode.UPDATE_INFO, info])
            if reply != TrackerCode.SUCCESS:
                raise ValueError(f"tracker refused UPDATE_INFO: {reply!r}")

    def _regenerate(self, keys: list[str]) -> list[str]:
        """Gives the waiting servers of ``keys`` new match keys (old ones become invalid)."""
        fresh = []
        for key in keys:
            peer = self._servers.pop(key, None)
            if peer is None:
                continue
            new = base.random_key(base.split_random_key(key)[0], cmap=self._servers)
            peer.match_key = new
            peer.alloc_time = None
            self._servers[new] = peer
            fresh.append(new)
        return fresh


def _write_key(writer: asyncio.StreamWriter, code: int, key: str) -> None:
    raw = key.encode("utf-8")
    writer.write(_INT32.pack(code) + _INT32.pack(len(raw)) + raw)


async def _open_tracker(
    addr: tuple[str, int], auth_key: str | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    def opened() -> socket.socket:
        sock = socket.create_connection(addr, timeout=10)
        try:
            base.tracker_handshake(sock, addr, auth_key)
        except RuntimeError as err:
            sock.close()
            raise ValueError(str(err)) from None
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        return sock

    # The handshake (with its proof of the key) is short and blocking: done on a thread.
    sock = await asyncio.to_thread(opened)
    return await asyncio.open_connection(sock=sock)


async def _tracker_call(
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: list[Any]
) -> Any:
    reader, writer = conn
    payload = json.dumps(request).encode("utf-8")
    writer.write(_INT32.pack(len(payload)) + payload)
    await writer.drain()
    (size,) = _INT32.unpack(await reader.readexactly(4))
    if size <= 0 or size > MAX_TRACKER_MSG_BYTES:
        raise ValueError(f"invalid JSON frame size {size} from the tracker")
    return json.loads((await reader.readexactly(size)).decode("utf-8"))


def _start_proxy(
    host: str,
    port: int,
    port_end: int,
    timeout_client: float,
    timeout_server: float,
    tracker_addr: tuple[str, int] | None,
    silent: bool,
    auth_key: str | None = None,
    limits: ProxyLimits | None = None,
    web_port: int = 0,
) -> tuple[int, int]:
    """Runs in the popen worker: binds, starts the proxy thread, returns the port and the web
    port (0 without one)."""
    stderr_logger("RPCProxy", silent)
    sock, bound = bind_listener(host, port, port_end)
    web_sock, web_bound = None, 0
    if web_port:
        try:
            web_sock, web_bound = bind_listener(host, web_port, web_port + _WEB_PORT_RANGE)
        except BaseException:
            sock.close()
            raise
    server = _ProxyServer(
        sock, bound, timeout_client, timeout_server, tracker_addr, auth_key, limits, web_sock
    )
    _RUNNING["thread"] = run_in_thread(server.main, "rpc-proxy")
    logger.info("RPCProxy: client port bind to %s:%d", host, bound)
    if web_sock is not None:
        logger.info(
            "RPCProxy: web port bind to %s:%d (page http://%s:%d/)",
            host,
            web_bound,
            host,
            web_bound,
        )
    return bound, web_bound


#: The proxy of this worker process: its thread, event loop and main task.
_RUNNING: dict[str, Any] = {}


def _stop_proxy(timeout: float) -> bool:
    """Runs in the popen worker: cancels the proxy's main task (closing the listening socket
    and every connection) and waits for its thread; whether it ended within ``timeout`` s."""
    loop, task, thread = _RUNNING.get("loop"), _RUNNING.get("task"), _RUNNING.get("thread")
    if loop is not None and task is not None and not loop.is_closed():

        async def shutdown() -> None:
            # Connections first, each awaited to its end, then the main task (which closes
            # the listening socket): nothing is left to report an error at exit.
            others = [t for t in asyncio.all_tasks() if t not in (task, asyncio.current_task())]
            for other in others:
                other.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout)
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()


class Proxy(WorkerService):
    """An RPC proxy running in a worker process.

    Parameters
    ----------
    host
        The address to bind to; the loopback address by default.
    port, port_end
        The first free port of ``[port, port_end)`` is used; ``port=0`` lets the system choose.
    timeout_client, timeout_server
        Seconds a client (server) waits for its partner before it gets ``RPC_CODE_MISMATCH``.
    tracker_addr
        ``(host, port)`` of a tracker to offer the waiting servers to, or None.
    web_port
        0 (the default): no web side. Otherwise the first free port of ``[web_port, web_port +
        100)`` on ``host`` serves the browser runtime (its page, its script, and websocket peers
        at ``/ws``); ``web_port`` is then the bound port. Needs the ``websockets`` package.
    silent
        Log warnings only.
    auth_key
        The shared secret (default: ``TVM_RPC_KEY`` if set). With one, the proxy plays the
        server's part of the mutual handshake (``crates/tvm-rpc/src/handshake.rs``) with every
        peer, servers registering included: a peer that cannot prove the key (Apache TVM's, or
        ours without it) is refused before it is pooled, and a keyed client checks that the
        proxy holds the key. When paired, a keyed client gets ``RPC_MAGIC`` alone and a keyed
        server ``RPC_MAGIC`` and the client's key. The same key authenticates the proxy to its
        tracker. Empty or whitespace: ``ValueError``.
    limits
        :class:`ProxyLimits`: the handshake deadline, open connections and waiting peers.
        Each refused peer is one log line.

    The constructor returns once the proxy listens; ``port`` is the bound port. Call
    :meth:`terminate` to stop it (or use the proxy as a context manager).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9091,
        port_end: int = 9199,
        timeout_client: float = 600,
        timeout_server: float = 600,
        tracker_addr: tuple[str, int] | None = None,
        web_port: int = 0,
        silent: bool = False,
        auth_key: str | None = None,
        limits: ProxyLimits | None = None,
    ) -> None:
        self.proc: PopenWorker | None = None
        auth_key = base.resolve_auth_key(auth_key)
        if limits is not None:
            limits.check()
        if web_port:
            if not 0 < web_port < 65536:
                raise ValueError(f"web_port must be 0 or a port number, got {web_port!r}")
            try:
                import websockets  # noqa: F401
            except ImportError:
                raise ImportError(
                    "the RPC proxy's web side (web_port) needs the websockets package: "
                    'pip install "tvm[web]"'
                ) from None
        self.host = host
        addr = None if tracker_addr is None else (str(tracker_addr[0]), int(tracker_addr[1]))
        proc = PopenWorker()
        proc.send(
            _start_proxy,
            [
                host,
                port,
                port_end,
                timeout_client,
                timeout_server,
                addr,
                silent,
                auth_key,
                limits,
                web_port,
            ],
        )
        #: The bound port, and the bound web port (0 without a web side).
        self.port: int
        self.web_port: int
        try:
            self.port, self.web_port = proc.recv()
        except BaseException:
            proc.kill()
            raise
        self.proc = proc

    def page_url(self, key: str = "webgpu", auth_key: str | None = None) -> str:
        """The address of the browser runtime's page that registers under ``key`` (a
        ``ValueError`` without a web side). A proxy with a shared secret needs the page to
        prove it: pass it as ``auth_key``, which goes in the address's fragment (``#auth=``),
        never sent to a server; an empty one is a ``ValueError``."""
        if not self.web_port:
            raise ValueError("this proxy has no web side: start it with web_port")
        from urllib.parse import quote

        host = f"[{self.host}]" if ":" in self.host else self.host
        url = f"http://{host}:{self.web_port}/?key={quote(key, safe='')}"
        if auth_key is not None:
            base.check_auth_key(auth_key, "auth_key")
            url += f"#auth={quote(auth_key, safe='')}"
        return url

    def terminate(self) -> None:
        """Stops the proxy (closing the listening socket and every connection), then ends its
        worker process. Idempotent."""
        proc, self.proc = self.proc, None
        stop_worker(proc, _stop_proxy, [5.0], "Proxy", logger)
