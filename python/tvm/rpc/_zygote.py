"""The session zygote of an RPC server: one pre-started, single-threaded process that has
imported ``tvm`` and run the server's set-up (``server_init_callback``, ``init_modules``,
``load_library``), and that forks a child for each authenticated connection the server hands
it. The child serves that one session and exits when it ends, so a session starts in a few
milliseconds and a crashing kernel still ends only its own session.

The server side is :class:`SessionZygote`; the zygote runs :func:`zygote_main`. They talk over
an ``AF_UNIX`` ``SOCK_SEQPACKET`` socket pair, one pickle per message:

* server → zygote: the set-up (:class:`ZygoteSetup`) first, then ``("serve", id, client_key)``
  with the connection's descriptor attached (``SCM_RIGHTS``);
* zygote → server: ``("ready", pid)`` or ``("failed", exception pickle, traceback)`` once, then
  ``("ended", id, status)`` for each session it reaped (``status``: the exit code, or minus the
  signal that killed it).

Sessions die with their zygote (``PR_SET_PDEATHSIG`` on Linux); the zygote exits when the
server closes its end. If the zygote dies, the server counts its sessions as ended, logs one
line and starts a new one.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import logging
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import base

_logger = logging.getLogger("RPCServer")

#: The largest message either side reads (a set-up failure's traceback is cut to fit).
_MAX_MESSAGE = 1 << 16

# Run by `python -c`: makes this very `tvm` importable, then runs the zygote program
# (`tvm.exec.rpc_session`) on the inherited descriptor.
_BOOTSTRAP = (
    "import sys\n"
    "if sys.argv[1] not in sys.path:\n"
    "    sys.path.insert(0, sys.argv[1])\n"
    "from tvm.exec.rpc_session import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def _package_root() -> str:
    """The directory holding the ``tvm`` package this module belongs to."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class ZygoteSetup:
    """What the zygote runs once before serving: ``server_init_callback`` (a module-level
    callable, pickled by reference), the ``init_modules`` to import and the ``libraries``
    (``:``-separated) to load into the global symbol space. ``auth_key`` is put in the
    sessions' environment (``TVM_RPC_KEY``) for the sessions they open in turn."""

    server_init_callback: Callable[[], object] | None = None
    init_modules: Sequence[str] = ()
    libraries: str = ""
    auth_key: str | None = None
    sys_path: list[str] = field(default_factory=lambda: list(sys.path))

    def message(self) -> bytes:
        """The set-up as the zygote's first message. The callback is pickled on its own, so
        that the zygote adopts ``sys_path`` before importing the callback's module."""
        callback = None
        if self.server_init_callback is not None:
            callback = pickle.dumps(self.server_init_callback)
        return pickle.dumps(
            {
                "sys_path": list(self.sys_path),
                "callback": callback,
                "init_modules": list(self.init_modules),
                "libraries": self.libraries,
            }
        )


class ZygoteError(RuntimeError):
    """The session zygote could not be started, or is not running."""


class SessionZygote:
    """The server's handle on its zygote: starts it (:meth:`start`), hands it authenticated
    connections (:meth:`submit`), and calls ``on_end(id, status)`` from a thread of its own
    when a session ends (``status`` None: it ended with a zygote that died). A zygote that
    dies is restarted."""

    def __init__(self, setup: ZygoteSetup, on_end: Callable[[int, int | None], object]) -> None:
        self.setup = setup
        self.on_end = on_end
        self._lock = threading.Lock()
        self._channel: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._live: set[int] = set()
        self._ids = itertools.count(1)
        self._stopping = False
        self._watcher: threading.Thread | None = None
        # Set while a zygote takes sessions.
        self._up = threading.Event()

    @property
    def running(self) -> bool:
        """Whether a zygote is up to take sessions (not while it is being restarted)."""
        return self._channel is not None

    def wait_running(self, timeout: float) -> bool:
        """Whether a zygote takes sessions, waiting up to ``timeout`` s for one that is being
        restarted."""
        return self._up.wait(timeout)

    def start(self) -> None:
        """Starts the zygote and waits until its set-up is done. Raises what the set-up raised
        (the callback's exception, a library that does not load), or :class:`ZygoteError`."""
        channel, proc = self._spawn()
        with self._lock:
            self._channel, self._proc = channel, proc
            self._up.set()
        self._watcher = threading.Thread(
            target=self._watch, args=(channel, proc), name="rpc-session-zygote", daemon=True
        )
        self._watcher.start()

    def submit(self, conn: socket.socket, client_key: str) -> int:
        """Hands an authenticated connection (closed here) to a new session process; returns
        the session's id. ``ZygoteError`` while no zygote runs; ``OSError`` if it is lost."""
        try:
            with self._lock:
                if self._channel is None:
                    raise ZygoteError("no session zygote is running (it is being restarted)")
                ident = next(self._ids)
                message = pickle.dumps(("serve", ident, client_key))
                socket.send_fds(self._channel, [message], [conn.fileno()])
                self._live.add(ident)
                return ident
        finally:
            conn.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stops the zygote (its sessions end with it). Idempotent."""
        with self._lock:
            self._stopping = True
            channel, proc = self._channel, self._proc
            self._channel = self._proc = None
            self._up.clear()
        if channel is not None:
            with contextlib.suppress(OSError):
                channel.shutdown(socket.SHUT_RDWR)
            channel.close()
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout)

    # -- internals -----------------------------------------------------------------------

    def _spawn(self) -> tuple[socket.socket, subprocess.Popen[bytes]]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        if self.setup.auth_key is not None:
            env[base.AUTH_KEY_ENV] = self.setup.auth_key
        try:
            command = [sys.executable, "-c", _BOOTSTRAP, _package_root(), str(theirs.fileno())]
            proc = subprocess.Popen(
                command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        try:
            ours.sendall(self.setup.message())
            reply = _receive(ours)
            if reply is None:
                raise ZygoteError(
                    f"the session zygote exited during its set-up ({describe(proc.wait(5))})"
                )
            if reply[0] == "failed":
                raise _reraised(reply[1], reply[2])
            if reply[0] != "ready":
                raise ZygoteError(f"the session zygote answered {reply!r} to its set-up")
        except BaseException:
            ours.close()
            proc.kill()
            proc.wait()
            raise
        return ours, proc

    def _watch(self, channel: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """Reports session ends until the zygote goes; restarts it unless stopping."""
        while True:
            while (message := _receive(channel)) is not None:
                if message[0] == "ended":
                    ident, status = int(message[1]), message[2]
                    with self._lock:
                        self._live.discard(ident)
                    self.on_end(ident, status)
            try:
                status = describe(proc.wait(5))
            except subprocess.TimeoutExpired:  # closed its end but lingers: end it
                proc.kill()
                status = describe(proc.wait())
            with self._lock:
                orphans, self._live = self._live, set()
                if self._channel is channel:
                    self._channel = self._proc = None
                    self._up.clear()
                stopping = self._stopping
            channel.close()
            for ident in sorted(orphans):
                self.on_end(ident, None)
            if stopping:
                return
            _logger.warning(
                "the session zygote (pid %d) ended (%s) with %d session(s); starting a new one",
                proc.pid,
                status,
                len(orphans),
            )
            restarted = self._restart()
            if restarted is None:
                return
            channel, proc = restarted

    def _restart(self) -> tuple[socket.socket, subprocess.Popen[bytes]] | None:
        """A new zygote, retried with growing delays while it fails; None once stopping."""
        delay = 0.1
        while True:
            try:
                channel, proc = self._spawn()
            except Exception as err:
                if self._stopping:
                    return None
                _logger.warning(
                    "cannot start the session zygote (%s); retrying in %g s", err, delay
                )
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            with self._lock:
                if not self._stopping:
                    self._channel, self._proc = channel, proc
                    self._up.set()
                    return channel, proc
            channel.close()
            proc.kill()
            proc.wait()
            return None


def _receive(channel: socket.socket) -> Any:
    """The next message, or None once the other side is gone."""
    try:
        data = channel.recv(_MAX_MESSAGE)
    except OSError:
        return None
    return pickle.loads(data) if data else None


def describe(status: int) -> str:
    """A process's exit status (``Popen.returncode`` or ours) in words."""
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-status).name}"
        return f"killed by signal {-status}"
    return f"exit code {status}"


def _reraised(pickled: bytes | None, text: str) -> BaseException:
    """The exception the zygote's set-up raised, or a ``ZygoteError`` with its traceback."""
    if pickled is not None:
        with contextlib.suppress(Exception):
            err = pickle.loads(pickled)
            if isinstance(err, BaseException):
                return err
    return ZygoteError(f"the session zygote's set-up failed:\n{text}")


# -- the zygote process ------------------------------------------------------------------------


def zygote_main(fd: int) -> int:
    """The zygote: reads its set-up from the channel ``fd``, runs it, answers ``ready`` (or
    ``failed``), then forks a session child for each connection it is handed, until the server
    closes the channel."""
    # Ctrl-C in a terminal reaches the whole process group: the server decides when to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = socket.socket(fileno=fd)
    message = _receive(channel)
    if message is None:
        return 0
    try:
        sys.path[:] = message["sys_path"]
        if message["callback"] is not None:
            pickle.loads(message["callback"])()
        from .server import prepare_session_process

        loaded = prepare_session_process(message["libraries"], message["init_modules"])
    except BaseException as err:
        text = traceback.format_exc()[-(_MAX_MESSAGE // 2) :]
        try:
            pickled: bytes | None = pickle.dumps(err)
        except Exception:
            pickled = None
        if pickled is not None and len(pickled) > _MAX_MESSAGE // 4:
            pickled = None
        with contextlib.suppress(OSError):
            channel.sendall(pickle.dumps(("failed", pickled, text)))
        return 1
    channel.sendall(pickle.dumps(("ready", os.getpid())))
    # What the set-up made is shared with every child: keep the collector from touching it
    # (and so copying its pages) in each of them.
    gc.freeze()
    try:
        return _fork_sessions(channel)
    finally:
        del loaded


def _fork_sessions(channel: socket.socket) -> int:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    # A child's end wakes the loop below through the wakeup descriptor.
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    prctl = _prctl()
    _name_process(prctl, ZYGOTE_NAME)
    die_with_parent = _parent_death_signal(prctl)
    children: dict[int, int] = {}
    while True:
        readable, _, _ = select.select([channel.fileno(), wake_read], [], [])
        if wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_read, 512):
                    pass
            if not _reap(children, channel):
                return 0
        if channel.fileno() not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(channel, _MAX_MESSAGE, 1)
        except OSError:
            return 0
        if not data:
            for fd in fds:
                os.close(fd)
            return 0
        kind, ident, client_key = pickle.loads(data)
        if kind != "serve" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        conn = fds[0]
        try:
            pid = os.fork()
        except OSError as err:
            os.close(conn)
            print(f"RPC session zygote: cannot fork a session: {err}", file=sys.stderr)
            with contextlib.suppress(OSError):
                channel.sendall(pickle.dumps(("ended", ident, 1)))
            continue
        if pid == 0:
            _session_child(
                conn, client_key, [channel.fileno(), wake_read, wake_write], die_with_parent
            )
        os.close(conn)
        children[pid] = ident


def _reap(children: dict[int, int], channel: socket.socket) -> bool:
    """Reaps the children that ended and reports them; False once the server is gone."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return True
        ident = children.pop(pid, None)
        if ident is None:
            continue
        try:
            channel.sendall(pickle.dumps(("ended", ident, os.waitstatus_to_exitcode(status))))
        except OSError:
            return False
    return True


#: The process names (``/proc/<pid>/comm``, what ``top`` and ``ps -o comm`` show) of the zygote
#: and of its session children, on Linux.
ZYGOTE_NAME = "tvm-rpc-zygote"
SESSION_NAME = "tvm-rpc-session"


def _prctl() -> Callable[..., int] | None:
    """``prctl`` of the C library (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def _name_process(prctl: Callable[..., int] | None, name: str) -> None:
    if prctl is not None:
        pr_set_name = 15
        prctl(pr_set_name, name.encode(), 0, 0, 0)


def _parent_death_signal(prctl: Callable[..., int] | None) -> Callable[[], None]:
    """A function a child calls first: it is named :data:`SESSION_NAME` and killed when the
    zygote dies (Linux; elsewhere it does nothing). Resolved in the zygote, so that children
    start without a look-up."""
    if prctl is None:
        return lambda: None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the zygote died before the call
            os._exit(1)
        _name_process(prctl, SESSION_NAME)

    return die_with_parent


def _session_child(
    conn: int, client_key: str, inherited: list[int], die_with_parent: Callable[[], None]
) -> None:
    """The forked child: serves the session on ``conn``, then exits (never returns)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        die_with_parent()
        from .server import serve_prepared_session

        code = serve_prepared_session("rpc.ServeAuthenticatedSocket", conn, client_key)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
