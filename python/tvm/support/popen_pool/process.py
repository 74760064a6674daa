"""Supervision of one popen worker process: :class:`_WorkerProcess` starts the interpreter with
its pipes, reads its replies and its stderr on background threads, and kills it (with its
process group) and releases the pipes; :class:`_Slot` holds a worker's current process.
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from .launch import _spawn, _track, _untrack, _worker_argv
from .proctree import _kill_pid, _process_table, kill_child_processes
from .wire import _read_frame, _write_frame

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
            if sys.platform == "win32":
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
            argv = _worker_argv(channel_ids)
            try:
                self.proc = _spawn(argv, kwargs)
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

        _track(self)

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
        _untrack(self)
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
