"""Running a service (tracker, proxy) in the foreground until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any, Protocol

from ..support.popen_pool import PopenWorker


class Service(Protocol):
    """What the command lines run: an object with a worker process and ``terminate()``."""

    proc: PopenWorker | None

    def terminate(self) -> None: ...


class _Stop(Exception):
    """Raised by the signal handler to leave the wait."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def run_until_signal(service: Service, what: str, host: str, port: int) -> int:
    """Prints ``"<what> listening on <host>:<port>"``, waits until SIGINT or SIGTERM (exit
    status 0) or until the service's process ends by itself (status 1), stopping the service
    either way."""
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, _raise_stop)
    status = 0
    try:
        print(f"{what} listening on {host}:{port}", flush=True)
        proc = service.proc
        while proc is not None and proc.is_alive():
            proc.join(1.0)
        print(f"{what} ended unexpectedly", file=sys.stderr, flush=True)
        status = 1
    except (_Stop, KeyboardInterrupt) as err:
        print(f"{what} stopping ({err or 'SIGINT'})", flush=True)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        service.terminate()
        for number, handler in previous.items():
            signal.signal(number, handler)
    return status
