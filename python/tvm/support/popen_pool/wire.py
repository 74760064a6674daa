"""The wire format between a popen worker's parent and the worker.

Every message is a frame: an 8-byte little-endian length followed by that many bytes, a pickled
tuple. The parent sends ``("setup", {"sys_path": [...]})`` once, then ``("run", job)`` per job;
the worker answers a job with ``("started", None)`` and then ``("result", status, payload,
text)``, where ``status`` is a :class:`StatusKind` (see ``tvm.support._popen_worker``).
"""

from __future__ import annotations

import enum
import os
import struct


class StatusKind(enum.IntEnum):
    """The state of a job, as reported in a :class:`MapResult`."""

    RUNNING = 0
    COMPLETE = 1
    EXCEPTION = 2
    TIMEOUT = 3


# Framing: every message is an 8-byte little-endian length followed by that many bytes.

_HEADER = struct.Struct("<Q")


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_frame(fd: int, payload: bytes) -> None:
    _write_all(fd, _HEADER.pack(len(payload)))
    _write_all(fd, payload)


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None if the pipe ends first."""
    parts = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def _read_frame(fd: int) -> bytes | None:
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    return _read_exact(fd, size) if size else b""
