"""The session zygote's own process (the server's side is :mod:`tvm.rpc._zygote`).

The zygote keeps one *spare* session process forked ahead of time, so that an authenticated
connection is served without a fork on its path: the zygote passes the connection to the spare
and forks the next spare afterwards. The zygote also holds the server's warm memory
(:mod:`tvm_rpc`'s ``session::warm_memory``): slabs of shared memory that stay resident between
sessions and that every session process inherits. While the spare waits, it maps into its page
tables the part of a slab that earlier sessions used, so that the first large upload of its
session writes into memory that takes no page faults; the session claims the slab at its first
large allocation, if it is free by then. A session zeroes what it used when it ends, which frees
the slab; the zygote drops the pages of a slab whose session died before that.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ._zygote import _MAX_MESSAGE, _receive

#: Bytes of its slab a spare maps per step while it waits: a connection that arrives meanwhile
#: waits for one step at most.
PREFAULT_STEP = 32 << 20

#: The process names (``/proc/<pid>/comm``, what ``top`` and ``ps -o comm`` show) of the zygote,
#: of its session children, and of the spare until it has a connection, on Linux.
ZYGOTE_NAME = "tvm-rpc-zygote"
SESSION_NAME = "tvm-rpc-session"
SPARE_NAME = "tvm-rpc-spare"


def zygote_main(fd: int) -> int:
    """The zygote: reads its set-up from the channel ``fd``, runs it, answers ``ready`` (or
    ``failed``), then serves each connection it is handed in a child process, until the server
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
        natives = _Natives()
    except BaseException as err:
        _report_failed_setup(channel, err)
        return 1
    natives.reserve_warm_memory(int(message.get("warm_memory", 0)))
    channel.sendall(pickle.dumps(("ready", os.getpid())))
    # What the set-up made is shared with every child: keep the collector from touching it
    # (and so copying its pages) in each of them.
    gc.freeze()
    try:
        return _Zygote(channel, natives).run()
    finally:
        del loaded


def _report_failed_setup(channel: socket.socket, err: BaseException) -> None:
    text = traceback.format_exc()[-(_MAX_MESSAGE // 2) :]
    try:
        pickled: bytes | None = pickle.dumps(err)
    except Exception:
        pickled = None
    if pickled is not None and len(pickled) > _MAX_MESSAGE // 4:
        pickled = None
    with contextlib.suppress(OSError):
        channel.sendall(pickle.dumps(("failed", pickled, text)))


class _Natives:
    """The native functions the zygote and its children call, looked up once in the zygote."""

    def __init__(self) -> None:
        from ..ffi import get_global_func

        def function(name: str) -> Any:
            found = get_global_func(name)
            assert found is not None, name
            return found

        self.reserve = function("rpc.WarmMemoryReserve")
        self.prefault = function("rpc.WarmMemoryPrefault")
        self.scrub = function("rpc.WarmMemoryScrub")
        self.release_dead = function("rpc.WarmMemoryReleaseDead")

    def reserve_warm_memory(self, nbytes: int) -> None:
        """One slab of ``nbytes`` (none for 0; a server that cannot reserve it runs without)."""
        if nbytes <= 0:
            return
        try:
            self.reserve(1, nbytes)
        except (MemoryError, ValueError) as err:
            print(f"RPC session zygote: no warm memory: {err}", file=sys.stderr)


@dataclass
class _Spare:
    """A session process forked ahead, waiting on ``control`` for its connection."""

    pid: int
    control: socket.socket


class _Zygote:
    """The zygote's loop: hands connections to the spare (or forks), reaps the children,
    reports ends to the server, and keeps a spare waiting."""

    def __init__(self, channel: socket.socket, natives: _Natives) -> None:
        self.channel = channel
        self.natives = natives
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        self.prctl = _prctl()
        _name_process(self.prctl, ZYGOTE_NAME)
        self.die_with_parent = _parent_death_signal(self.prctl)
        #: Session processes: pid -> session id.
        self.children: dict[int, int] = {}
        self.spare: _Spare | None = None
        #: Spares this zygote killed, not reaped yet.
        self.discarded: set[int] = set()

    def run(self) -> int:
        # A child's end wakes the loop below through the wakeup descriptor.
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_write, warn_on_full_buffer=False)
        self._keep_a_spare()
        while True:
            readable, _, _ = select.select([self.channel.fileno(), self.wake_read], [], [])
            if self.wake_read in readable:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self.wake_read, 512):
                        pass
                if not self._reap():
                    return 0
            if self.channel.fileno() not in readable:
                continue
            try:
                data, fds, _, _ = socket.recv_fds(self.channel, _MAX_MESSAGE, 1)
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
            self._serve(ident, client_key, fds[0])

    def _serve(self, ident: int, client_key: str, conn: int) -> None:
        """Serves connection ``conn`` (closed here) in the spare, or in a child forked now."""
        pid = None
        spare, self.spare = self.spare, None
        if spare is not None:
            try:
                socket.send_fds(spare.control, [pickle.dumps(client_key)], [conn])
                pid = spare.pid
            except OSError:  # it died meanwhile
                with contextlib.suppress(ProcessLookupError):
                    os.kill(spare.pid, signal.SIGKILL)
                self.discarded.add(spare.pid)
            spare.control.close()
        if pid is None:
            pid = self._fork(lambda: _session_main(conn, client_key, self.natives))
        os.close(conn)
        if pid is None:
            with contextlib.suppress(OSError):
                self.channel.sendall(pickle.dumps(("ended", ident, 1)))
        else:
            self.children[pid] = ident
        self._keep_a_spare()

    def _keep_a_spare(self) -> None:
        """Forks a spare if none waits."""
        if self.spare is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        control = theirs.fileno()

        def spare() -> NoReturn:
            _spare_main(control, self.natives, lambda name: _name_process(self.prctl, name))

        pid = self._fork(spare, ours.fileno())
        theirs.close()
        if pid is None:
            ours.close()
            return
        self.spare = _Spare(pid, ours)

    def _fork(self, body: Callable[[], NoReturn], *private: int) -> int | None:
        """Forks a child that runs ``body``; its pid, or None (logged) when the fork fails.
        ``private``: descriptors of the zygote's the child closes."""
        try:
            pid = os.fork()
        except OSError as err:
            print(f"RPC session zygote: cannot fork a session: {err}", file=sys.stderr)
            return None
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (self.channel.fileno(), self.wake_read, self.wake_write, *private):
                    os.close(fd)
                self.die_with_parent()
                body()
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)
        return pid

    def _reap(self) -> bool:
        """Reaps the children that ended and reports the sessions among them; False once the
        server is gone. The spare hears of it: the session may have used more warm memory."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self.natives.release_dead(pid)
            if pid in self.discarded:
                self.discarded.discard(pid)
                continue
            if self.spare is not None and pid == self.spare.pid:  # died waiting
                self.spare.control.close()
                self.spare = None
                continue
            ident = self.children.pop(pid, None)
            if ident is None:
                continue
            try:
                code = os.waitstatus_to_exitcode(status)
                self.channel.sendall(pickle.dumps(("ended", ident, code)))
            except OSError:
                return False
        if self.spare is not None:
            with contextlib.suppress(OSError):
                self.spare.control.send(_SESSION_ENDED)
        else:
            self._keep_a_spare()
        return True


#: What the zygote sends a waiting spare when a session ended.
_SESSION_ENDED = b"ended"


def _spare_main(control_fd: int, natives: _Natives, name: Callable[[str], None]) -> NoReturn:
    """A spare: maps in the part of a warm-memory slab that earlier sessions used while it
    waits for its connection (again each time the zygote says a session ended, which may have
    used more), then serves the connection. ``name`` names this process."""
    name(SPARE_NAME)
    control = socket.socket(fileno=control_fd)
    while True:
        while not natives.prefault(PREFAULT_STEP):
            if select.select([control], [], [], 0)[0]:
                break
        try:
            data, fds, _, _ = socket.recv_fds(control, _MAX_MESSAGE, 1)
        except OSError:
            data, fds = b"", []
        if data == _SESSION_ENDED and not fds:
            continue
        control.close()
        if not data or len(fds) != 1:  # the zygote is gone or closed it
            for fd in fds:
                os.close(fd)
            os._exit(0)
        break
    name(SESSION_NAME)
    _session_main(fds[0], pickle.loads(data), natives)


def _session_main(conn: int, client_key: str, natives: _Natives) -> NoReturn:
    """Serves the session on ``conn``, zeroes the warm memory it used, and exits."""
    code = 1
    try:
        from .server import serve_prepared_session

        code = serve_prepared_session("rpc.ServeAuthenticatedSocket", conn, client_key)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            natives.scrub()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


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
