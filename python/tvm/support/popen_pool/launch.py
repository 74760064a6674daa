"""Starting popen worker processes and keeping track of the live ones.

A worker is started as ``python -c <bootstrap>``, which puts this very ``tvm`` on ``sys.path``
and runs :func:`tvm.support._popen_worker.main`. On Linux workers are started from one
long-lived thread (the parent-death signal is tied to the thread that started the child). Every
live worker is recorded here so that an exit hook can kill them all when the interpreter exits
(before ``concurrent.futures`` waits for its threads); a forked child forgets its parent's.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread  # its exit hook must be registered before ours
import os
import queue
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from .._exit_guard import mark_exiting, quiet_at_exit

if TYPE_CHECKING:
    from .process import _WorkerProcess


def _package_root() -> str:
    """The directory holding the ``tvm`` package this module belongs to."""
    here = os.path.abspath(__file__)  # <root>/tvm/support/popen_pool/launch.py
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))


# Run by `python -c`: makes this very `tvm` importable, then serves jobs. Going through `-c`
# rather than `-m` keeps the worker module under its own name instead of `__main__`.
_BOOTSTRAP = (
    "import sys\n"
    "if sys.argv[1] not in sys.path:\n"
    "    sys.path.insert(0, sys.argv[1])\n"
    "from tvm.support._popen_worker import main\n"
    "main(sys.argv[2:])\n"
)


def _worker_argv(channel_ids: list[int]) -> list[str]:
    """The command line of a worker that talks to this process over the pipe file descriptors
    (handles on Windows) ``channel_ids``: request, reply and lifeline."""
    return [
        sys.executable,
        "-c",
        _BOOTSTRAP,
        _package_root(),
        *(str(ident) for ident in channel_ids),
        str(os.getpid()),
    ]


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


def _spawn(argv: list[str], kwargs: dict[str, Any]) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **kwargs)``, from the long-lived spawner thread if need be."""
    return _SPAWNER.popen(argv, kwargs)


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


def _track(process: _WorkerProcess) -> None:
    """Records a started worker process, to be killed when the interpreter exits."""
    with _LIVE_LOCK:
        _LIVE.add(process)
    _install_exit_hook()


def _untrack(process: _WorkerProcess) -> None:
    """Forgets a worker process that is being terminated."""
    with _LIVE_LOCK:
        _LIVE.discard(process)


def _forget_workers_after_fork() -> None:
    # A forked child does not own its parent's workers; it must neither kill nor reuse them.
    global _SPAWNER
    _LIVE.clear()
    _SPAWNER = _Spawner()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)
