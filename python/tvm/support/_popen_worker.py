"""The program a popen worker process runs (see :mod:`tvm.support.popen_pool`).

Started by the parent as ``python -c <bootstrap> <package root> <request> <reply> <lifeline>
<parent pid>``, where the three channels are pipe file descriptors (handles on Windows). It
reads framed requests from ``request`` and answers on ``reply``:

* ``("setup", {"sys_path": [...]})``: adopt the parent's ``sys.path``;
* ``("run", job)``: unpickle ``(fn, args, kwargs)``, answer ``("started", None)``, run it,
  answer ``("result", status, payload, text)``, where ``payload`` is the pickled value
  (``COMPLETE``) or exception (``EXCEPTION``) and ``text`` the traceback, kept in case the
  parent cannot unpickle the exception.

The end of ``request`` (parent gone or worker killed) ends the loop, and the worker then kills
its process group (itself and whatever its jobs started). A job that calls
``sys.exit`` ends the process; the parent sees the pipe close. The parent never writes to
``lifeline``: its end closing, or the worker being reparented, means the parent is gone, and a
watchdog thread then kills the worker's process group at once, even in the middle of a job.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback
from typing import Any

from tvm.support.popen_pool.pickling import _describe, _dumps
from tvm.support.popen_pool.wire import StatusKind, _read_frame, _write_frame


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
    import select

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


def _send(reply: int, message: tuple[Any, ...]) -> None:
    _write_frame(reply, pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def _exception_payload(err: BaseException, text: str) -> bytes:
    """A pickled exception of the same type as ``err`` whose message is ``text``; failing
    that, ``err`` itself with ``text`` as a note; failing that, a RuntimeError."""
    try:
        rebuilt = type(err)(text)
        payload = _dumps(rebuilt)
        pickle.loads(payload)
        return payload
    except Exception:
        pass
    try:
        err.add_note(text)
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


def _run(job: bytes, reply: int) -> None:
    try:
        fn, args, kwargs = pickle.loads(job)
    except Exception as err:
        _send_exception(
            reply,
            err,
            "the job could not be unpickled in the worker (functions and classes must be "
            "importable there, from a module on sys.path)\n",
        )
        return
    _send(reply, ("started", None))
    try:
        value = fn(*args, **kwargs)
    except Exception as err:
        _send_exception(reply, err)
        return
    try:
        payload = _dumps(value)
    except Exception as err:
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
    if os.name == "nt":
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
