"""Exceptions raised by the runtime, and the mapping between error kinds and Python classes.

An error from native code carries a *kind* string. A kind registered with :func:`register_error`
raises its class; the builtin kinds (``ValueError``, ``TypeError``, ``KeyError``, ...) raise the
builtin classes; any other kind raises :class:`RuntimeError`. The native frames the error passed
through appear in the traceback, between the Python frames around them. An exception raised by a
Python callback inside native code comes back out as the very same exception object.
"""

from __future__ import annotations

import builtins
import re
import sys
import types
from collections.abc import Callable

from . import _native

__all__ = [
    "DiagnosticError",
    "InternalError",
    "OpError",
    "RPCError",
    "RPCSessionTimeoutError",
    "ScheduleError",
    "register_error",
]

_KIND_TO_CLASS: dict[str, type[BaseException]] = {}
_CLASS_TO_KIND: dict[type[BaseException], str] = {}


def register_error(
    kind: str | type[BaseException] | None = None, cls: type[BaseException] | None = None
) -> Callable[[type[BaseException]], type[BaseException]] | type[BaseException]:
    """Map an error kind to an exception class.

    Use as ``@register_error`` (the kind is the class name), ``@register_error("Kind")``, or
    ``register_error("Kind", cls)``.
    """
    if isinstance(kind, type):
        return register_error(kind.__name__, kind)

    def register(target: type[BaseException]) -> type[BaseException]:
        if not (isinstance(target, type) and issubclass(target, BaseException)):
            raise TypeError(f"register_error needs an exception class, got {target!r}")
        name = kind or target.__name__
        _KIND_TO_CLASS[name] = target
        _CLASS_TO_KIND.setdefault(target, name)
        return target

    return register(cls) if cls is not None else register


for _builtin in (
    "RuntimeError",
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "AttributeError",
    "NotImplementedError",
    "MemoryError",
    "OverflowError",
    "AssertionError",
    "RecursionError",
    "TimeoutError",
    "FileNotFoundError",
    "OSError",
    "ImportError",
):
    register_error(_builtin, getattr(builtins, _builtin))


@register_error
class InternalError(RuntimeError):
    """A broken invariant inside the runtime (including a caught native panic)."""


@register_error
class RPCError(RuntimeError):
    """An error raised by a remote session."""


@register_error
class RPCSessionTimeoutError(RPCError, TimeoutError):
    """A remote session outlived the ``session_timeout`` it was opened with."""


@register_error
class OpError(RuntimeError):
    """An error raised by an operator."""


@register_error
class DiagnosticError(RuntimeError):
    """An error reported through diagnostics."""


@register_error
class ScheduleError(RuntimeError):
    """An error raised by a schedule primitive."""


_FRAME = re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>\d+), in (?P<func>.*)$')
_MAX_NATIVE_FRAMES = 64


def _signed_varint(value: int) -> bytes:
    """A signed varint of a code object's location table (zigzag, 6 bits a byte)."""
    value = (value << 1) if value >= 0 else ((-value) << 1) | 1
    out = bytearray()
    while value >= 64:
        out.append(0x40 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _without_columns(code: types.CodeType) -> types.CodeType:
    """``code`` with its lines and no column positions (Python 3.11 and later): a traceback
    then prints a native frame's source line without carets, which would point at the columns
    of the synthetic statement, not of the native code."""
    if sys.version_info < (3, 11):
        return code
    positions = list(code.co_positions())
    if len(positions) != len(code.co_code) // 2:  # pragma: no cover - a format we do not know
        return code
    table = bytearray()
    previous = code.co_firstlineno
    for line, *_ in positions:
        if line is None:
            table.append(0x80 | (15 << 3))  # no location
        else:
            table.append(0x80 | (13 << 3))  # a line, no columns; one code unit
            table += _signed_varint(line - previous)
            previous = line
    return code.replace(co_linetable=bytes(table))


def _native_traceback(backtrace: str) -> types.TracebackType | None:
    """Traceback entries for the native frames of a backtrace (given most recent first)."""
    frames = [m.groupdict() for m in map(_FRAME.match, backtrace.splitlines()) if m]
    head: types.TracebackType | None = None
    for frame in frames[:_MAX_NATIVE_FRAMES]:
        line = max(int(frame["line"]), 1)
        code = compile("\n" * (line - 1) + "raise _marker_", frame["file"], "exec")
        code = _without_columns(code.replace(co_name=frame["func"]))
        try:
            exec(code, {"_marker_": _NativeFrame()})
        except _NativeFrame:
            tb = sys.exc_info()[2]
            assert tb is not None and tb.tb_next is not None
            entry = tb.tb_next
            entry.tb_next = head
            head = entry
    return head


class _NativeFrame(Exception):
    """Raised by the synthetic code objects that stand for native frames."""


def _to_python(
    kind: str, message: str, backtrace: str, original: BaseException | None
) -> BaseException:
    """The exception to raise for a native error (called by the native module)."""
    if original is not None:
        exc = original
    else:
        cls = _KIND_TO_CLASS.get(kind) or _builtin_exception(kind) or RuntimeError
        try:
            exc = cls(message)
        except Exception:  # a registered class with an unusual constructor
            exc = RuntimeError(f"{kind}: {message}")
    native = _native_traceback(backtrace)
    if native is not None:
        tail = native
        while tail.tb_next is not None:
            tail = tail.tb_next
        tail.tb_next = exc.__traceback__
        exc = exc.with_traceback(native)
    return exc


def _builtin_exception(kind: str) -> type[BaseException] | None:
    """The built-in exception class named ``kind`` (``ZeroDivisionError``), if there is one."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls is not Exception:
        return cls
    return None


def _from_python(exc: BaseException) -> tuple[str, str]:
    """The kind and message of a Python exception crossing into native code: the nearest
    registered class or built-in exception in its MRO (``RuntimeError`` for anything else)."""
    for cls in type(exc).__mro__:
        kind = _CLASS_TO_KIND.get(cls)
        if kind is not None:
            return kind, str(exc)
        if cls.__module__ == "builtins" and _builtin_exception(cls.__name__) is cls:
            return cls.__name__, str(exc)
    return "RuntimeError", str(exc)


_native._set_error_hooks(_to_python, _from_python)
