"""The :class:`PopenWorker` class: one worker process that runs one job at a time, restarted
after a timeout, a crash or ``maximum_uses`` jobs, and whose errors (``TimeoutError``,
``ChildProcessError``, the job's own exceptions) are raised in the parent."""

from __future__ import annotations

import pickle
import queue
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..._compat import add_note
from .._exit_guard import interpreter_exiting, quiet_at_exit
from .output import _stderr_sink
from .pickling import _describe, _pickle_job
from .process import _Slot, _WorkerProcess
from .wire import StatusKind


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
    that returns ``fn``'s value or raises its error (any exception type, ``KeyboardInterrupt``
    included; see :meth:`recv`). The process starts on the first ``send``.
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
                    add_note(err, "(raised by the initializer of the popen worker)")
                raise
        return process

    def recv(self) -> Any:
        """The value of the job sent last, or its error raised again (see the module's
        documentation for ``TimeoutError`` and ``ChildProcessError``).

        Any exception the job raised is raised again here with its type, ``BaseException``
        subclasses included: a job's ``KeyboardInterrupt`` (raised by the job, or by a ``SIGINT``
        sent to the worker while the job ran) comes out as ``KeyboardInterrupt``, its message
        being the worker's traceback, ``"... raised in popen worker (pid N): Traceback ..."``,
        and the worker stays as it was, ready for the next job. A ``KeyboardInterrupt`` raised
        while this call waits (Ctrl-C in this process) kills the worker instead, since its job's
        state is then unknown; the next ``send`` starts a new one. ``SystemExit`` is not sent
        back: ``sys.exit`` in a job ends the worker, and this raises ``ChildProcessError`` with
        its exit code."""
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
