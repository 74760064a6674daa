"""The program a popen worker process runs (see :mod:`tvm.support.popen_pool`).

Started by the parent as ``python -c <bootstrap> <package root> <request> <reply> <lifeline>
<parent pid>``, where the three channels are pipe file descriptors (handles on Windows). It
reads framed requests from ``request`` and answers on ``reply``:

* ``("setup", {"sys_path": [...]})``: adopt the parent's ``sys.path``;
* ``("run", job)``: unpickle ``(fn, args, kwargs)``, answer ``("started", None)``, run it,
  answer ``("result", status, payload, text)``, where ``payload`` is the pickled value
  (``COMPLETE``) or exception (``EXCEPTION``) and ``text`` the traceback, kept in case the
  parent cannot unpickle the exception.

A job's exceptions go back to the parent, ``BaseException`` subclasses (``KeyboardInterrupt``,
``GeneratorExit``, a library's own) included, and the worker goes on serving. ``SIGINT``
interrupts a running job (``KeyboardInterrupt``) and is ignored between jobs. A job that calls
``sys.exit`` ends the process, as one that calls ``os._exit`` does; the parent sees the pipe
close.

The worker leads its own process group. The end of ``request`` (parent gone or worker killed)
ends the loop, and the worker then kills its process group (itself and whatever its jobs
started). The parent never writes to ``lifeline``: its end closing, or the worker being
reparented, means the parent is gone, and a watchdog thread then kills the worker's process
group at once, even in the middle of a job. On Linux the kernel also kills the worker when the
parent dies (``PR_SET_PDEATHSIG``), before any of its code can run: the group guard, a process of
the group outside the worker's process tree (:func:`_start_group_guard`), kills what is left of
the group whenever the worker ends, that way or any other.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import threading
import traceback
from typing import Any

from tvm._compat import add_note
from tvm.support.popen_pool.pickling import _describe, _dumps
from tvm.support.popen_pool.wire import StatusKind, _read_frame, _write_frame


def _save_coverage() -> None:
    """Saves the data of coverage.py when it measures this process (the test suite measures its
    subprocesses): coverage writes it at exit, which a worker never reaches, being killed with
    ``SIGKILL`` by its parent or by itself (its process group). Called before each result and
    before the worker kills its group; nothing at all when coverage is not running."""
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    if current is None:
        return
    try:
        measuring = current()
        if measuring is not None:
            measuring.save()
    except Exception:
        pass


def _kill_own_group_and_exit(flush: bool = False) -> None:
    if flush:  # not from the watchdog: a flush could block on a pipe nobody reads
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
    if os.name == "posix":
        try:
            if os.getpgid(0) == os.getpid():  # only a group we lead (started by the pool)
                _save_coverage()
                os.killpg(os.getpid(), signal.SIGKILL)
        except OSError:
            pass
    os._exit(1)


def _watch_parent(parent_pid: int, lifeline: int) -> None:
    if os.name != "posix":
        try:
            while os.read(lifeline, 1):
                pass
        except OSError:
            pass
        _kill_own_group_and_exit()
    while True:
        try:
            ready, _, _ = select.select([lifeline], [], [], 0.5)
            if ready and not os.read(lifeline, 1):
                _kill_own_group_and_exit()
        except OSError:
            _kill_own_group_and_exit()
        if os.getppid() != parent_pid:
            _kill_own_group_and_exit()


def _die_with_parent(parent_pid: int, lifeline: int) -> None:
    if sys.platform.startswith("linux") and not os.environ.get("TVM_POPEN_WORKER_NO_PDEATHSIG"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.name == "posix" and os.getppid() != parent_pid:
        _kill_own_group_and_exit()  # the parent died before the signal was armed
    threading.Thread(
        target=_watch_parent, args=(parent_pid, lifeline), name="parent-watchdog", daemon=True
    ).start()


def _close_descriptors_except(keep: set[int]) -> None:
    """Points 0, 1 and 2 at the null device and closes every other descriptor not in
    ``keep``."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = keep | {0, 1, 2}
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            open_fds = sorted(int(name) for name in os.listdir(folder))
        except (OSError, ValueError):
            continue
        for fd in open_fds:
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        return
    bound = 3
    for fd in sorted(fd for fd in keep if fd >= 3):
        os.closerange(bound, fd)
        bound = fd + 1
    os.closerange(bound, max(bound, os.sysconf("SC_OPEN_MAX")))


def _has_ended(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie (as far as can be told without a pidfd)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _guard_group(leader: int, watch: int, pidfd: int | None) -> None:
    """The body of the group guard: waits for the worker ``leader`` to end, then kills its
    process group (the guard included). Never returns."""
    try:
        # A signal sent to the whole group must not end the guard before the worker: it stays
        # to kill the members that survive the signal.
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_IGN)
        _close_descriptors_except({watch} if pidfd is None else {watch, pidfd})
        watched = [watch] if pidfd is None else [watch, pidfd]
        while True:
            ready, _, _ = select.select(watched, [], [], 0.5)
            if pidfd is not None and pidfd in ready:
                break  # the worker has exited
            if watch in ready and not os.read(watch, 1):
                break  # nothing holds the worker's end any more: it has exited
            if pidfd is None and _has_ended(leader):
                break  # a process forked by a job still holds the pipe
        _save_coverage()
        os.killpg(leader, signal.SIGKILL)
    finally:
        os._exit(0)


def _start_group_guard() -> None:
    """Starts the group guard of a worker that leads its own process group (POSIX).

    The guard is a process of the worker's group but outside its process tree (a grandchild
    whose parent exits at once), so that ``tvm.support.popen_pool.kill_child_processes`` on the
    worker leaves it alone. When the worker ends, however it ends (the kernel's parent-death
    ``SIGKILL``, a crash, ``sys.exit`` in a job), the guard sees it (a pidfd of the worker, and
    the end of a pipe only the worker holds open) and kills the whole group: processes started
    by jobs go too. Called while the worker has a single thread, as forking needs.
    """
    if os.name != "posix" or not hasattr(os, "fork"):
        return
    leader = os.getpid()
    try:
        if os.getpgid(0) != leader:
            return  # not started by the pool: the group is not ours to kill
    except OSError:
        return
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(leader)
        except OSError:
            pass
    watch, held = os.pipe()  # `held` stays open, not inherited by what jobs start, until exit
    try:
        middle = os.fork()
    except OSError:
        middle = -1
    if middle == 0:
        try:
            if os.fork() == 0:
                os.close(held)
                _guard_group(leader, watch, pidfd)
        finally:
            os._exit(0)
    os.close(watch)
    if pidfd is not None:
        os.close(pidfd)
    if middle > 0:
        os.waitpid(middle, 0)
    else:
        os.close(held)


def _send(reply: int, message: tuple[Any, ...]) -> None:
    if message[0] == "result":
        _save_coverage()  # the parent may kill the worker as soon as it has the result
    _write_frame(reply, pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def _exception_payload(err: BaseException, text: str) -> bytes:
    """A pickled exception of the same type as ``err`` whose message is ``text``; failing
    that (or for a ``KeyError``, whose message prints as a quoted ``repr``, newlines escaped),
    ``err`` itself with ``text`` as a note; failing that, a RuntimeError."""
    if not (isinstance(err, KeyError) and type(err).__str__ is KeyError.__str__):
        try:
            rebuilt = type(err)(text)
            payload = _dumps(rebuilt)
            pickle.loads(payload)
            return payload
        except Exception:
            pass
    try:
        add_note(err, text)
        payload = _dumps(err)
        pickle.loads(payload)
        return payload
    except Exception:
        pass
    kind = f"{type(err).__module__}.{type(err).__qualname__}"
    return _dumps(RuntimeError(f"{kind}: {text}"))


def _send_exception(reply: int, err: BaseException, prefix: str = "") -> None:
    # Frames of this module are left out: the traceback starts in the job.
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(err), err, tb))
    text = f"{prefix}raised in popen worker (pid {os.getpid()}):\n{text}".rstrip("\n")
    _send(reply, ("result", StatusKind.EXCEPTION, _exception_payload(err, text), text))


# Whether a job is running: SIGINT interrupts jobs only (see `_interrupt_jobs_only`).
_IN_JOB = [False]


def _interrupt_jobs_only(signum: int, frame: object) -> None:
    # Raised in the job, a KeyboardInterrupt goes back to the parent like any exception; raised
    # while the worker waits for a request or writes a reply, it would tear the pipe protocol.
    if _IN_JOB[0]:
        raise KeyboardInterrupt


def _call_job(fn: Any, args: Any, kwargs: Any) -> Any:
    _IN_JOB[0] = True
    try:
        return fn(*args, **kwargs)
    finally:
        _IN_JOB[0] = False


def _run(job: bytes, reply: int) -> None:
    # Every exception of the job goes back to the parent, BaseExceptions (KeyboardInterrupt,
    # GeneratorExit, a library's own) included, and the worker goes on serving; SystemExit
    # alone is let through: like `os._exit`, `sys.exit` in a job ends the worker.
    try:
        fn, args, kwargs = pickle.loads(job)
    except SystemExit:
        raise
    except BaseException as err:
        _send_exception(
            reply,
            err,
            "the job could not be unpickled in the worker (functions and classes must be "
            "importable there, from a module on sys.path)\n",
        )
        return
    _send(reply, ("started", None))
    try:
        value = _call_job(fn, args, kwargs)
    except SystemExit:
        raise
    except BaseException as err:
        _send_exception(reply, err)
        return
    try:
        payload = _dumps(value)
    except SystemExit:
        raise
    except BaseException as err:
        problem = pickle.PicklingError(
            f"the result of {_describe(fn)} ({type(value).__name__}) cannot be pickled: {err}"
        )
        _send_exception(reply, problem)
        return
    _send(reply, ("result", StatusKind.COMPLETE, payload, ""))


def _serve(request: int, reply: int) -> None:
    while True:
        frame = _read_frame(request)
        if frame is None:
            return
        kind, body = pickle.loads(frame)
        if kind == "setup":
            parent_path = list(body["sys_path"])
            sys.path[:] = parent_path + [entry for entry in sys.path if entry not in parent_path]
        elif kind == "run":
            _run(body, reply)


def _open_channel(ident: str, flags: int) -> int:
    if sys.platform == "win32":
        import msvcrt

        return msvcrt.open_osfhandle(int(ident), flags)
    fd = int(ident)
    os.set_inheritable(fd, False)  # not passed on to processes the jobs start
    return fd


def main(argv: list[str] | None = None) -> None:
    """Serves jobs on the channels named by ``argv`` until the parent closes them."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        raise SystemExit(
            "usage: python -m tvm.support._popen_worker REQUEST REPLY LIFELINE PARENT_PID "
            "(started by tvm.support.popen_pool, not by hand)"
        )
    request = _open_channel(args[0], os.O_RDONLY)
    reply = _open_channel(args[1], os.O_WRONLY)
    lifeline = _open_channel(args[2], os.O_RDONLY)
    if hasattr(signal, "SIGINT") and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt_jobs_only)
    _start_group_guard()  # before any thread is started
    _die_with_parent(int(args[3]), lifeline)
    try:
        _serve(request, reply)
    except (KeyboardInterrupt, OSError):
        # The parent went away or interrupted us while exiting: nothing to report to anyone.
        pass
    # The parent closed the request pipe (it is gone, or it is killing us): processes that jobs
    # started go too.
    _kill_own_group_and_exit(flush=True)


if __name__ == "__main__":
    main()
