"""Workers in fresh Python processes, with timeouts, recycling and crash reports.

A :class:`PopenWorker` owns one child interpreter, started with ``subprocess`` (never by forking
the calling process) and driven over private pipes: a job ``fn(*args, **kwargs)`` goes to the
child as a pickle and its value, or the exception it raised, comes back the same way.
:class:`PopenPoolExecutor` keeps one such worker per thread of a thread pool and hands out
``concurrent.futures.Future`` objects.

Behaviour of a job:

* It returns normally: ``recv()`` (or the future) gives the value.
* It raises: the exception comes back with the same type, its message being the traceback text
  from the worker (``type(err)(traceback_text)``); an exception type that cannot be rebuilt
  that way arrives as itself, with the traceback attached as a note.
* It runs longer than ``timeout`` seconds (counted from the moment the worker starts it): the
  worker is killed and ``TimeoutError`` is raised.
* The worker dies (``os._exit``, ``sys.exit``, a signal, a crash in native code):
  ``ChildProcessError`` with the exit code or signal and the last lines of the worker's stderr.
* It cannot be pickled (a lambda, a function defined inside another function, an object holding
  a lock): ``pickle.PicklingError`` naming it, before anything is sent.

After a timeout or a crash the next job starts a new worker, and ``initializer(*initargs)`` runs
again in it first. ``maximum_uses`` (per worker) or ``maximum_process_uses`` (pool) replaces a
worker after that many jobs.

Jobs are pickled by reference, so they must be importable in the worker: functions and classes
of modules on ``sys.path`` (the worker starts with the parent's ``sys.path``). A plain function
defined at the top level of the main script, of ``python -c`` code or of an interactive session
is sent by value (its code and the globals it uses), so those work too; classes defined there
cannot be sent.

Worker processes never outlive their owner: a worker is killed when its ``PopenWorker`` is
killed or garbage collected, when its pool shuts down, when the interpreter exits (before
``concurrent.futures`` waits for its threads), and when the parent process dies, even by
``SIGKILL``: on Linux the kernel kills it at once (``PR_SET_PDEATHSIG``), and everywhere a
watchdog thread in the worker notices the parent's pipe closing or the worker being reparented.
Each worker leads its own process group, so processes that a job starts are killed along with it
by ``kill()``, a pool shutdown, the interpreter exit and the watchdog (not by the kernel's
parent-death signal, which reaches the worker alone).

Errors raised by this cleanup while the interpreter shuts down are not printed (see
``tvm.support._exit_guard``).
"""

from __future__ import annotations

import builtins
import concurrent.futures
import concurrent.futures.thread  # its exit hook must be registered before ours
import enum
import importlib
import io
import marshal
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from ._exit_guard import interpreter_exiting, mark_exiting, quiet_at_exit

__all__ = [
    "MapResult",
    "PopenPoolExecutor",
    "PopenWorker",
    "StatusKind",
    "kill_child_processes",
]


class StatusKind(enum.IntEnum):
    """The state of a job, as reported in a :class:`MapResult`."""

    RUNNING = 0
    COMPLETE = 1
    EXCEPTION = 2
    TIMEOUT = 3


class MapResult(NamedTuple):
    """One item of :meth:`PopenPoolExecutor.map_with_error_catching`: ``value`` is the job's
    result for ``COMPLETE`` and the exception for ``EXCEPTION`` and ``TIMEOUT``."""

    status: StatusKind
    value: Any


# ---------------------------------------------------------------------------------------------
# Framing: every message is an 8-byte little-endian length followed by that many bytes.

_HEADER = struct.Struct("<Q")


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_frame(fd: int, payload: bytes) -> None:
    _write_all(fd, _HEADER.pack(len(payload)))
    _write_all(fd, payload)


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None if the pipe ends first."""
    parts = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def _read_frame(fd: int) -> bytes | None:
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    return _read_exact(fd, size) if size else b""


# ---------------------------------------------------------------------------------------------
# Pickling of jobs. Everything goes by reference as usual, except plain functions defined at the
# top level of `__main__`: the worker cannot import the parent's main script (or `-c` code, or
# an interactive session), so their code and the globals they use travel by value.

#: Namespace shared by the `__main__` functions rebuilt in this process.
_MAIN_NAMESPACE: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}


class _EmptyCell:
    """Stands for a closure cell that holds no value yet."""


def _describe(obj: object) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if isinstance(name, str):
        module = getattr(obj, "__module__", None)
        return f"{module}.{name}" if isinstance(module, str) else name
    return repr(obj)


def _referenced_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced_names(const)
    return names


def _make_main_function(
    code_bytes: bytes, name: str, closure: tuple[Any, ...] | None
) -> types.FunctionType:
    code = marshal.loads(code_bytes)
    cells = None
    if closure is not None:
        cells = tuple(
            types.CellType() if value is _EmptyCell else types.CellType(value) for value in closure
        )
    return types.FunctionType(code, _MAIN_NAMESPACE, name, None, cells)


def _fill_main_function(func: types.FunctionType, state: dict[str, Any]) -> None:
    func.__globals__.update(state["globals"])
    func.__defaults__ = state["defaults"]
    func.__kwdefaults__ = state["kwdefaults"]
    func.__qualname__ = state["qualname"]
    func.__doc__ = state["doc"]
    func.__dict__.update(state["dict"])


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EmptyCell


def _reduce_main_function(func: types.FunctionType) -> tuple[Any, ...]:
    namespace = func.__globals__
    captured = {
        name: namespace[name] for name in _referenced_names(func.__code__) if name in namespace
    }
    closure = None
    if func.__closure__ is not None:
        closure = tuple(_cell_value(cell) for cell in func.__closure__)
    state = {
        "globals": captured,
        "defaults": func.__defaults__,
        "kwdefaults": func.__kwdefaults__,
        "qualname": func.__qualname__,
        "doc": func.__doc__,
        "dict": dict(func.__dict__),
    }
    args = (marshal.dumps(func.__code__), func.__name__, closure)
    return (_make_main_function, args, state, None, None, _fill_main_function)


class _JobPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType):
            if obj.__name__ == "<lambda>" or "<locals>" in obj.__qualname__:
                raise pickle.PicklingError(
                    f"{_describe(obj)} is a lambda or a function defined inside another "
                    "function; such functions cannot be pickled. Define it at the top level "
                    "of a module (functools.partial can bind arguments to it)"
                )
            if obj.__module__ == "__main__":
                return _reduce_main_function(obj)
        elif isinstance(obj, types.ModuleType):
            if obj.__name__ == "__main__":
                raise pickle.PicklingError("the __main__ module itself cannot be sent")
            if sys.modules.get(obj.__name__) is obj:
                return (importlib.import_module, (obj.__name__,))
        elif isinstance(obj, type) and obj.__module__ == "__main__":
            raise pickle.PicklingError(
                f"class {obj.__qualname__} is defined in the main script (__main__), which a "
                "popen worker cannot import; move it to a module"
            )
        return NotImplemented


def _dumps(obj: object) -> bytes:
    buffer = io.BytesIO()
    _JobPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _pickle_job(
    fn: Callable[..., Any], args: Iterable[Any], kwargs: dict[str, Any] | None
) -> bytes:
    if not callable(fn):
        raise TypeError(f"a popen job must be callable, got {fn!r}")
    try:
        return _dumps((fn, tuple(args), dict(kwargs or {})))
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError) as err:
        raise pickle.PicklingError(
            f"cannot send the job {_describe(fn)} to a popen worker: it cannot be pickled: {err}"
        ) from err


# ---------------------------------------------------------------------------------------------
# Processes.


def _process_table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every visible process."""
    table = []
    if os.path.isdir("/proc/self"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    text = stat.read()
            except OSError:
                continue
            # The command name (field 2) may contain spaces and parentheses: split after it.
            fields = text[text.rfind(b")") + 2 :].split()
            try:
                table.append((int(entry), int(fields[1]), int(fields[2])))
            except (IndexError, ValueError):
                continue
        return table
    try:
        listing = subprocess.run(
            ["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "pgid="],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return table
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(part.isdigit() for part in parts):
            table.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return table


def _kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def kill_child_processes(pid: int) -> None:
    """Kills every descendant of process ``pid`` (not ``pid`` itself); processes that are
    already gone are ignored."""
    children: dict[int, list[int]] = {}
    for child, parent, _ in _process_table():
        children.setdefault(parent, []).append(child)
    pending = list(children.get(pid, ()))
    seen = set()
    while pending:
        child = pending.pop()
        if child in seen or child == os.getpid():
            continue
        seen.add(child)
        pending.extend(children.get(child, ()))
        _kill_pid(child)


def _package_root() -> str:
    """The directory holding the ``tvm`` package this module belongs to."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Run by `python -c`: makes this very `tvm` importable, then serves jobs. Going through `-c`
# rather than `-m` keeps the worker module under its own name instead of `__main__`.
_BOOTSTRAP = (
    "import sys\n"
    "if sys.argv[1] not in sys.path:\n"
    "    sys.path.insert(0, sys.argv[1])\n"
    "from tvm.support._popen_worker import main\n"
    "main(sys.argv[2:])\n"
)

# The parent-death signal of Linux is tied to the *thread* that created the child: if that
# thread ends, the child is killed. Workers created from short-lived threads (a thread pool's,
# for instance) are therefore started from a long-lived helper thread instead.
_SPAWN_FROM_LONG_LIVED_THREAD = sys.platform.startswith("linux")


class _Spawner:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def popen(self, argv: list[str], kwargs: dict[str, Any]) -> subprocess.Popen[bytes]:
        if (
            not _SPAWN_FROM_LONG_LIVED_THREAD
            or threading.current_thread() is threading.main_thread()
        ):
            return subprocess.Popen(argv, **kwargs)
        done: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="popen-worker-spawner", daemon=True
                )
                self._thread.start()
        self._requests.put((argv, kwargs, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            argv, kwargs, done = self._requests.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as err:
                done.set_exception(err)


_SPAWNER = _Spawner()

_LIVE_LOCK = threading.Lock()
#: Every worker process started by this process and not yet terminated.
_LIVE: set[_WorkerProcess] = set()
_EXIT_HOOK_INSTALLED = [False]


def _kill_all_workers() -> None:
    mark_exiting()
    with _LIVE_LOCK:
        processes = list(_LIVE)
    for process in processes:
        quiet_at_exit(process.terminate)()


def _install_exit_hook() -> None:
    # Runs when the main thread finishes: before `concurrent.futures` joins its threads (which
    # would otherwise wait for every running job) and before `atexit` callbacks.
    if _EXIT_HOOK_INSTALLED[0]:
        return
    _EXIT_HOOK_INSTALLED[0] = True
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(_kill_all_workers)
            return
        except RuntimeError:
            mark_exiting()
    import atexit

    atexit.register(_kill_all_workers)


def _forget_workers_after_fork() -> None:
    # A forked child does not own its parent's workers; it must neither kill nor reuse them.
    global _SPAWNER
    _LIVE.clear()
    _SPAWNER = _Spawner()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)


def _fd_writer(fd: int) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        try:
            _write_all(fd, data)
        except OSError:
            pass

    return write


def _stderr_sink(stderr: Any, stdout: Any) -> Callable[[bytes], None] | None:
    """Where the worker's stderr is forwarded (it always goes through a pipe of ours, so that
    its last lines can be attached to a crash report)."""
    if stderr is None:
        return _fd_writer(2)
    if stderr == subprocess.DEVNULL:
        return None
    if stderr == subprocess.STDOUT:
        if stdout is None:
            return _fd_writer(1)
        if stdout == subprocess.STDOUT:
            raise ValueError("stdout cannot be subprocess.STDOUT")
        return _stderr_sink(stdout, None)
    if stderr == subprocess.PIPE:
        raise ValueError(
            "stderr=subprocess.PIPE is not supported by popen workers: pass a file, a file "
            "descriptor, subprocess.DEVNULL or subprocess.STDOUT"
        )
    if isinstance(stderr, int):
        return _fd_writer(stderr)
    fileno = getattr(stderr, "fileno", None)
    if fileno is not None:
        try:
            return _fd_writer(fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    write = getattr(stderr, "write", None)
    if write is None:
        raise TypeError(f"stderr must be None, a file descriptor or a file, got {stderr!r}")
    text = isinstance(stderr, io.TextIOBase) or not isinstance(stderr, io.IOBase)

    def write_to_file(data: bytes) -> None:
        try:
            write(data.decode(errors="replace") if text else data)
        except (OSError, ValueError, TypeError):
            pass

    return write_to_file


_TAIL_BYTES = 16384
_TAIL_LINES = 20


class _WorkerProcess:
    """One running worker interpreter, with the parent's ends of its pipes."""

    def __init__(self, stdout: Any, stderr_sink: Callable[[bytes], None] | None) -> None:
        self._owner_pid = os.getpid()
        self._state_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        self.killed_by_parent = False
        self._replies: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._tail = bytearray()
        self._tail_lock = threading.Lock()

        request_read, self._request = os.pipe()
        reply, reply_write = os.pipe()
        lifeline_read, self._lifeline = os.pipe()
        child_ends = [request_read, reply_write, lifeline_read]
        try:
            kwargs: dict[str, Any] = {
                "stdin": subprocess.DEVNULL,
                "stdout": stdout,
                "stderr": subprocess.PIPE,
                "close_fds": True,
            }
            if os.name == "nt":
                import msvcrt

                handles = [msvcrt.get_osfhandle(fd) for fd in child_ends]
                for handle in handles:
                    os.set_handle_inheritable(handle, True)
                startup = subprocess.STARTUPINFO()
                startup.lpAttributeList = {"handle_list": handles}
                kwargs["startupinfo"] = startup
                kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
                channel_ids = handles
            else:
                kwargs["pass_fds"] = child_ends
                kwargs["start_new_session"] = True
                channel_ids = child_ends
            argv = [
                sys.executable,
                "-c",
                _BOOTSTRAP,
                _package_root(),
                *(str(ident) for ident in channel_ids),
                str(os.getpid()),
            ]
            try:
                self.proc = _SPAWNER.popen(argv, kwargs)
            except OSError as err:
                raise ChildProcessError(
                    f"cannot start a popen worker with {sys.executable}: {err}"
                ) from err
        except BaseException:
            for fd in (self._request, reply, self._lifeline):
                os.close(fd)
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        self.pid = self.proc.pid

        with _LIVE_LOCK:
            _LIVE.add(self)
        _install_exit_hook()

        self._reply_reader = threading.Thread(
            target=self._pump_replies, args=(reply,), name=f"popen-worker-{self.pid}", daemon=True
        )
        self._reply_reader.start()
        stderr_stream = self.proc.stderr
        assert stderr_stream is not None
        self._stderr_reader = threading.Thread(
            target=self._pump_stderr,
            args=(stderr_stream, stderr_sink),
            name=f"popen-worker-{self.pid}-stderr",
            daemon=True,
        )
        self._stderr_reader.start()
        self.send(pickle.dumps(("setup", {"sys_path": list(sys.path)})))

    def _pump_replies(self, fd: int) -> None:
        try:
            while True:
                frame = _read_frame(fd)
                if frame is None:
                    break
                self._replies.put(frame)
        except OSError:
            pass
        finally:
            self._replies.put(None)
            os.close(fd)

    def _pump_stderr(self, stream: io.BufferedReader, sink: Callable[[bytes], None] | None) -> None:
        try:
            fd = stream.fileno()
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                with self._tail_lock:
                    self._tail += chunk
                    del self._tail[:-_TAIL_BYTES]
                if sink is not None:
                    sink(chunk)
        except (OSError, ValueError):
            pass
        finally:
            stream.close()

    def send(self, payload: bytes) -> None:
        """Writes one message; a worker that has gone away is reported by the next read."""
        with self._write_lock:
            if self._closed:
                return
            try:
                _write_frame(self._request, payload)
            except OSError:
                pass

    def next_message(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The next reply, or None once the worker has closed its end; ``queue.Empty`` after
        ``timeout`` seconds."""
        frame = self._replies.get(timeout=timeout)
        return None if frame is None else pickle.loads(frame)

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def _signal_kill(self) -> None:
        if os.name != "posix":
            kill_child_processes(self.pid)
            try:
                self.proc.kill()
            except OSError:
                pass
            return
        if self.proc.returncode is None:
            # The worker leads its own process group (start_new_session): this kills it and
            # whatever its jobs started. Not yet reaped, so its pid cannot have been reused.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            for pid, _, group in _process_table():
                if group == self.pid:
                    _kill_pid(pid)

    def terminate(self) -> None:
        """Kills the worker (and its process group) and releases the pipes; idempotent."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        owner = os.getpid() == self._owner_pid
        if owner:
            if self.proc.poll() is None:
                self.killed_by_parent = True
            self._signal_kill()
        with self._write_lock:
            for fd in (self._request, self._lifeline):
                try:
                    os.close(fd)
                except OSError:
                    pass
        if owner:
            self.wait(5.0)
            self._reply_reader.join(1.0)
            self._stderr_reader.join(1.0)

    def exit_description(self) -> str:
        code = self.wait(2.0)
        if code is None:
            return "closed its pipe"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with code {code}"

    def stderr_tail(self) -> str:
        self._stderr_reader.join(1.0)
        with self._tail_lock:
            text = bytes(self._tail).decode(errors="replace")
        return "\n".join(text.splitlines()[-_TAIL_LINES:])


class _Slot:
    """The current process of a PopenWorker, reachable by its finalizer without the worker."""

    def __init__(self) -> None:
        self.process: _WorkerProcess | None = None

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.terminate()


class _Job(NamedTuple):
    name: str
    timeout: float | None
    process: _WorkerProcess


def _close_slot_quietly(slot: _Slot) -> None:
    quiet_at_exit(slot.close)()


class PopenWorker:
    """A Python worker process that runs one job at a time.

    Parameters
    ----------
    initializer
        Called as ``initializer(*initargs)`` in every new worker process before its first
        job (after a recycle, a timeout or a crash too); it does not count as a use.
    initargs
        Arguments of ``initializer``.
    maximum_uses
        Replace the worker process after it has run this many jobs; None for never.
    stdout, stderr
        Where the worker's output goes, as for ``subprocess.Popen``: None (the parent's),
        ``subprocess.DEVNULL``, a file descriptor or a file; ``stderr`` may also be
        ``subprocess.STDOUT``. The last lines of stderr are kept for crash reports either way.

    ``send`` and ``recv`` alternate: each ``send(fn, ...)`` must be followed by a ``recv()``
    that returns ``fn``'s value or raises its error. The process starts on the first ``send``.
    ``kill()`` may be called from any thread; a later ``send`` starts a new process.
    """

    def __init__(
        self,
        initializer: Callable[..., Any] | None = None,
        initargs: Iterable[Any] = (),
        maximum_uses: int | None = None,
        stdout: Any = None,
        stderr: Any = None,
    ) -> None:
        if initializer is not None and not callable(initializer):
            raise TypeError(f"initializer must be callable, got {initializer!r}")
        if maximum_uses is not None and (
            not isinstance(maximum_uses, int) or isinstance(maximum_uses, bool) or maximum_uses < 1
        ):
            raise ValueError(f"maximum_uses must be a positive int or None, got {maximum_uses!r}")
        self._initializer = initializer
        self._init_job = None if initializer is None else _pickle_job(initializer, initargs, None)
        self._maximum_uses = maximum_uses
        self._stdout = stdout
        self._stderr_sink = _stderr_sink(stderr, stdout)
        self._uses = 0
        self._pending: _Job | None = None
        self._closed = False
        self._slot = _Slot()
        self._finalizer = weakref.finalize(self, _close_slot_quietly, self._slot)

    @property
    def pid(self) -> int | None:
        """The pid of the current worker process, or None before it starts."""
        process = self._slot.process
        return None if process is None else process.pid

    def send(
        self,
        fn: Callable[..., Any],
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Starts ``fn(*args, **kwargs)`` in the worker; ``recv()`` gives its outcome.

        ``timeout`` (seconds, counted from the start of the job in the worker) makes ``recv``
        kill the worker and raise ``TimeoutError`` if the job runs longer. A job that cannot be
        pickled raises ``pickle.PicklingError`` here, and the worker stays as it was.
        """
        self._send_pickled(_pickle_job(fn, args, kwargs), _describe(fn), timeout)

    def _send_pickled(self, job: bytes, name: str, timeout: float | None) -> None:
        if self._pending is not None:
            raise RuntimeError(
                "PopenWorker.send: the previous job's result has not been received; call "
                "recv() before sending another job"
            )
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be None or >= 0, got {timeout!r}")
        process = self._slot.process
        if process is not None and (
            (self._maximum_uses is not None and self._uses >= self._maximum_uses)
            or process.poll() is not None
        ):
            self._discard(process)
            process = None
        if process is None:
            process = self._start()
        self._uses += 1
        self._pending = _Job(name, timeout, process)
        process.send(pickle.dumps(("run", job)))

    def _start(self) -> _WorkerProcess:
        if self._closed:
            raise RuntimeError("this PopenWorker was closed by its pool's shutdown()")
        if interpreter_exiting():
            raise RuntimeError("cannot start a popen worker: the interpreter is shutting down")
        process = _WorkerProcess(self._stdout, self._stderr_sink)
        self._slot.process = process
        self._uses = 0
        if self._closed:  # closed by another thread meanwhile
            self._discard(process)
            raise RuntimeError("this PopenWorker was closed by its pool's shutdown()")
        if self._init_job is not None:
            self._pending = _Job(f"initializer {_describe(self._initializer)}", None, process)
            process.send(pickle.dumps(("run", self._init_job)))
            try:
                self.recv()
            except BaseException as err:
                self._discard(process)
                if isinstance(err, Exception):
                    err.add_note("(raised by the initializer of the popen worker)")
                raise
        return process

    def recv(self) -> Any:
        """The value of the job sent last, or its error raised again (see the module's
        documentation for ``TimeoutError`` and ``ChildProcessError``)."""
        job = self._pending
        if job is None:
            raise RuntimeError("PopenWorker.recv: no job was sent")
        self._pending = None
        process = job.process
        try:
            message = process.next_message(None)
            if message is not None and message[0] == "started":
                message = process.next_message(job.timeout)
        except queue.Empty:
            self._discard(process)
            raise TimeoutError(
                f"{job.name} did not finish within {job.timeout} s; its popen worker "
                f"(pid {process.pid}) was killed"
            ) from None
        except BaseException:
            # Interrupted (KeyboardInterrupt) while the job runs: its state is unknown.
            self._discard(process)
            raise
        if message is None:
            raise self._crash_error(job, process)
        _, status, blob, text = message
        if status == StatusKind.COMPLETE:
            return pickle.loads(blob)
        try:
            error = pickle.loads(blob)
        except Exception as err:
            error = RuntimeError(f"{text}\n(the exception could not be unpickled here: {err})")
        if not isinstance(error, BaseException):
            error = RuntimeError(text)
        raise error

    def _crash_error(self, job: _Job, process: _WorkerProcess) -> ChildProcessError:
        if process.killed_by_parent:
            what = "was killed by PopenWorker.kill() (or its pool's shutdown)"
        else:
            what = process.exit_description()
        # Killing the process group first closes the stderr pipe in processes the job started.
        self._discard(process)
        tail = process.stderr_tail()
        message = (
            f"Subprocess terminated: the popen worker (pid {process.pid}) {what} while "
            f"running {job.name}"
        )
        if tail:
            message += "\nLast lines of its stderr:\n" + "\n".join(
                f"    {line}" for line in tail.splitlines()
            )
        error = ChildProcessError(message)
        error.returncode = process.proc.returncode  # type: ignore[attr-defined]
        error.stderr_tail = tail  # type: ignore[attr-defined]
        return error

    def _discard(self, process: _WorkerProcess) -> None:
        if self._slot.process is process:
            self._slot.process = None
        process.terminate()

    def kill(self) -> None:
        """Kills the worker process (if any) and the processes its jobs started. A job in
        flight fails with ``ChildProcessError``; the next ``send`` starts a new process."""
        self._pending = None
        self._slot.close()

    def _close(self) -> None:
        self._closed = True
        self.kill()

    def join(self, timeout: float | None = None) -> None:
        """Waits up to ``timeout`` seconds (forever if None) for the process to exit."""
        process = self._slot.process
        if process is not None:
            process.wait(timeout)

    def is_alive(self) -> bool:
        """Whether a worker process is running."""
        process = self._slot.process
        return process is not None and process.poll() is None

    def __enter__(self) -> PopenWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


class _PoolState:
    """What a PopenPoolExecutor's threads and finalizer share (never the executor itself)."""

    def __init__(self, timeout: float | None, worker_args: dict[str, Any]) -> None:
        self.timeout = timeout
        self.worker_args = worker_args
        self.lock = threading.Lock()
        self.workers: dict[int, PopenWorker] = {}
        self.closed = False

    def worker(self) -> PopenWorker:
        with self.lock:
            if self.closed:
                raise RuntimeError("the PopenPoolExecutor was shut down")
            ident = threading.get_ident()
            worker = self.workers.get(ident)
            if worker is None:
                worker = self.workers[ident] = PopenWorker(**self.worker_args)
            return worker

    def close_workers(self) -> None:
        with self.lock:
            self.closed = True
            workers = list(self.workers.values())
        for worker in workers:
            worker._close()


def _run_pool_job(state: _PoolState, job: bytes, name: str) -> Any:
    worker = state.worker()
    worker._send_pickled(job, name, state.timeout)
    return worker.recv()


def _shutdown_pool(state: _PoolState, threadpool: concurrent.futures.ThreadPoolExecutor) -> None:
    state.close_workers()
    threadpool.shutdown(wait=False, cancel_futures=True)


def _shutdown_pool_quietly(
    state: _PoolState, threadpool: concurrent.futures.ThreadPoolExecutor
) -> None:
    quiet_at_exit(_shutdown_pool)(state, threadpool)


class PopenPoolExecutor:
    """A pool of :class:`PopenWorker` processes behind a ``concurrent.futures`` interface.

    Parameters
    ----------
    max_workers
        Number of worker processes (and threads driving them); default ``os.cpu_count()``.
    timeout
        Per-job time limit in seconds (None: no limit); a job over it fails with
        ``TimeoutError`` and its worker is replaced.
    initializer, initargs
        Run in every new worker process, as for :class:`PopenWorker`.
    maximum_process_uses
        Replace a worker process after this many jobs (None: never).
    stdout, stderr
        Where the workers' output goes, as for :class:`PopenWorker`.

    Call :meth:`shutdown` (or use the pool as a context manager) when done: it kills the
    workers at once. A pool that is garbage collected, or still open when the interpreter
    exits, is shut down then, without waiting.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        timeout: float | None = None,
        initializer: Callable[..., Any] | None = None,
        initargs: Iterable[Any] = (),
        maximum_process_uses: int | None = None,
        stdout: Any = None,
        stderr: Any = None,
    ) -> None:
        if max_workers is None:
            max_workers = os.cpu_count() or 1
        if not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be a positive int, got {max_workers!r}")
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be None or >= 0, got {timeout!r}")
        if initializer is not None and not callable(initializer):
            raise TypeError(f"initializer must be callable, got {initializer!r}")
        initargs = tuple(initargs)
        if initializer is not None:
            _pickle_job(initializer, initargs, None)  # fail now, not in every worker
        _stderr_sink(stderr, stdout)  # validates
        self._max_workers = max_workers
        self._state = _PoolState(
            timeout,
            {
                "initializer": initializer,
                "initargs": initargs,
                "maximum_uses": maximum_process_uses,
                "stdout": stdout,
                "stderr": stderr,
            },
        )
        self._threadpool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="PopenPoolExecutor"
        )
        self._finalizer = weakref.finalize(
            self, _shutdown_pool_quietly, self._state, self._threadpool
        )

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        """Runs ``fn(*args, **kwargs)`` in a worker; the future gives its value or raises its
        error (``TimeoutError``, ``ChildProcessError``, ``pickle.PicklingError`` or the job's
        own exception type)."""
        if self._state.closed:
            raise RuntimeError("cannot submit to a PopenPoolExecutor after shutdown()")
        try:
            job = _pickle_job(fn, args, kwargs)
        except (pickle.PicklingError, TypeError) as err:
            failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
            failed.set_exception(err)
            return failed
        return self._threadpool.submit(_run_pool_job, self._state, job, _describe(fn))

    def map_with_error_catching(
        self, fn: Callable[..., Any], iterator: Iterable[Any]
    ) -> Iterator[MapResult]:
        """Submits ``fn(item)`` for every item at once and yields a :class:`MapResult` per item,
        in order: ``COMPLETE`` with the value, ``TIMEOUT`` or ``EXCEPTION`` with the error."""
        futures = [self.submit(fn, item) for item in iterator]

        def results() -> Iterator[MapResult]:
            for future in futures:
                try:
                    yield MapResult(StatusKind.COMPLETE, future.result())
                except TimeoutError as err:
                    yield MapResult(StatusKind.TIMEOUT, err)
                except Exception as err:
                    yield MapResult(StatusKind.EXCEPTION, err)

        return results()

    def shutdown(self, wait: bool = True) -> None:
        """Kills the workers (running jobs fail with ``ChildProcessError``), cancels jobs not
        started yet and, if ``wait``, waits for the pool's threads to finish."""
        self._finalizer.detach()
        _shutdown_pool(self._state, self._threadpool)
        if wait:
            self._threadpool.shutdown(wait=True)

    def __enter__(self) -> PopenPoolExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
