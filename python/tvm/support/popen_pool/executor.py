"""The :class:`PopenPoolExecutor`: :class:`~tvm.support.popen_pool.PopenWorker` processes, one
per thread of a thread pool, behind a ``concurrent.futures`` interface, and the
:class:`MapResult` items of its ``map_with_error_catching``."""

from __future__ import annotations

import concurrent.futures
import os
import pickle
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from .._exit_guard import quiet_at_exit
from .output import _stderr_sink
from .pickling import _describe, _pickle_job
from .wire import StatusKind
from .worker import PopenWorker


class MapResult(NamedTuple):
    """One item of :meth:`PopenPoolExecutor.map_with_error_catching`: ``value`` is the job's
    result for ``COMPLETE`` and the exception for ``EXCEPTION`` and ``TIMEOUT``."""

    status: StatusKind
    value: Any


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


def _raised_by_job(future: concurrent.futures.Future[Any], err: BaseException) -> bool:
    """Whether ``err``, raised by ``future.result()``, is the job's exception."""
    return future.done() and not future.cancelled() and future.exception(timeout=0) is err


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
        own exception type, ``KeyboardInterrupt`` and other ``BaseException`` subclasses
        included, as :meth:`PopenWorker.recv` raises them)."""
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
        in order: ``COMPLETE`` with the value, ``TIMEOUT`` or ``EXCEPTION`` with the error. A
        job's ``KeyboardInterrupt`` (or other ``BaseException``) is an ``EXCEPTION`` result too;
        one raised while the iteration waits (Ctrl-C in this process) propagates."""
        futures = [self.submit(fn, item) for item in iterator]

        def results() -> Iterator[MapResult]:
            for future in futures:
                try:
                    yield MapResult(StatusKind.COMPLETE, future.result())
                except TimeoutError as err:
                    yield MapResult(StatusKind.TIMEOUT, err)
                except Exception as err:
                    yield MapResult(StatusKind.EXCEPTION, err)
                except BaseException as err:
                    # The job's own KeyboardInterrupt (or other BaseException) is a result; one
                    # raised here, while waiting (Ctrl-C in this process), is not.
                    if not _raised_by_job(future, err):
                        raise
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
