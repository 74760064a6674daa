"""Where a popen worker's stderr goes: the ``stdout``/``stderr`` arguments of
:class:`~tvm.support.popen_pool.PopenWorker`, checked and turned into a function that forwards
what the worker writes (the worker's stderr always comes through a pipe of the parent's, so
that its last lines can go into crash reports)."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable
from typing import Any

from .wire import _write_all


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
