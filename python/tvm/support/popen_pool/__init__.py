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
  that way arrives as itself, with the traceback attached as a note. This holds for
  ``BaseException`` subclasses too: a job that raises ``KeyboardInterrupt`` (or is interrupted by
  a ``SIGINT`` sent to the worker) makes ``recv()`` and the future raise ``KeyboardInterrupt``,
  whose message, the worker's traceback, tells it from a Ctrl-C in the parent; and the worker
  keeps serving. ``map_with_error_catching`` reports it as an ``EXCEPTION`` result. A ``SIGINT``
  reaching an idle worker is ignored.
* It runs longer than ``timeout`` seconds (counted from the moment the worker starts it): the
  worker is killed and ``TimeoutError`` is raised.
* The worker dies (``os._exit``, ``sys.exit``, a signal, a crash in native code):
  ``ChildProcessError`` with the exit code or signal and the last lines of the worker's stderr.
  ``SystemExit`` is the one exception that is not sent back: ``sys.exit`` ends the worker.
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
Nor do the processes that jobs start: each worker leads its own process group, which is killed
along with it by ``kill()``, a pool shutdown, the interpreter exit and the watchdog; and on POSIX
a small guard process in that group kills the group as soon as the worker ends in any other way
(the kernel's parent-death signal, a crash, ``sys.exit``), so that even a ``sleep`` started by a
job of a parent killed with ``SIGKILL`` goes within a second. A job's process that starts a
session or group of its own escapes this.

Errors raised by this cleanup while the interpreter shuts down are not printed (see
``tvm.support._exit_guard``).

The package's modules, one concern each:

================  ==========================================================================
``wire``          message framing between parent and worker, job status codes
``pickling``      pickling of jobs, ``__main__`` functions by value
``proctree``      listing and killing processes, :func:`kill_child_processes`
``launch``        starting worker interpreters, the live-worker registry, exit and fork hooks
``output``        where a worker's stderr is forwarded
``process``       one worker process: pipes, reader threads, kill, exit and stderr reports
``worker``        :class:`PopenWorker`
``executor``      :class:`PopenPoolExecutor` and :class:`MapResult`
================  ==========================================================================

The program the worker runs is ``tvm.support._popen_worker``.
"""

from __future__ import annotations

from .executor import MapResult, PopenPoolExecutor
from .proctree import kill_child_processes
from .wire import StatusKind
from .worker import PopenWorker

__all__ = [
    "MapResult",
    "PopenPoolExecutor",
    "PopenWorker",
    "StatusKind",
    "kill_child_processes",
]
