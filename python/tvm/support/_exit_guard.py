"""Silence for errors raised while the interpreter shuts down.

When Python exits it first finishes the main thread, then runs ``atexit`` callbacks, then tears
modules down and collects what is left. Cleanup code that runs in those phases (finalizers of
native objects, ``__del__`` methods, worker processes being closed) often fails for reasons
nobody can act on: a pipe whose other end is already gone, a module global already set to
``None``. Such failures only add noise to an exit, so the helpers here swallow them *while the
interpreter is exiting* and let them through at any other time, where they point at real bugs.

``interpreter_exiting()`` says whether the exit has begun. ``quiet_at_exit`` wraps a cleanup
callable and ``suppress_at_exit()`` guards a block::

    from tvm.support._exit_guard import quiet_at_exit

    @quiet_at_exit
    def _close(handle):
        handle.close()

The helpers bind everything they use when this module is imported, so they keep working in the
late phases of the exit in which module globals may already have been cleared.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = [
    "call_quiet_at_exit",
    "interpreter_exiting",
    "mark_exiting",
    "quiet_at_exit",
    "suppress_at_exit",
]

if (
    TYPE_CHECKING
):  # (typing.ParamSpec is 3.10 and later; typing_extensions is the type checker's own)
    from typing_extensions import ParamSpec

    P = ParamSpec("P")
R = TypeVar("R")

# One-element list: mutated in place so that closures made below see the change even after the
# module's globals are cleared.
_EXITING = [False]


def mark_exiting() -> None:
    """Records that the interpreter has begun to exit (called by the exit hooks below)."""
    _EXITING[0] = True


def interpreter_exiting(
    _flag: list[bool] = _EXITING, _is_finalizing: Callable[[], bool] = sys.is_finalizing
) -> bool:
    """Whether the interpreter is exiting: the main thread has finished, ``atexit`` callbacks
    are running, or the runtime is being finalized."""
    return _flag[0] or _is_finalizing()


def quiet_at_exit(
    func: Callable[P, R], _exiting: Callable[[], bool] = interpreter_exiting
) -> Callable[P, R | None]:
    """Wraps ``func`` so that an exception it raises while the interpreter exits is swallowed
    (the wrapper then returns None). At any other time the exception propagates unchanged."""

    @functools.wraps(func)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return func(*args, **kwargs)
        except BaseException:
            if _exiting():
                return None
            raise

    return guarded


def call_quiet_at_exit(func: Callable[..., R], *args: Any, **kwargs: Any) -> R | None:
    """Calls ``func(*args, **kwargs)`` under the same rule as :func:`quiet_at_exit`."""
    return quiet_at_exit(func)(*args, **kwargs)


@contextlib.contextmanager
def suppress_at_exit(_exiting: Callable[[], bool] = interpreter_exiting) -> Iterator[None]:
    """A block whose exceptions are swallowed if they happen while the interpreter exits."""
    try:
        yield
    except BaseException:
        if not _exiting():
            raise


def _install_exit_hooks() -> None:
    # `threading._register_atexit` callbacks run as soon as the main thread is done, before
    # non-daemon threads are joined and before any `atexit` callback; it is a private hook of
    # CPython (3.9+), so the public `atexit` stays as a fallback.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(mark_exiting)
        except RuntimeError:  # the exit has already begun
            mark_exiting()
    atexit.register(mark_exiting)


_install_exit_hooks()
