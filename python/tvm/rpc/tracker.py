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
    WorkerService,
    bind_listener,
    peer_host,
    run_in_thread,
    stderr_logger,
    stop_worker,
)
from .base import MAX_TRACKER_MSG_BYTES, RPC_TRACKER_MAGIC, TrackerCode

__all__ = ["PriorityScheduler", "Tracker"]

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
        self._schedule()

    def remove(self, value: _Resource) -> None:
        """Withdraws a resource that has not been handed out."""
        if value in self._values:
            self._values.remove(value)

    def cancel(self, conn: _Connection) -> None:
        """Drops the requests of a closed connection."""
        kept = [item for item in self._requests if item[2].conn is not conn]
        if len(kept) != len(self._requests):
            heapq.heapify(kept)
            self._requests = kept

    def summary(self) -> dict[str, int]:
        """``{"free": resources on offer, "pending": requests waiting}``."""
        return {"free": len(self._values), "pending": len(self._requests)}

    def _schedule(self) -> None:
        while self._values and self._requests:
            _, _, request = heapq.heappop(self._requests)
            value = self._values[0]
            if request.conn.reply([TrackerCode.SUCCESS, [value.addr, value.port, value.matchkey]]):
                self._values.pop(0)
                value.conn.handed_out(value)


@dataclass(eq=False)
class _Connection:
    """The tracker's side of one TCP connection."""

    writer: asyncio.StreamWriter
    name: str
    host: str
    info: dict[str, Any] = field(default_factory=dict)
    pending_matchkeys: set[str] = field(default_factory=set)
    offered: list[tuple[PriorityScheduler, _Resource]] = field(default_factory=list)
    closed: bool = False

    def reply(self, data: Any) -> bool:
        """Queues a JSON reply; False if the connection is closed."""
        if self.closed or self.writer.is_closing():
            return False
        payload = json.dumps(data).encode("utf-8")
        self.writer.write(_INT32.pack(len(payload)) + payload)
        return True

    def handed_out(self, value: _Resource) -> None:
        """Forgets a resource that a request took."""
        self.pending_matchkeys.discard(value.matchkey)
        self.offered = [item for item in self.offered if item[1] is not value]


class _ProtocolError(Exception):
    """A peer broke the tracker protocol; its connection is closed."""


class _TrackerServer:
    """The tracker's state and its asyncio connection handlers."""

    def __init__(self, sock: socket.socket, stop_key: str) -> None:
        self._sock = sock
        self._stop_key = stop_key
        self._schedulers: dict[str, PriorityScheduler] = {}
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping: asyncio.Event | None = None

    async def main(self) -> None:
        """Serves until a STOP request with the right key arrives."""
        self._stopping = asyncio.Event()
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
            scheduler = self._schedulers[key] = PriorityScheduler(key)
        return scheduler

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        host = peer_host(writer)
        conn = _Connection(writer=writer, name=str(writer.get_extra_info("peername")), host=host)
        self._connections.add(conn)
        try:
            await self._converse(reader, conn)
        except _ProtocolError as err:
            logger.warning("%s: %s; closing the connection", conn.name, err)
        except (ConnectionError, asyncio.IncompleteReadError) as err:
            logger.warning("%s: connection lost: %s", conn.name, err)
        except asyncio.CancelledError:
            pass
        finally:
            self._drop(conn)
            self._tasks.discard(task)
            writer.close()

    async def _converse(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        magic = await _read_exactly(reader, 4, "the handshake")
        if magic is None:
            return
        if _INT32.unpack(magic)[0] != RPC_TRACKER_MAGIC:
            raise _ProtocolError(f"invalid magic {_INT32.unpack(magic)[0]:#x}")
        conn.writer.write(magic)
        while True:
            head = await _read_exactly(reader, 4, "a message size")
            if head is None:
                return
            (size,) = _INT32.unpack(head)
            if size <= 0 or size > MAX_TRACKER_MSG_BYTES:
                raise _ProtocolError(
                    f"Invalid msg_size {size} (must be 1..{MAX_TRACKER_MSG_BYTES})"
                )
            body = await _read_exactly(reader, size, f"a message of {size} bytes")
            if body is None:
                raise _ProtocolError(f"connection closed before a message of {size} bytes")
            try:
                message = json.loads(body.decode("utf-8"))
            except ValueError as err:
                raise _ProtocolError(f"message is not UTF-8 JSON: {err}") from None
            try:
                self._handle(conn, message)
            except _ProtocolError:
                raise
            except (LookupError, TypeError, ValueError, AttributeError) as err:
                raise _ProtocolError(f"malformed request {message!r}: {err!r}") from None
            if self._stopping is not None and self._stopping.is_set():
                return
            await conn.writer.drain()

    def _handle(self, conn: _Connection, message: Any) -> None:
        if not isinstance(message, list) or not message or type(message[0]) is not int:
            raise _ProtocolError(f"a request must be a list starting with a code: {message!r}")
        code = message[0]
        if code == TrackerCode.PING:
            conn.reply(TrackerCode.SUCCESS)
        elif code == TrackerCode.PUT:
            self._put(conn, message)
        elif code == TrackerCode.REQUEST:
            key, user, priority = _text(message[1]), message[2], message[3]
            if type(priority) not in (int, float):
                raise TypeError(f"priority must be a number, got {priority!r}")
            self._scheduler(key).request(_Request(conn, str(user), priority))
        elif code == TrackerCode.UPDATE_INFO:
            info = message[1]
            if not isinstance(info, dict):
                raise TypeError(f"UPDATE_INFO takes a dict, got {info!r}")
            addr = info.get("addr")
            if isinstance(addr, list) and addr and addr[0] is None:
                addr[0] = conn.host
            conn.info.update(info)
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

    def _put(self, conn: _Connection, message: list[Any]) -> None:
        key = _text(message[1])
        port, matchkey = message[2]
        if type(port) is not int:
            raise TypeError(f"port must be an int, got {port!r}")
        custom_addr = message[3] if len(message) >= 4 else None
        addr = conn.host if custom_addr is None else _text(custom_addr)
        value = _Resource(conn, addr, port, _text(matchkey))
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
) -> tuple[int, str]:
    """Runs in the popen worker: binds, starts the tracker thread, returns (port, stop key)."""
    stderr_logger("RPCTracker", silent)
    sock, bound = bind_listener(host, port, port_end, reuse_addr, timeout)
    stop_key = base.random_key("tracker")
    server = _TrackerServer(sock, stop_key)
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
    ) -> None:
        self.proc: PopenWorker | None = None
        self.host = host
        proc = PopenWorker()
        proc.send(_start_tracker, [host, port, port_end, silent, reuse_addr, timeout])
        try:
            self.port, self.stop_key = proc.recv()
        except BaseException:
            proc.kill()
            raise
        self.proc = proc

    def _stop_tracker(self) -> None:
        addr = (_local_address(self.host), self.port)
        with socket.create_connection(addr, timeout=10) as sock:
            sock.sendall(_INT32.pack(RPC_TRACKER_MAGIC))
            magic = _INT32.unpack(base.recvall(sock, 4))[0]
            if magic != RPC_TRACKER_MAGIC:
                raise RuntimeError(f"{addr} is not an RPC tracker")
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
