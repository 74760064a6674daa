"""RPC servers: a listening socket in a worker process, each client session in a process of
its own, forked from a pre-started session zygote (:mod:`tvm.rpc._zygote`), so that a session
starts in milliseconds and a crashing kernel ends only its session.

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
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..support.popen_pool import PopenWorker
from . import base
from ._listen import WorkerService, stop_worker
from ._registration import TrackerRegistration
from ._through_proxy import ProxyServing, open_registration
from ._zygote import SessionZygote, ZygoteError, ZygoteSetup, describe

__all__ = [
    "Server",
    "TrackerRegistration",
    "bind_socket",
    "register_download_linked_module",
    "serve_forever",
    "start_zygote",
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


def prepare_session_process(libraries: str = "", init_modules: Sequence[str] = ()) -> list[Any]:
    """Makes this process ready to serve sessions: registers ``rpc.test.*`` and
    ``tvm.rpc.server.download_linked_module``, imports ``init_modules`` and loads ``libraries``
    (``:``-separated) into the global symbol space. Returns the loaded libraries (keep them)."""
    import ctypes
    import importlib

    from . import testing  # noqa: F401  (registers rpc.test.* for clients)

    register_download_linked_module()
    for name in init_modules:
        importlib.import_module(name)
    return [ctypes.CDLL(p, ctypes.RTLD_GLOBAL) for p in filter(None, libraries.split(":"))]


def serve_prepared_session(serve_name: str, *serve_args: object) -> int:
    """Runs native ``serve_name(*serve_args)`` (one session) in a fresh work directory, removed
    afterwards. Returns the exit status: 1 when the session ended with an RPC error."""
    import shutil
    import tempfile

    from ..error import RPCError
    from ..ffi import get_global_func

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
    return 0


def serve_session_process(serve_name: str, *serve_args: object, libraries: str = "") -> int:
    """The body of a process that serves one session (``tvm.exec.rpc_pipe_server``):
    :func:`prepare_session_process` with the modules of ``TVM_RPC_INIT_MODULES``
    (comma-separated) and ``libraries``, then :func:`serve_prepared_session`."""
    init_modules = [n for n in os.environ.get("TVM_RPC_INIT_MODULES", "").split(",") if n]
    loaded = prepare_session_process(libraries, init_modules)
    try:
        return serve_prepared_session(serve_name, *serve_args)
    finally:
        del loaded


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


class _Gate:
    """The server's limits and its sessions. A connection gets a session only once its client
    authenticated, and only while fewer than ``max_sessions`` run (one with a tracker: the
    tracker hands the server out only while it is free); beyond ``max_pending`` handshakes,
    new connections are refused at once. Each refusal is one log line naming the peer.
    Sessions are forked by ``zygote``, which reports their ends to :meth:`session_ended`."""

    def __init__(
        self,
        key: str,
        auth_key: str | None,
        handshake_timeout: float,
        max_pending: int,
        max_sessions: int,
        zygote: SessionZygote,
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
        self.max_sessions = 1 if tracker is not None else max_sessions
        self.zygote = zygote
        self.tracker = tracker
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.pending = 0
        self.live: set[int] = set()

    def session_ended(self, ident: int, status: int | None) -> None:
        """The zygote's report of a session's end (``status``: see :class:`SessionZygote`);
        with a tracker, the server offers itself again."""
        with self._lock:
            if ident not in self.live:
                return
            self.live.discard(ident)
            if self.tracker is not None and not self.live:
                self.tracker.end_session()
            self._idle.notify_all()
        if status is not None and status < 0:
            _logger.warning("session %d was %s", ident, describe(status))

    def wait_idle(self, timeout: float) -> bool:
        """Whether every session ended, waiting up to ``timeout`` s."""
        with self._lock:
            return self._idle.wait_for(lambda: not self.live, timeout)

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

    def _refusal(self, matchkey: str) -> tuple[str, int] | None:
        """Why an authenticated client gets no session now, and the code it is answered (None:
        it gets one). Called with the lock held."""
        if self.tracker is not None:
            if matchkey != self.tracker.matchkey:
                return "its match key is no longer offered", base.RPC_CODE_MISMATCH
            if self.live:
                return "a session is already running (one at a time with a tracker)", (
                    base.RPC_CODE_BUSY
                )
        elif len(self.live) >= self.max_sessions:
            return f"{self.max_sessions} sessions are already running", base.RPC_CODE_BUSY
        if not self.zygote.running:
            return "the session zygote is being restarted", base.RPC_CODE_BUSY
        return None

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
            # A zygote being restarted is back in a moment: the client waits rather than fails.
            self.zygote.wait_running(self.handshake_timeout)
            with self._lock:
                refusal = self._refusal(matchkey)
                if refusal is None:
                    try:
                        conn.settimeout(self.handshake_timeout)
                        conn.sendall(accept_reply)
                        conn.settimeout(None)
                        _clear_kernel_timeouts(conn)
                        self.live.add(self.zygote.submit(conn, client_key))  # closes conn
                    except (OSError, ZygoteError) as err:
                        _refuse(conn, peer, f"lost before its session started: {err}", None)
                        return
                    if self.tracker is not None:
                        self.tracker.begin_session()
            if refusal is not None:
                _refuse(conn, peer, refusal[0], code=refusal[1])
        finally:
            with self._lock:
                self.pending -= 1


def _clear_kernel_timeouts(conn: socket.socket) -> None:
    """Clears the receive and send timeouts the native handshake left on the socket
    (``SO_RCVTIMEO``, ``SO_SNDTIMEO``): the session would otherwise end once idle that long."""
    never = struct.pack("@ll", 0, 0)  # struct timeval {0, 0}
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, never)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, never)


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


#: The host memory a server keeps resident for its sessions' large allocations by default
#: (``Server(warm_memory=)``): enough for a 256 MiB tensor and its neighbours.
DEFAULT_WARM_MEMORY = 512 << 20


def start_zygote(
    server_init_callback: Callable[[], object] | None = None,
    init_modules: Sequence[str] = (),
    load_library: str | None = None,
    auth_key: str | None = None,
    warm_memory: int = DEFAULT_WARM_MEMORY,
) -> SessionZygote:
    """Starts the session zygote of a server (see :mod:`tvm.rpc._zygote`) and waits until its
    set-up (``server_init_callback``, ``init_modules``, ``load_library``) is done; raises what
    the set-up raised. Its session ends go nowhere until a server takes it. ``warm_memory``:
    see :class:`Server`."""
    setup = ZygoteSetup(
        server_init_callback, list(init_modules), load_library or "", auth_key, warm_memory
    )
    zygote = SessionZygote(setup, on_end=lambda ident, status: None)
    zygote.start()
    return zygote


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
    zygote: SessionZygote | None = None,
    server_init_callback: Callable[[], object] | None = None,
) -> None:
    """Accepts connections on ``sock`` and serves each in a session process of its own, once
    its client completed the handshake (key and, with ``auth_key``, the mutual proof of the
    secret) within ``handshake_timeout`` seconds in total. At most ``max_pending_handshakes``
    handshakes run at once and at most ``max_sessions`` sessions; the client beyond either
    gets ``RPC_CODE_BUSY``. ``auth_key`` is the secret (None: no authentication; see
    :func:`tvm.rpc.base.resolve_auth_key`). With a ``tracker``, clients present the match key
    it handed them, the server serves one session at a time, offering itself to the tracker
    again when it ends, and keeps its registration fresh while idle. Running out of file
    descriptors is logged once and waited out.

    Session processes are forked by ``zygote`` (:func:`start_zygote`); without one, a zygote
    is started here with ``server_init_callback``, ``init_modules`` and ``load_library``, and
    stopped on return."""
    if auth_key is not None:
        base.check_auth_key(auth_key)
    own_zygote = zygote is None
    if zygote is None:
        zygote = start_zygote(server_init_callback, init_modules, load_library, auth_key)
    gate = _Gate(
        key,
        auth_key,
        handshake_timeout,
        max_pending_handshakes,
        max_sessions,
        zygote,
        tracker,
    )
    zygote.on_end = gate.session_ended
    _LISTENING["gate"] = gate
    out_of_descriptors = False
    try:
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
    finally:
        if own_zygote:
            zygote.stop()


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
    is_proxy: bool = False,
) -> int:
    """Runs in the server's worker process: starts the session zygote, then binds and
    registers with the tracker if any (or registers with the proxy), starts serving, returns
    the port."""
    zygote = start_zygote(
        server_init_callback, init_modules, load_library, auth_key, int(limits["warm_memory"])
    )
    _LISTENING["zygote"] = zygote
    try:
        if is_proxy:
            return _start_through_proxy(host, port, key, auth_key, zygote, tracker_addr)
        sock = bind_socket(host, port, port_end, reuse_addr)
        bound = int(sock.getsockname()[1])
        _LISTENING["socket"] = sock
        tracker = None
        if tracker_addr is not None:
            addr = (str(tracker_addr[0]), int(tracker_addr[1]))
            tracker = TrackerRegistration(
                addr, key, bound, custom_addr, matchkey_timeout, auth_key=auth_key
            )
    except BaseException:
        zygote.stop()
        raise
    thread = threading.Thread(
        target=serve_forever,
        args=(sock, key, load_library, auth_key, tracker, init_modules),
        kwargs={
            "handshake_timeout": float(limits["handshake_timeout"]),
            "max_pending_handshakes": int(limits["max_pending_handshakes"]),
            "max_sessions": int(limits["max_sessions"]),
            "zygote": zygote,
        },
        daemon=True,
    )
    thread.start()
    _LISTENING["thread"] = thread
    return bound


def _start_through_proxy(
    host: str,
    port: int,
    key: str,
    auth_key: str | None,
    zygote: SessionZygote,
    tracker_addr: tuple[str, int] | None,
) -> int:
    """Registers with the proxy at ``host:port`` (errors raised here) and serves what it hands
    this server on a thread; returns the proxy's port."""
    if tracker_addr is not None:
        _logger.info("a server behind a proxy ignores tracker_addr: the proxy registers it")
    addr = (host, port)
    try:
        first = open_registration(addr, key, auth_key)
    except OSError as err:
        raise ConnectionError(f"cannot reach the RPC proxy at {host}:{port}: {err}") from err
    serving = ProxyServing(addr, key, auth_key, zygote)
    zygote.on_end = serving.session_ended
    thread = threading.Thread(target=serving.run, args=(first,), daemon=True)
    thread.start()
    _LISTENING.update(proxy=serving, thread=thread)
    return port


#: The listening socket (or the proxy loop), accepting thread, session gate and zygote of this
#: worker process.
_LISTENING: dict[str, Any] = {}


def _stop_in_worker(timeout: float) -> bool:
    """Runs in the server's worker process: stops accepting (or registering with the proxy),
    waits for the accepting thread, lets running sessions end on their own for a moment, then
    stops the zygote (and the sessions left); whether the thread ended in ``timeout`` s."""
    sock, thread = _LISTENING.get("socket"), _LISTENING.get("thread")
    gate, proxy = _LISTENING.get("gate"), _LISTENING.get("proxy")
    if proxy is not None:
        proxy.stop()
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    deadline = time.monotonic() + timeout
    if thread is not None and proxy is None:
        thread.join(timeout)
    # Sessions whose clients have left are finishing: let them end on their own (a killed
    # session process skips its cleanup) for a moment.
    idle = gate if gate is not None else proxy
    if idle is not None:
        idle.wait_idle(min(max(0.0, deadline - time.monotonic()), 0.5))
    zygote = _LISTENING.get("zygote")
    if zygote is not None:
        zygote.stop(max(0.1, deadline - time.monotonic()))
    if thread is not None and proxy is not None:
        thread.join(max(0.0, deadline - time.monotonic()))
    return thread is None or not thread.is_alive()


class Server(WorkerService):
    """An RPC server in a worker process. Returns once the socket is bound and the sessions'
    set-up is done; ``port`` is the real port (pass ``port=0`` for any free one).

    Sessions: a pre-started process (the session zygote) imports ``tvm``, runs
    ``server_init_callback`` (a module-level function), imports ``init_modules`` (Python
    modules that register the functions the server offers, with
    :func:`tvm.ffi.register_func` or :func:`tvm.rpc.aio.register_async_func`) and loads
    ``load_library``; it forks one process per client session, which inherits all of that, so
    a session starts in milliseconds and a crashing kernel ends only its own session. A set-up
    that raises makes the constructor raise the same; a zygote that dies is restarted.

    With ``auth_key`` (default: the ``TVM_RPC_KEY`` environment variable) only clients that
    prove they hold the same secret are served; Apache TVM's clients cannot, and are refused.
    With ``tracker_addr`` the server registers with that tracker under ``key``, and clients
    reach it through ``connect_tracker(...).request(key)``; it serves one session at a time
    then, and the tracker counts it as free only while no session runs. ``custom_addr`` is the
    address the tracker hands out (default: the one the tracker sees). ``matchkey_timeout`` is
    how long a key the tracker handed to a client may go unused before the server offers a new
    one.

    With ``is_proxy``, ``host:port`` is the address of an RPC proxy
    (:class:`tvm.rpc.Proxy`): the server connects out to it, registers under ``key`` (proving
    ``auth_key`` to it, if set) and serves the sessions it pairs with this server, one at a
    time; ``tracker_addr`` is ignored then (the proxy registers its servers with its tracker).

    A connection gets a session process only once its client completed the handshake within
    ``handshake_timeout`` seconds in total (a silent or slow peer is closed then, having cost a
    thread and nothing more). At most ``max_pending_handshakes`` handshakes run at once and
    at most ``max_sessions`` sessions; a client beyond either is answered ``RPC_CODE_BUSY``
    ("try again later"). Each refused peer is one warning line in the server's log.
    An empty or whitespace ``auth_key`` (or ``TVM_RPC_KEY``) is a ``ValueError``.

    ``warm_memory`` bytes of host memory stay resident from one session to the next, for the
    sessions' host allocations of 2 MiB and more: a session's first large upload then runs as
    fast as its later ones, instead of faulting fresh pages in as the bytes arrive. It is
    zeroed when a session ends (replaced when the session died), so no session sees another's
    data. One session at a time uses it; 0 turns it off."""

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
        is_proxy: bool = False,
        warm_memory: int = DEFAULT_WARM_MEMORY,
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
        if type(warm_memory) is not int or not 0 <= warm_memory < 1 << 48:
            raise ValueError(f"warm_memory must be a byte count (an int >= 0), got {warm_memory!r}")
        if is_proxy and not (type(port) is int and 0 < port < 65536):
            raise ValueError(f"with is_proxy, port is the proxy's port (1..65535), got {port!r}")
        if isinstance(init_modules, str):
            raise TypeError(
                f"init_modules must be a sequence of module names, got {init_modules!r}"
            )
        limits = {
            "handshake_timeout": float(handshake_timeout),
            "max_pending_handshakes": max_pending_handshakes,
            "max_sessions": max_sessions,
            "warm_memory": warm_memory,
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
                bool(is_proxy),
            ],
        )
        try:
            self.port: int = proc.recv()
        except BaseException:  # a set-up that failed, a port range in use: nothing to keep
            self.proc = None
            proc.kill()
            raise

    def terminate(self) -> None:
        """Stops the server and every session it is serving. Idempotent."""
        proc, self.proc = self.proc, None
        stop_worker(proc, _stop_in_worker, [5.0], "RPC server", _logger)
