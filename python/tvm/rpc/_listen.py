"""What the tracker, the proxy and the server share: a listening socket bound to the first free
port of a range, a logger writing to stderr, an asyncio event loop run in a daemon thread of the
popen worker that hosts them, and the graceful stop of that worker."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from ..support._exit_guard import interpreter_exiting, suppress_at_exit
from ..support.popen_pool import PopenWorker
from .base import get_addr_family

# (typing.Self is 3.11 and later; typing_extensions is the type checker's own)
if TYPE_CHECKING:
    from typing_extensions import Self


def bind_listener(
    host: str,
    port: int,
    port_end: int,
    reuse_addr: bool = True,
    timeout: float | None = None,
) -> tuple[socket.socket, int]:
    """A listening TCP socket on ``host`` and the first port of ``[port, port_end)`` that is
    free, with that port.

    ``port=0`` lets the system choose. Only "address in use" moves on to the next port; any
    other error is raised. ``ValueError`` if no port of the range is free. ``SO_REUSEADDR`` is
    set when ``reuse_addr`` (never on Windows, where it would let two live sockets share a
    port); ``timeout`` is set as the socket's timeout.
    """
    candidates = [0] if port == 0 else range(port, port_end)
    sock = socket.socket(get_addr_family((host, port)), socket.SOCK_STREAM)
    try:
        if reuse_addr and sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if timeout is not None:
            sock.settimeout(timeout)
        for candidate in candidates:
            try:
                sock.bind((host, candidate))
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    continue
                raise
            sock.listen(128)
            return sock, sock.getsockname()[1]
    except BaseException:
        sock.close()
        raise
    sock.close()
    raise ValueError(f"cannot bind to any port in [{port}, {port_end})")


def stderr_logger(name: str, silent: bool) -> logging.Logger:
    """The logger ``name`` writing timestamped lines to stderr by itself (not propagated), at
    INFO level, or WARNING when ``silent``."""
    log = logging.getLogger(name)
    if not any(getattr(h, "_tvm_rpc_handler", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter(
                fmt="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s",
                datefmt="%Y-%m-%d %H:%M:%S",
            )
        )
        handler._tvm_rpc_handler = True  # type: ignore[attr-defined]
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.WARNING if silent else logging.INFO)
    return log


#: accept() errors that mean "out of descriptors or memory" (asyncio retries them).
OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class LoopErrors:
    """An event loop exception handler for the services: one log line per error, never a
    traceback; running out of descriptors on accept, which asyncio retries every second, is
    logged once until :meth:`accepted` is called for a new connection."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.out_of_resources = False

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        err = context.get("exception")
        if isinstance(err, OSError) and err.errno in OUT_OF_RESOURCES:
            if not self.out_of_resources:
                self.out_of_resources = True
                self.log.warning("cannot accept connections (%s); retrying while serving", err)
            return
        self.log.warning("%s: %r", context.get("message", "event loop error"), err)

    def accepted(self) -> None:
        """A connection was accepted: the next shortage is logged again."""
        if self.out_of_resources:
            self.out_of_resources = False
            self.log.info("accepting connections again")


def run_in_thread(main: Callable[[], Coroutine[Any, Any, None]], name: str) -> threading.Thread:
    """Runs ``main()`` in a fresh event loop in a daemon thread; returns the started thread."""

    def _run() -> None:
        # A stop request cancels the main task: that is the end, not an error.
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(main())

    thread = threading.Thread(target=_run, name=name, daemon=True)
    thread.start()
    return thread


def peer_host(writer: asyncio.StreamWriter) -> str:
    """The IP address of the peer of a stream ("" when it is unknown)."""
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return ""


def stop_worker(
    proc: PopenWorker | None,
    stop: Callable[..., object],
    args: Sequence[object],
    what: str,
    log: logging.Logger,
    before: Callable[[], object] | None = None,
) -> None:
    """Stops the service in worker ``proc`` gracefully: ``before()`` (a request from outside,
    if the service takes one), then the job ``stop(*args)`` in the worker; kills the worker in
    any case. Nothing is tried at interpreter exit or on a dead worker."""
    if proc is None:
        return
    try:
        if not interpreter_exiting() and proc.is_alive():
            try:
                if before is not None:
                    before()
                proc.send(stop, list(args))
                proc.recv()
            except (OSError, RuntimeError, ChildProcessError) as err:
                log.warning("%s did not stop cleanly (%s); killing it", what, err)
    finally:
        proc.kill()


class WorkerService:
    """A service running in a popen worker (server, tracker, proxy): a context manager whose
    ``terminate()`` stops it, also stopped when collected (quietly at interpreter exit)."""

    def terminate(self) -> None:
        """Stops the service; idempotent."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.terminate()

    def __del__(self) -> None:
        # Exit-time fail-guard: modules may already be torn down, or __init__ may have failed.
        try:
            with suppress_at_exit():
                self.terminate()
        except (TypeError, ImportError, AttributeError):
            pass
