"""Asynchronous functions over RPC: a server serves coroutine functions, and a client awaits
remote calls.

A coroutine function registered with :func:`register_async_func` runs on an event loop of the
serving process (one loop thread per process); the remote caller's call returns when the
coroutine completes. On the client side :func:`call` runs a remote call without blocking the
caller's event loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..ffi import register_func

__all__ = ["call", "register_async_func"]

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _event_loop() -> asyncio.AbstractEventLoop:
    """The event loop that runs registered coroutines, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tvm-rpc-async", daemon=True).start()
            _loop = loop
        return _loop


def register_async_func(
    name: str, func: F | None = None, *, override: bool = False
) -> Callable[[F], F] | F:
    """Registers coroutine function ``func`` as global function ``name``: each call runs the
    coroutine on this process's RPC event loop and returns its result when it completes (a
    raised exception keeps its class). Use as ``@register_async_func("name")``."""

    def register(coroutine_function: F) -> F:
        if not inspect.iscoroutinefunction(coroutine_function):
            raise TypeError(
                f"register_async_func needs an async def function, got {coroutine_function!r}"
            )

        def run_to_completion(*args: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(coroutine_function(*args), _event_loop())
            return future.result()

        run_to_completion.__name__ = getattr(coroutine_function, "__name__", name)
        register_func(name, run_to_completion, override=override)
        return coroutine_function

    return register if func is None else register(func)


async def call(func: Callable[..., Any], *args: Any) -> Any:
    """Awaits ``func(*args)`` (a remote function, say) on a worker thread, so that the caller's
    event loop keeps running while the remote works."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(func, *args))
