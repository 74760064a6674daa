"""The RPC tracker: a registry of RPC servers that hands them out to clients by key.

Servers and clients talk to the tracker over TCP. A connection starts with ``<i
RPC_TRACKER_MAGIC``, which the tracker echoes; then each side sends JSON frames (``<i`` byte
length, UTF-8 text; see :func:`tvm.rpc.base.sendjson`). Each request is a list whose first
element is a :class:`~tvm.rpc.base.TrackerCode`:

=========================  ==================================================  ==================
request                    meaning                                              reply
=========================  ==================================================  ==================
``[PING]``                 liveness                                             ``0``
``[STOP, stop_key]``       stop the tracker (the key :class:`Tracker` made)     ``0``, or ``-1``
``[PUT, key, [port,        offer one session of a server for ``key``; the      ``0``
match_key], addr?]``       address is ``addr`` if given and not null, else
                           the peer's IP
``[REQUEST, key, user,     ask for a server of ``key``; answered once one is    ``[0, [addr, port,
priority]``                free, highest priority first, FIFO among equals      match_key]]``
``[UPDATE_INFO, info]``    describe this connection: ``{"key": "server:<k>",    ``0``
                           "addr": [host or null, port]}`` (null: peer IP)
``[SUMMARY]``              the state of the queues and servers                  ``[0, {...}]``
``[GET_PENDING_MATCHKEYS]``  this connection's offered keys not yet handed out  a list of keys
=========================  ==================================================  ==================

The summary is ``{"queue_info": {key: {"free": n, "pending": m}}, "server_info": [the infos of
connections whose key starts with "server"]}``.

A server keeps its connection open: when it closes, the sessions it offered are withdrawn, and
the requests a closed client connection was waiting on are dropped. A connection that breaks the
protocol (wrong magic, a frame size outside ``1..MAX_TRACKER_MSG_BYTES``, text that is not JSON,
a malformed request, an unknown code) is logged and closed; the tracker goes on serving the
others.

The tracker runs in a :class:`~tvm.support.popen_pool.PopenWorker` process, on an asyncio event
loop (standard library only).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from ..support.popen_pool import PopenWorker
from . import base
from ._listen import (
    LoopErrors,
    WorkerService,
    bind_listener,
    peer_host,
    run_in_thread,
    stderr_logger,
    stop_worker,
)
from .base import MAX_TRACKER_MSG_BYTES, RPC_TRACKER_MAGIC, TrackerCode

__all__ = ["PriorityScheduler", "Tracker", "TrackerLimits"]

logger = logging.getLogger("RPCTracker")

_INT32 = struct.Struct("<i")


@dataclass(eq=False)
class _Resource:
    """One session a server offered with PUT."""

    conn: _Connection
    addr: str
    port: int
    matchkey: str


@dataclass(eq=False)
class _Request:
    """One REQUEST waiting for a resource."""

    conn: _Connection
    user: str
    priority: float


class PriorityScheduler:
    """The queue of one key: offered resources (served FIFO) and waiting requests (highest
    priority first, FIFO among equal priorities)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._values: list[_Resource] = []
        self._requests: list[tuple[float, int, _Request]] = []
        self._order = itertools.count()

    def put(self, value: _Resource) -> None:
        """Adds an offered resource and serves waiting requests."""
        self._values.append(value)
        self._schedule()

    def request(self, request: _Request) -> None:
        """Queues a request and serves it if a resource is free."""
        heapq.heappush(self._requests, (-request.priority, next(self._order), request))
        request.conn.waiting += 1
        self._schedule()

    def remove(self, value: _Resource) -> None:
        """Withdraws a resource that has not been handed out."""
        if value in self._values:
            self._values.remove(value)

    def cancel(self, conn: _Connection) -> None:
        """Drops the requests of a closed connection."""
        kept = [item for item in self._requests if item[2].conn is not conn]
        conn.waiting = 0
        if len(kept) != len(self._requests):
            heapq.heapify(kept)
            self._requests = kept

    def empty(self) -> bool:
        """Whether nothing is on offer and nobody waits (the queue can be forgotten)."""
        return not self._values and not self._requests

    def summary(self) -> dict[str, int]:
        """``{"free": resources on offer, "pending": requests waiting}``."""
        return {"free": len(self._values), "pending": len(self._requests)}

    def _schedule(self) -> None:
        while self._values and self._requests:
            _, _, request = heapq.heappop(self._requests)
            request.conn.waiting -= 1
            value = self._values[0]
            if request.conn.reply([TrackerCode.SUCCESS, [value.addr, value.port, value.matchkey]]):
                self._values.pop(0)
                value.conn.handed_out(value)


@dataclass(frozen=True)
class TrackerLimits:
    """What one peer, and all of them together, can make the tracker hold.

    ``handshake_timeout``: seconds, in total, for the magic (and the proof of the key) and for
    the body of each message once its size arrived. ``idle_timeout``: seconds a connection
    that neither registered a server nor waits for a REQUEST may stay silent.
    ``write_timeout``: seconds a peer may leave replies unread while more are due.
    ``max_message_bytes``: largest request frame. ``max_connections``: connections at once
    (the next is closed at accept). ``max_entries_per_connection`` / ``max_entries``: PUTs on
    offer plus REQUESTs waiting, per connection and in total. ``max_unread_bytes``: replies
    queued for a peer that does not read them before it is closed. ``max_text``: longest key,
    match key, user or address; ``max_info_bytes``: largest UPDATE_INFO (as JSON);
    ``max_keys``: distinct keys with a queue (empty queues are forgotten to make room)."""

    handshake_timeout: float = 10.0
    idle_timeout: float = 60.0
    write_timeout: float = 30.0
    max_message_bytes: int = 64 * 1024
    max_connections: int = 512
    max_entries_per_connection: int = 256
    max_entries: int = 8192
    max_unread_bytes: int = 1 << 20
    max_text: int = 1024
    max_info_bytes: int = 2048
    max_keys: int = 4096

    def check(self) -> None:
        """``ValueError`` naming a limit that is not positive."""
        for name, value in vars(self).items():
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"tracker limit {name} must be positive, got {value!r}")


@dataclass(eq=False)
class _Connection:
    """The tracker's side of one TCP connection."""

    writer: asyncio.StreamWriter
    name: str
    host: str
    max_unread_bytes: int = 1 << 20
    info: dict[str, Any] = field(default_factory=dict)
    pending_matchkeys: set[str] = field(default_factory=set)
    offered: list[tuple[PriorityScheduler, _Resource]] = field(default_factory=list)
    waiting: int = 0
    closed: bool = False

    def reply(self, data: Any) -> bool:
        """Queues a JSON reply; False if the connection is closed. A peer that leaves more
        than ``max_unread_bytes`` of replies unread is closed (one log line)."""
        if self.closed or self.writer.is_closing():
            return False
        transport = self.writer.transport
        if transport.get_write_buffer_size() > self.max_unread_bytes:
            logger.warning(
                "%s: more than %d bytes of replies unread; closing the connection",
                self.name,
                self.max_unread_bytes,
            )
            self.closed = True
            transport.abort()
            return False
        payload = json.dumps(data).encode("utf-8")
        self.writer.write(_INT32.pack(len(payload)) + payload)
        return True

    def handed_out(self, value: _Resource) -> None:
        """Forgets a resource that a request took."""
        self.pending_matchkeys.discard(value.matchkey)
        self.offered = [item for item in self.offered if item[1] is not value]

    @property
    def entries(self) -> int:
        """PUTs on offer plus REQUESTs waiting."""
        return len(self.offered) + self.waiting

    @property
    def idle_allowed(self) -> bool:
        """Whether silence is legitimate: a registered server, or a client waiting."""
        return bool(self.info or self.offered or self.waiting)


class _ProtocolError(Exception):
    """A peer broke the tracker protocol; its connection is closed."""


class _TrackerServer:
    """The tracker's state and its asyncio connection handlers."""

    def __init__(
        self,
        sock: socket.socket,
        stop_key: str,
        auth_key: str | None = None,
        limits: TrackerLimits | None = None,
    ) -> None:
        self._sock = sock
        self._stop_key = stop_key
        self._auth_key = auth_key
        self.limits = limits or TrackerLimits()
        self._schedulers: dict[str, PriorityScheduler] = {}
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping: asyncio.Event | None = None
        self._loop_errors = LoopErrors(logger)

    async def main(self) -> None:
        """Serves until a STOP request with the right key arrives."""
        self._stopping = asyncio.Event()
        asyncio.get_running_loop().set_exception_handler(self._loop_errors)
        server = await asyncio.start_server(self._serve, sock=self._sock)
        async with server:
            await self._stopping.wait()
            server.close()
            for conn in list(self._connections):
                conn.closed = True
                conn.writer.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        logger.info("Tracker stopped")

    def _scheduler(self, key: str) -> PriorityScheduler:
        scheduler = self._schedulers.get(key)
        if scheduler is None:
            if len(self._schedulers) >= self.limits.max_keys:
                # Queues with nothing in them are forgotten only when keys run out (summaries
                # keep showing a key whose servers left, as Apache TVM's tracker does).
                for empty in [k for k, sch in self._schedulers.items() if sch.empty()]:
                    del self._schedulers[empty]
            if len(self._schedulers) >= self.limits.max_keys:
                raise _ProtocolError(f"refused a new key: {self.limits.max_keys} keys in use")
            scheduler = self._schedulers[key] = PriorityScheduler(key)
        return scheduler

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        name = str(writer.get_extra_info("peername"))
        self._loop_errors.accepted()
        if len(self._connections) >= self.limits.max_connections:
            logger.warning(
                "%s: refused, %d connections are open", name, self.limits.max_connections
            )
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        host = peer_host(writer)
        conn = _Connection(
            writer=writer, name=name, host=host, max_unread_bytes=self.limits.max_unread_bytes
        )
        self._connections.add(conn)
        try:
            await self._converse(reader, conn)
        except _ProtocolError as err:
            logger.warning("%s: %s; closing the connection", conn.name, err)
        except (ConnectionError, asyncio.IncompleteReadError) as err:
            logger.warning("%s: connection lost: %s", conn.name, err)
        except TimeoutError as err:
            logger.warning("%s: %s; closing the connection", conn.name, err or "timed out")
            # Replies it did not read are dropped, not flushed.
            writer.transport.abort()
        except asyncio.CancelledError:
            pass
        finally:
            self._drop(conn)
            self._tasks.discard(task)
            writer.close()

    async def _handshake(self, reader: asyncio.StreamReader, conn: _Connection) -> bool:
        """The magic and, with a shared secret, the mutual proof (see
        :func:`tvm.rpc.base.tracker_handshake`); False if the peer left before the magic."""
        magic = await _read_exactly(reader, 4, "the handshake")
        if magic is None:
            return False
        if _INT32.unpack(magic)[0] != RPC_TRACKER_MAGIC:
            raise _ProtocolError(f"invalid magic {_INT32.unpack(magic)[0]:#x}")
        if self._auth_key is None:
            conn.writer.write(magic)
            return True
        conn.writer.write(_INT32.pack(base.RPC_TRACKER_MAGIC_AUTH))
        nonce = base.fresh_nonce()
        conn.reply([TrackerCode.AUTH, nonce])
        answer = await self._read_message(reader, 1024)
        if answer is None:
            raise _ProtocolError("closed before proving the authentication key")
        ok = (
            isinstance(answer, list)
            and len(answer) == 3
            and answer[0] == TrackerCode.AUTH
            and isinstance(answer[1], str)
            and 0 < len(answer[1]) <= 64
            and base.proof_matches(
                base.auth_proof(self._auth_key, base.TRACKER_CLIENT_PROOF, nonce, answer[1]),
                answer[2],
            )
        )
        if not ok:
            conn.reply(TrackerCode.FAIL)
            await conn.writer.drain()
            raise _ProtocolError("refused: wrong or missing proof of the authentication key")
        conn.reply(
            [
                TrackerCode.SUCCESS,
                base.auth_proof(self._auth_key, base.TRACKER_PROOF, nonce, answer[1]),
            ]
        )
        return True

    async def _read_message(self, reader: asyncio.StreamReader, limit: int) -> Any:
        """One JSON frame of at most ``limit`` bytes; None if the peer closed between frames.
        The body must follow its size within ``handshake_timeout``."""
        head = await _read_exactly(reader, 4, "a message size")
        if head is None:
            return None
        (size,) = _INT32.unpack(head)
        if size <= 0 or size > limit:
            raise _ProtocolError(f"Invalid msg_size {size} (must be 1..{limit})")
        body = await asyncio.wait_for(
            _read_exactly(reader, size, f"a message of {size} bytes"), self.limits.handshake_timeout
        )
        if body is None:
            raise _ProtocolError(f"connection closed before a message of {size} bytes")
        try:
            return json.loads(body.decode("utf-8"))
        except ValueError as err:
            raise _ProtocolError(f"message is not UTF-8 JSON: {err}") from None

    async def _converse(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        limits = self.limits
        try:
            if not await asyncio.wait_for(self._handshake(reader, conn), limits.handshake_timeout):
                return
        except asyncio.TimeoutError:
            raise TimeoutError(f"no handshake within {limits.handshake_timeout:g} s") from None
        while True:
            idle = None if conn.idle_allowed else limits.idle_timeout
            try:
                message = await asyncio.wait_for(
                    self._read_message(
                        reader, min(limits.max_message_bytes, MAX_TRACKER_MSG_BYTES)
                    ),
                    idle,
                )
            except asyncio.TimeoutError:
                raise TimeoutError(f"idle for {idle:g} s") from None
            if message is None:
                return
            try:
                self._handle(conn, message)
            except _ProtocolError:
                raise
            except (LookupError, TypeError, ValueError, AttributeError) as err:
                raise _ProtocolError(f"malformed request {_short(message)}: {err!r}") from None
            if self._stopping is not None and self._stopping.is_set():
                return
            if conn.closed:
                return
            try:
                await asyncio.wait_for(conn.writer.drain(), limits.write_timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(f"replies unread for {limits.write_timeout:g} s") from None

    def _handle(self, conn: _Connection, message: Any) -> None:
        if not isinstance(message, list) or not message or type(message[0]) is not int:
            raise _ProtocolError(
                f"a request must be a list starting with a code: {_short(message)}"
            )
        code = message[0]
        if code == TrackerCode.PING:
            conn.reply(TrackerCode.SUCCESS)
        elif code == TrackerCode.PUT:
            self._put(conn, message)
        elif code == TrackerCode.REQUEST:
            key, user, priority = self._text(message[1]), message[2], message[3]
            if type(priority) not in (int, float):
                raise TypeError(f"priority must be a number, got {priority!r}")
            if not self._room_for_entry(conn, "REQUEST"):
                per_connection = self.limits.max_entries_per_connection
                raise _ProtocolError(
                    f"too many waiting requests and offers ({per_connection} per connection)"
                )
            self._scheduler(key).request(_Request(conn, self._text(str(user)), priority))
        elif code == TrackerCode.UPDATE_INFO:
            info = message[1]
            if not isinstance(info, dict):
                raise TypeError(f"UPDATE_INFO takes a dict, got {_short(info)}")
            if len(json.dumps(info)) > self.limits.max_info_bytes:
                raise ValueError(f"UPDATE_INFO over {self.limits.max_info_bytes} bytes")
            addr = info.get("addr")
            if isinstance(addr, list) and addr and addr[0] is None:
                addr[0] = conn.host
            conn.info.update(info)
            if len(json.dumps(conn.info)) > self.limits.max_info_bytes:
                conn.info = dict(info)
            conn.reply(TrackerCode.SUCCESS)
        elif code == TrackerCode.SUMMARY:
            conn.reply([TrackerCode.SUCCESS, self._summary()])
        elif code == TrackerCode.GET_PENDING_MATCHKEYS:
            conn.reply(sorted(conn.pending_matchkeys))
        elif code == TrackerCode.STOP:
            if message[1] == self._stop_key:
                conn.reply(TrackerCode.SUCCESS)
                assert self._stopping is not None
                self._stopping.set()
            else:
                conn.reply(TrackerCode.FAIL)
        else:
            raise _ProtocolError(f"Unknown tracker code {code}")

    def _text(self, value: Any) -> str:
        text = _text(value)
        if len(text) > self.limits.max_text:
            raise ValueError(f"a string of {len(text)} characters (at most {self.limits.max_text})")
        return text

    def _room_for_entry(self, conn: _Connection, what: str) -> bool:
        """Whether one more PUT or REQUEST fits the limits (logged when it does not)."""
        limits = self.limits
        if conn.entries >= limits.max_entries_per_connection:
            return False
        total = sum(c.entries for c in self._connections)
        if total >= limits.max_entries:
            logger.warning("%s: %s refused, the tracker holds %d entries", conn.name, what, total)
            return False
        return True

    def _put(self, conn: _Connection, message: list[Any]) -> None:
        key = self._text(message[1])
        port, matchkey = message[2]
        if type(port) is not int:
            raise TypeError(f"port must be an int, got {port!r}")
        custom_addr = message[3] if len(message) >= 4 else None
        addr = conn.host if custom_addr is None else self._text(custom_addr)
        value = _Resource(conn, addr, port, self._text(matchkey))
        if not self._room_for_entry(conn, "PUT"):
            raise _ProtocolError(
                f"too many offers and waiting requests ({self.limits.max_entries_per_connection}"
                " per connection)"
            )
        # A match key on offer belongs to the connection that offered it.
        if any(
            value.matchkey in other.pending_matchkeys
            for other in self._connections
            if other is not conn
        ):
            logger.warning(
                "%s: PUT of match key %s refused: another server offers it", conn.name, matchkey
            )
            conn.reply(TrackerCode.FAIL)
            return
        scheduler = self._scheduler(key)
        conn.pending_matchkeys.add(value.matchkey)
        conn.offered.append((scheduler, value))
        conn.reply(TrackerCode.SUCCESS)
        scheduler.put(value)

    def _drop(self, conn: _Connection) -> None:
        conn.closed = True
        self._connections.discard(conn)
        for scheduler, value in conn.offered:
            scheduler.remove(value)
        conn.offered.clear()
        for scheduler in self._schedulers.values():
            scheduler.cancel(conn)

    def _summary(self) -> dict[str, Any]:
        servers = [
            conn.info
            for conn in self._connections
            if str(conn.info.get("key", "")).startswith("server")
        ]
        queues = {key: scheduler.summary() for key, scheduler in self._schedulers.items()}
        return {"queue_info": queues, "server_info": servers}


def _short(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (for log lines about hostile input)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


async def _read_exactly(reader: asyncio.StreamReader, nbytes: int, what: str) -> bytes | None:
    """``nbytes`` bytes, or None if the peer closed the connection before sending any of them;
    closing part-way raises ``_ProtocolError``."""
    try:
        return await reader.readexactly(nbytes)
    except asyncio.IncompleteReadError as err:
        if not err.partial:
            return None
        raise _ProtocolError(
            f"connection closed after {len(err.partial)} of the {nbytes} bytes of {what}"
        ) from None


# The tracker of this popen worker process, while it runs.
_RUNNING: dict[str, threading.Thread] = {}


def _start_tracker(
    host: str,
    port: int,
    port_end: int,
    silent: bool,
    reuse_addr: bool,
    timeout: float | None,
    auth_key: str | None = None,
    limits: TrackerLimits | None = None,
) -> tuple[int, str]:
    """Runs in the popen worker: binds, starts the tracker thread, returns (port, stop key)."""
    stderr_logger("RPCTracker", silent)
    sock, bound = bind_listener(host, port, port_end, reuse_addr, timeout)
    stop_key = base.random_key("tracker")
    server = _TrackerServer(sock, stop_key, auth_key, limits)
    _RUNNING["thread"] = run_in_thread(server.main, "rpc-tracker")
    logger.info("bind to %s:%d", host, bound)
    return bound, stop_key


def _wait_tracker_stopped(timeout: float) -> bool:
    """Runs in the popen worker: whether the tracker thread ended within ``timeout`` s."""
    thread = _RUNNING.get("thread")
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()


def _local_address(host: str) -> str:
    """The address to reach a server bound to ``host`` from this machine."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


class Tracker(WorkerService):
    """An RPC tracker running in a worker process.

    Parameters
    ----------
    host
        The address to bind to; the loopback address by default.
    port, port_end
        The first free port of ``[port, port_end)`` is used; ``port=0`` lets the system choose.
    silent
        Log warnings only (the default logs every connection event at INFO level to stderr).
    reuse_addr
        Set ``SO_REUSEADDR`` on the listening socket (never on Windows).
    timeout
        Set as the listening socket's timeout (kept for compatibility with Apache TVM; the
        tracker's event loop does not block on the socket, so it has no effect).
    auth_key
        The shared secret (default: ``TVM_RPC_KEY`` if set). With one, every connection must
        prove it holds the key before any request (servers registering included), and the
        tracker proves it back (:func:`tvm.rpc.base.tracker_handshake`); Apache TVM's peers
        cannot, and are refused. Empty or whitespace: ``ValueError``.
    limits
        What peers can make the tracker hold (:class:`TrackerLimits`): message sizes, offers
        and requests per connection and in total, unread replies, connections, and the
        handshake, idle and write timeouts after which a connection is closed. Each refused
        peer is one log line.

    The constructor returns once the tracker listens; ``port`` is the bound port. Call
    :meth:`terminate` to stop it (or use the tracker as a context manager).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9190,
        port_end: int = 9199,
        silent: bool = False,
        reuse_addr: bool = True,
        timeout: float | None = None,
        auth_key: str | None = None,
        limits: TrackerLimits | None = None,
    ) -> None:
        self.proc: PopenWorker | None = None
        self.host = host
        self._auth_key = base.resolve_auth_key(auth_key)
        if limits is not None:
            limits.check()
        proc = PopenWorker()
        proc.send(
            _start_tracker,
            [host, port, port_end, silent, reuse_addr, timeout, self._auth_key, limits],
        )
        try:
            self.port, self.stop_key = proc.recv()
        except BaseException:
            proc.kill()
            raise
        self.proc = proc

    def _stop_tracker(self) -> None:
        addr = (_local_address(self.host), self.port)
        with socket.create_connection(addr, timeout=10) as sock:
            base.tracker_handshake(sock, addr, self._auth_key)
            base.sendjson(sock, [TrackerCode.STOP, self.stop_key])
            reply = base.recvjson(sock)
            if reply != TrackerCode.SUCCESS:
                raise RuntimeError(f"the tracker at {addr} refused to stop: {reply!r}")

    def terminate(self) -> None:
        """Stops the tracker (a STOP request with its key, which closes every connection and
        the listening socket), then ends its worker process. Idempotent."""
        proc, self.proc = self.proc, None
        stop_worker(
            proc, _wait_tracker_stopped, [5.0], "Tracker", logger, before=self._stop_tracker
        )
