"""The session zygote of an RPC server: one pre-started, single-threaded process that has
imported ``tvm`` and run the server's set-up (``server_init_callback``, ``init_modules``,
``load_library``), and that serves each authenticated connection the server hands it in a child
process of its own (forked ahead of time: :mod:`tvm.rpc._zygote_process`). The child serves
that one session and exits when it ends, so a session starts in a few milliseconds and a
crashing kernel still ends only its own session.

The server side is :class:`SessionZygote`; the zygote runs
:func:`tvm.rpc._zygote_process.zygote_main`. They talk over an ``AF_UNIX`` ``SOCK_SEQPACKET``
socket pair, one pickle per message:

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
import itertools
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
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
    sessions' environment (``TVM_RPC_KEY``) for the sessions they open in turn.
    ``warm_memory``: the bytes of host memory kept resident for the sessions' large
    allocations from one session to the next (0: none)."""

    server_init_callback: Callable[[], object] | None = None
    init_modules: Sequence[str] = ()
    libraries: str = ""
    auth_key: str | None = None
    warm_memory: int = 0
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
                "warm_memory": self.warm_memory,
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
