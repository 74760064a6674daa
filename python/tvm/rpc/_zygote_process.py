"""The session zygote's own process (the server's side is :mod:`tvm.rpc._zygote`).

The zygote keeps one *spare* session process forked ahead of time, so that an authenticated
connection is served without a fork on its path: the zygote passes the connection to the spare
and forks the next spare afterwards. The zygote also holds the server's warm memory
(:mod:`tvm_rpc`'s ``session::warm_memory``): slabs of shared memory that stay resident between
sessions. A spare adopts a free slab and, while it waits, maps into its page tables the part of
the slab that earlier sessions used, so that the first large upload of its session writes into
memory that takes no page faults. A session zeroes what it used of its slab when it ends; a slab
whose session died before that is replaced by a fresh one.
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
    slabs = _Slabs.reserve(natives, int(message.get("warm_memory", 0)))
    channel.sendall(pickle.dumps(("ready", os.getpid())))
    # What the set-up made is shared with every child: keep the collector from touching it
    # (and so copying its pages) in each of them.
    gc.freeze()
    try:
        return _Zygote(channel, natives, slabs).run()
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
        self.adopt = function("rpc.WarmMemoryAdopt")
        self.prefault = function("rpc.WarmMemoryPrefault")
        self.scrub = function("rpc.WarmMemoryScrub")
        self.release = function("rpc.WarmMemoryRelease")


class _Slabs:
    """The zygote's warm-memory slabs: which are free to hand to the next session."""

    def __init__(self, natives: _Natives, count: int) -> None:
        self.natives = natives
        self.free = list(range(count))

    @classmethod
    def reserve(cls, natives: _Natives, nbytes: int) -> _Slabs:
        """One slab of ``nbytes`` (none for 0, or when the memory cannot be reserved)."""
        if nbytes <= 0:
            return cls(natives, 0)
        try:
            natives.reserve(1, nbytes)
        except (MemoryError, ValueError) as err:
            print(f"RPC session zygote: no warm memory: {err}", file=sys.stderr)
            return cls(natives, 0)
        return cls(natives, 1)

    def take(self) -> int | None:
        return self.free.pop() if self.free else None

    def give_back(self, slab: int | None) -> None:
        """A slab whose process is gone: kept if it was left clean, else replaced; free again."""
        if slab is None:
            return
        try:
            self.natives.release(slab)
        except MemoryError as err:  # no fresh mapping: the slab stays out of use
            print(f"RPC session zygote: warm memory slab lost: {err}", file=sys.stderr)
            return
        self.free.append(slab)


@dataclass
class _Spare:
    """A session process forked ahead, waiting on ``control`` for its connection."""

    pid: int
    control: socket.socket
    slab: int | None


class _Zygote:
    """The zygote's loop: hands connections to the spare (or forks), reaps the children,
    reports ends to the server, and keeps a spare waiting."""

    def __init__(self, channel: socket.socket, natives: _Natives, slabs: _Slabs) -> None:
        self.channel = channel
        self.natives = natives
        self.slabs = slabs
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        self.prctl = _prctl()
        _name_process(self.prctl, ZYGOTE_NAME)
        self.die_with_parent = _parent_death_signal(self.prctl)
        #: Session processes: pid -> (session id, slab).
        self.children: dict[int, tuple[int, int | None]] = {}
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
        served: tuple[int, int | None] | None = None
        spare, self.spare = self.spare, None
        if spare is not None:
            try:
                socket.send_fds(spare.control, [pickle.dumps(client_key)], [conn])
                served = (spare.pid, spare.slab)
            except OSError:  # it died meanwhile
                self._discard(spare)
            spare.control.close()
        if served is None:
            slab = self.slabs.take()
            pid = self._fork(lambda: _session_main(conn, client_key, self.natives), slab)
            if pid is None:
                self.slabs.give_back(slab)
            else:
                served = (pid, slab)
        os.close(conn)
        if served is None:
            with contextlib.suppress(OSError):
                self.channel.sendall(pickle.dumps(("ended", ident, 1)))
        else:
            self.children[served[0]] = (ident, served[1])
        self._keep_a_spare()

    def _keep_a_spare(self) -> None:
        """Forks a spare if none waits, or if the waiting one has no slab and one is free."""
        if self.spare is not None:
            if self.spare.slab is not None or not self.slabs.free:
                return
            self._discard(self.spare)
            self.spare = None
        slab = self.slabs.take()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        control = theirs.fileno()

        def spare() -> NoReturn:
            _spare_main(control, self.natives, lambda name: _name_process(self.prctl, name))

        pid = self._fork(spare, slab, ours.fileno())
        theirs.close()
        if pid is None:
            ours.close()
            self.slabs.give_back(slab)
            return
        self.spare = _Spare(pid, ours, slab)

    def _discard(self, spare: _Spare) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(spare.pid, signal.SIGKILL)
        self.discarded.add(spare.pid)
        spare.control.close()
        self.slabs.give_back(spare.slab)

    def _fork(self, body: Callable[[], NoReturn], slab: int | None, *private: int) -> int | None:
        """Forks a child that adopts ``slab`` and runs ``body``; its pid, or None (logged)
        when the fork fails. ``private``: descriptors of the zygote's the child closes."""
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
                self.natives.adopt(-1 if slab is None else slab)
                body()
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)
        return pid

    def _reap(self) -> bool:
        """Reaps the children that ended and reports the sessions among them; False once the
        server is gone."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.discarded:
                self.discarded.discard(pid)
                continue
            if self.spare is not None and pid == self.spare.pid:  # died waiting
                spare, self.spare = self.spare, None
                spare.control.close()
                self.slabs.give_back(spare.slab)
                continue
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            ident, slab = entry
            self.slabs.give_back(slab)
            try:
                code = os.waitstatus_to_exitcode(status)
                self.channel.sendall(pickle.dumps(("ended", ident, code)))
            except OSError:
                return False
        self._keep_a_spare()
        return True


def _spare_main(control_fd: int, natives: _Natives, name: Callable[[str], None]) -> NoReturn:
    """A spare: maps its slab in while it waits for its connection, then serves it. ``name``
    names this process."""
    name(SPARE_NAME)
    control = socket.socket(fileno=control_fd)
    while not natives.prefault(PREFAULT_STEP):
        if select.select([control], [], [], 0)[0]:
            break
    try:
        data, fds, _, _ = socket.recv_fds(control, _MAX_MESSAGE, 1)
    except OSError:
        data, fds = b"", []
    control.close()
    if not data or len(fds) != 1:  # the zygote is gone or closed it
        os._exit(0)
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
