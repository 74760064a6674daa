"""RPC servers: a listening socket in a worker process, each client session in a process of
its own (a crashing kernel ends only its session).

The server runs code its clients send: bind it to the loopback address (the default) or a
trusted network only.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..support.popen_pool import PopenWorker
from . import base
from ._listen import WorkerService, stop_worker
from ._registration import TrackerRegistration

__all__ = [
    "Server",
    "TrackerRegistration",
    "bind_socket",
    "register_download_linked_module",
    "serve_forever",
]

_logger = logging.getLogger("RPCServer")


def bind_socket(host: str, port: int, port_end: int, reuse_addr: bool = True) -> socket.socket:
    """A listening socket on the first free port of ``[port, port_end)`` (``port=0``: any
    free port). Only ports in use are skipped; no free port is a ``ValueError``."""
    family = socket.getaddrinfo(host, None)[0][0]
    candidates = [0] if port == 0 else range(port, max(port_end, port + 1))
    for candidate in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        if reuse_addr:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as err:
            sock.close()
            if err.errno == errno.EADDRINUSE:
                continue
            raise
        sock.listen(64)
        return sock
    raise ValueError(f"cannot bind to any port in [{port}, {port_end})")


def serve_session_process(serve_name: str, *serve_args: object, libraries: str = "") -> int:
    """The body of a process that serves one session (``tvm.exec.rpc_session``,
    ``tvm.exec.rpc_pipe_server``): registers ``rpc.test.*``, imports the modules the server asks
    for (``TVM_RPC_INIT_MODULES``, comma-separated), loads ``libraries`` (``:``-separated) into the
    global symbol space, then runs native ``serve_name(*serve_args)`` in a fresh work directory,
    removed afterwards. Returns the exit status: 1 when the session ended with an RPC error."""
    import ctypes
    import importlib
    import shutil
    import tempfile

    from ..error import RPCError
    from ..ffi import get_global_func
    from . import testing  # noqa: F401  (registers rpc.test.* for clients)

    register_download_linked_module()
    for name in filter(None, os.environ.get("TVM_RPC_INIT_MODULES", "").split(",")):
        importlib.import_module(name)
    loaded = [ctypes.CDLL(p, ctypes.RTLD_GLOBAL) for p in filter(None, libraries.split(":"))]
    set_work_dir = get_global_func("rpc.SetWorkDirectory")
    serve = get_global_func(serve_name)
    assert set_work_dir is not None and serve is not None
    work = tempfile.mkdtemp(prefix="tvm-rpc-")
    try:
        set_work_dir(work)
        # The loop waits on its channel: other threads of this interpreter keep running.
        serve.release_gil = True
        serve(*serve_args)
    except RPCError:
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        del loaded
    return 0


def register_download_linked_module() -> None:
    """Registers ``tvm.rpc.server.download_linked_module(name)``: the bytes of a shared library
    linked on the server from an uploaded object file (``.o``) or a tar of them (``.tar``); a
    ``.so``/``.dylib``/``.dll`` comes back as it is. Clients use it to get a library built by the
    remote's own toolchain."""
    import glob
    import tempfile

    from ..ffi import get_global_func, register_func
    from ..support import cc, tar

    workpath = get_global_func("tvm.rpc.server.workpath")
    assert workpath is not None

    def download_linked_module(name: str) -> bytearray:
        path = str(workpath(name))
        if path.endswith((".so", ".dylib", ".dll")):
            with open(path, "rb") as library:
                return bytearray(library.read())
        with tempfile.TemporaryDirectory(prefix="tvm-link-") as scratch:
            if path.endswith(".o"):
                objects = [path]
            elif path.endswith(".tar"):
                tar.untar(path, scratch)
                objects = sorted(glob.glob(os.path.join(scratch, "*.o")))
                if not objects:
                    raise ValueError(f"{name!r} holds no object files (.o) to link")
            else:
                raise ValueError(
                    f"cannot link {name!r}: download_linked_module takes .o, .tar or a library"
                )
            linked = os.path.join(scratch, "linked.so")
            cc.create_shared(linked, objects)
            with open(linked, "rb") as library:
                return bytearray(library.read())

    register_func("tvm.rpc.server.download_linked_module", download_linked_module, override=True)


def _spawn_session(
    conn: socket.socket,
    client_key: str,
    load_library: str | None,
    auth_key: str | None,
    init_modules: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Serves one authenticated connection in a fresh interpreter, reaped by a thread when
    done; the handshake is complete (``client_key`` is what the client said). The shared
    secret travels in the environment (``TVM_RPC_KEY``, for chained sessions), never on a
    command line."""
    fd = conn.fileno()
    command = [sys.executable, "-m", "tvm.exec.rpc_session", str(fd), client_key]
    if load_library:
        command.append(load_library)
    env = dict(os.environ)
    if auth_key is not None:
        env[base.AUTH_KEY_ENV] = auth_key
    if init_modules:
        env["TVM_RPC_INIT_MODULES"] = ",".join(init_modules)
    try:
        child = subprocess.Popen(command, pass_fds=[fd], stdin=subprocess.DEVNULL, env=env)
    finally:
        conn.close()
    threading.Thread(target=child.wait, daemon=True).start()
    return child


class _Gate:
    """The server's limits: handshakes in progress and live session processes. A connection
    gets a session process only once its client authenticated, and only while fewer than
    ``max_sessions`` run; beyond ``max_pending`` handshakes, new connections are refused at
    once. Each refusal is one log line naming the peer."""

    def __init__(
        self,
        key: str,
        auth_key: str | None,
        handshake_timeout: float,
        max_pending: int,
        max_sessions: int,
        spawn: Callable[[socket.socket, str], subprocess.Popen[bytes]],
        tracker: TrackerRegistration | None,
    ) -> None:
        from ..ffi import get_global_func

        handshake = get_global_func("rpc.ServerHandshake")
        assert handshake is not None
        # The handshake waits on the network: other threads (the accept loop) keep running.
        handshake.release_gil = True
        self._handshake = handshake
        self.key = key
        self.auth_key = auth_key
        self.handshake_timeout = handshake_timeout
        self.max_pending = max_pending
        self.max_sessions = max_sessions
        self._spawn = spawn
        self.tracker = tracker
        self._lock = threading.Lock()
        self.pending = 0
        self.sessions: list[subprocess.Popen[bytes]] = _LISTENING.setdefault("sessions", [])

    def live_sessions(self) -> int:
        """Session processes still running (the list is pruned)."""
        self.sessions[:] = [c for c in self.sessions if c.poll() is None]
        return len(self.sessions)

    def accept(self, conn: socket.socket, peer: object) -> None:
        """Takes an accepted connection: starts its handshake on a thread of its own, or
        refuses it when too many handshakes are in progress."""
        with self._lock:
            if self.pending >= self.max_pending:
                full = True
            else:
                full = False
                self.pending += 1
        if full:
            _refuse(conn, peer, f"{self.max_pending} handshakes are already in progress")
            return
        matchkey = self.key if self.tracker is None else self.tracker.matchkey
        try:
            threading.Thread(
                target=self._authenticate, args=(conn, peer, matchkey), daemon=True
            ).start()
        except RuntimeError as err:  # no thread to be had
            with self._lock:
                self.pending -= 1
            _refuse(conn, peer, f"cannot start a handshake thread ({err})")

    def _authenticate(self, conn: socket.socket, peer: object, matchkey: str) -> None:
        try:
            try:
                verified = self._handshake(
                    conn.fileno(), matchkey, self.auth_key, self.handshake_timeout
                )
            except (RuntimeError, OSError, ValueError) as err:  # bad arguments, no descriptor
                _refuse(conn, peer, f"handshake failed: {err}", answered=True)
                return
            if isinstance(verified, str):  # refused (and answered), for this reason
                _refuse(conn, peer, verified, answered=True)
                return
            client_key, accept_reply = str(verified[0]), bytes(verified[1])
            with self._lock:
                if self.live_sessions() >= self.max_sessions:
                    busy = True
                else:
                    busy = False
                    try:
                        conn.settimeout(self.handshake_timeout)
                        conn.sendall(accept_reply)
                        conn.settimeout(None)
                        self.sessions.append(
                            self._spawn(conn, client_key)  # closes conn
                        )
                    except OSError as err:
                        _refuse(conn, peer, f"lost before its session started: {err}")
                        return
            if busy:
                _refuse(
                    conn,
                    peer,
                    f"{self.max_sessions} sessions are already running",
                    code=base.RPC_CODE_BUSY,
                )
                return
            if self.tracker is not None:
                self.tracker.consume()
        finally:
            with self._lock:
                self.pending -= 1


def _refuse(
    conn: socket.socket,
    peer: object,
    why: str,
    code: int | None = base.RPC_CODE_BUSY,
    answered: bool = False,
) -> None:
    """Closes a connection the server will not serve, with one log line; answers ``code``
    first unless the handshake already ``answered``."""
    _logger.warning("refused %s: %s", peer, why)
    with contextlib.suppress(OSError):
        if not answered and code is not None:
            conn.setblocking(False)
            # Take what the client sent, so that closing does not reset the connection
            # before the code arrives.
            with contextlib.suppress(BlockingIOError):
                conn.recv(65536)
            conn.settimeout(1.0)
            conn.sendall(struct.pack("<i", code))
            conn.shutdown(socket.SHUT_WR)
    conn.close()


def serve_forever(
    sock: socket.socket,
    key: str = "",
    load_library: str | None = None,
    auth_key: str | None = None,
    tracker: TrackerRegistration | None = None,
    init_modules: Sequence[str] = (),
    handshake_timeout: float = 10.0,
    max_pending_handshakes: int = 64,
    max_sessions: int = 16,
) -> None:
    """Accepts connections on ``sock`` and serves each in a session process of its own, once
    its client completed the handshake (key and, with ``auth_key``, the mutual proof of the
    secret) within ``handshake_timeout`` seconds in total. At most ``max_pending_handshakes``
    handshakes run at once and at most ``max_sessions`` sessions; the client beyond either
    gets ``RPC_CODE_BUSY``. ``auth_key`` is the secret (None: no authentication; see
    :func:`tvm.rpc.base.resolve_auth_key`). With a ``tracker``, clients present the match key
    it handed them, and the server keeps its registration fresh while idle. Running out of
    file descriptors is logged once and waited out."""
    if auth_key is not None:
        base.check_auth_key(auth_key)

    def spawn(conn: socket.socket, client_key: str) -> subprocess.Popen[bytes]:
        return _spawn_session(conn, client_key, load_library, auth_key, init_modules)

    gate = _Gate(
        key,
        auth_key,
        handshake_timeout,
        max_pending_handshakes,
        max_sessions,
        spawn,
        tracker,
    )
    out_of_descriptors = False
    while True:
        try:
            if tracker is not None:
                ready, _, _ = select.select([sock], [], [], tracker.ping_period)
                if not ready:
                    tracker.tick()
                    continue
            conn, peer = sock.accept()
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                if not out_of_descriptors:
                    _logger.warning(
                        "cannot accept connections: %s; waiting for connections to end", err
                    )
                out_of_descriptors = True
                time.sleep(0.1)
                continue
            return  # the socket was shut down or closed: stop serving
        except ValueError:
            return
        if out_of_descriptors:
            _logger.info("accepting connections again")
            out_of_descriptors = False
        gate.accept(conn, peer)


def _start_in_worker(
    host: str,
    port: int,
    port_end: int,
    key: str,
    load_library: str | None,
    reuse_addr: bool,
    server_init_callback: Callable[[], object] | None,
    auth_key: str | None,
    tracker_addr: tuple[str, int] | None,
    custom_addr: str | None,
    init_modules: Sequence[str],
    matchkey_timeout: float,
    limits: dict[str, float],
) -> int:
    """Runs in the server's worker process: binds, registers with the tracker if any, starts
    accepting, returns the port."""
    if server_init_callback is not None:
        server_init_callback()
    sock = bind_socket(host, port, port_end, reuse_addr)
    bound = int(sock.getsockname()[1])
    _LISTENING["socket"] = sock
    tracker = None
    if tracker_addr is not None:
        addr = (str(tracker_addr[0]), int(tracker_addr[1]))
        tracker = TrackerRegistration(
            addr, key, bound, custom_addr, matchkey_timeout, auth_key=auth_key
        )
    thread = threading.Thread(
        target=serve_forever,
        args=(sock, key, load_library, auth_key, tracker, init_modules),
        kwargs={
            "handshake_timeout": float(limits["handshake_timeout"]),
            "max_pending_handshakes": int(limits["max_pending_handshakes"]),
            "max_sessions": int(limits["max_sessions"]),
        },
        daemon=True,
    )
    thread.start()
    _LISTENING["thread"] = thread
    return bound


#: The listening socket and accepting thread of this worker process.
_LISTENING: dict[str, Any] = {}


def _stop_in_worker(timeout: float) -> bool:
    """Runs in the server's worker process: stops accepting (sessions being served go on until
    the worker ends) and waits for the accepting thread; whether it ended in ``timeout`` s."""
    sock, thread = _LISTENING.get("socket"), _LISTENING.get("thread")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    if thread is not None:
        thread.join(timeout)
    # Sessions whose clients have left are finishing: let them end on their own (a killed
    # session process skips its cleanup) for a moment before the worker's group is ended.
    deadline = time.monotonic() + min(timeout, 0.5)
    for child in _LISTENING.get("sessions", []):
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(max(0.0, deadline - time.monotonic()))
    return thread is None or not thread.is_alive()


class Server(WorkerService):
    """An RPC server in a worker process. Returns once the socket is bound; ``port`` is the
    real port (pass ``port=0`` for any free one). With ``auth_key`` (default: the
    ``TVM_RPC_KEY`` environment variable) only clients that prove they hold the same secret are
    served; Apache TVM's clients cannot, and are refused. With ``tracker_addr`` the server
    registers with that tracker under ``key``, and clients reach it through
    ``connect_tracker(...).request(key)``; ``custom_addr`` is the address the tracker hands out
    (default: the one the tracker sees). ``init_modules`` names Python modules that every session
    process imports before serving: they register the functions the server offers (with
    :func:`tvm.ffi.register_func` or :func:`tvm.rpc.aio.register_async_func`).
    ``matchkey_timeout`` is how long a key the tracker handed to a client may go unused before
    the server offers a new one.

    A connection gets a session process only once its client completed the handshake within
    ``handshake_timeout`` seconds in total (a silent or slow peer is closed then, having cost a
    thread and nothing more). At most ``max_pending_handshakes`` handshakes run at once and
    at most ``max_sessions`` sessions; a client beyond either is answered ``RPC_CODE_BUSY``
    ("try again later"). Each refused peer is one warning line in the server's log.
    An empty or whitespace ``auth_key`` (or ``TVM_RPC_KEY``) is a ``ValueError``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9091,
        port_end: int = 9199,
        key: str = "",
        load_library: Sequence[str] | str | None = None,
        reuse_addr: bool = True,
        server_init_callback: Callable[[], object] | None = None,
        auth_key: str | None = None,
        tracker_addr: tuple[str, int] | None = None,
        custom_addr: str | None = None,
        init_modules: Sequence[str] = (),
        matchkey_timeout: float = 5.0,
        handshake_timeout: float = 10.0,
        max_pending_handshakes: int = 64,
        max_sessions: int = 16,
    ) -> None:
        self.proc: PopenWorker | None = None
        auth_key = base.resolve_auth_key(auth_key)
        if not (isinstance(handshake_timeout, (int, float)) and 0 < handshake_timeout < 1e9):
            raise ValueError(
                f"handshake_timeout must be a positive number of seconds, got {handshake_timeout!r}"
            )
        for name, value in (
            ("max_pending_handshakes", max_pending_handshakes),
            ("max_sessions", max_sessions),
        ):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        limits = {
            "handshake_timeout": float(handshake_timeout),
            "max_pending_handshakes": max_pending_handshakes,
            "max_sessions": max_sessions,
        }
        if isinstance(load_library, (list, tuple)):
            load_library = ":".join(os.fspath(p) for p in load_library)
        self.host = host
        proc = PopenWorker()
        self.proc = proc
        proc.send(
            _start_in_worker,
            [
                host,
                port,
                port_end,
                key,
                load_library,
                reuse_addr,
                server_init_callback,
                auth_key,
                tracker_addr,
                custom_addr,
                list(init_modules),
                matchkey_timeout,
                limits,
            ],
        )
        self.port: int = proc.recv()

    def terminate(self) -> None:
        """Stops the server and every session it is serving. Idempotent."""
        proc, self.proc = self.proc, None
        stop_worker(proc, _stop_in_worker, [5.0], "RPC server", _logger)
