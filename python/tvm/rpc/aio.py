"""Asynchronous functions over RPC: a server serves coroutine functions, and a client awaits
remote calls.

A coroutine function registered with :func:`register_async_func` runs on an event loop of the
serving process (one loop thread per process). It can be called in two ways:

* as an ordinary remote function (``sess.get_function(name)(...)``, or any client, Apache
  TVM's included): the call returns when the coroutine completes, and the session waits;
* with :meth:`tvm.rpc.RPCSession.async_call`, which does not hold the session while the
  coroutine runs: calls on one session overlap on the server's loop (two ``await``\\ s of 1 s
  take about 1 s together).

The RPC protocol answers one request at a time on a connection, so overlapping calls are
requests that return at once: ``tvm.rpc.aio.start(name, *args)`` schedules the coroutine on the
server's loop and returns a token (``""`` when ``name`` is not a coroutine function, which the
client then calls the ordinary way); ``tvm.rpc.aio.wait(seconds, *tokens)`` returns, as a
comma-separated string, the tokens whose coroutines have finished, waiting at most ``seconds``
for one; ``tvm.rpc.aio.result(token)`` returns the result (or raises the coroutine's exception,
with its class); ``tvm.rpc.aio.cancel(token)`` cancels a call whose awaiting coroutine was
cancelled. Each session's client runs one thread that starts the calls awaited on it and waits
for them in windows of :data:`WAIT_WINDOW` seconds, so a new call starts within that time.

On the client side :func:`call` runs any call (a remote one, say) on a worker thread without
blocking the caller's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import os
import secrets
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..ffi import Function, register_func

__all__ = ["MAX_PENDING", "WAIT_WINDOW", "call", "register_async_func"]

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])

#: Longest a client's wait for started calls holds its session (seconds): a call awaited
#: meanwhile starts after at most this long.
WAIT_WINDOW = 0.02
#: Most calls started with ``tvm.rpc.aio.start`` whose results a serving process holds.
MAX_PENDING = 4096
#: Seconds a finished call's result is kept for a client that does not collect it.
_RESULT_LIFETIME = 600.0

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()

#: Registered coroutine functions by name.
_COROUTINE_FUNCTIONS: dict[str, Callable[..., Coroutine[Any, Any, Any]]] = {}


def _event_loop() -> asyncio.AbstractEventLoop:
    """The event loop that runs registered coroutines, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tvm-rpc-async", daemon=True).start()
            _loop = loop
        return _loop


def _forget_in_child() -> None:
    """In a forked child (a session forked from its server's zygote) the loop's thread does not
    exist: the child starts its own loop on first use, with fresh locks and no parent's calls."""
    global _loop, _loop_lock, _pending_lock
    _loop = None
    _loop_lock = threading.Lock()
    _pending_lock = threading.Lock()
    _pending.clear()


def register_async_func(
    name: str, func: F | None = None, *, override: bool = False
) -> Callable[[F], F] | F:
    """Registers coroutine function ``func`` as global function ``name``: each call runs the
    coroutine on this process's RPC event loop and returns its result when it completes (a
    raised exception keeps its class). Awaited with :meth:`tvm.rpc.RPCSession.async_call`,
    calls on one session run concurrently. Use as ``@register_async_func("name")``."""

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
        _COROUTINE_FUNCTIONS[name] = coroutine_function
        return coroutine_function

    return register if func is None else register(func)


async def call(func: Callable[..., Any], *args: Any) -> Any:
    """Awaits ``func(*args)`` (a remote function, say) on a worker thread, so that the caller's
    event loop keeps running while the remote works. Calls on one session this way wait for
    each other; :meth:`tvm.rpc.RPCSession.async_call` overlaps them."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(func, *args))


# --- The serving side: calls started without holding the session. ---------------------------

_pending: dict[str, tuple[concurrent.futures.Future[Any], float]] = {}
_pending_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def _drop_stale() -> None:
    """Forgets results nobody collected within :data:`_RESULT_LIFETIME` (lock held)."""
    now = time.monotonic()
    stale = [t for t, (f, at) in _pending.items() if f.done() and now - at > _RESULT_LIFETIME]
    for token in stale:
        del _pending[token]


@register_func("tvm.rpc.aio.start", override=True)
def _start(name: str, *args: Any) -> str:
    coroutine_function = _COROUTINE_FUNCTIONS.get(name)
    if coroutine_function is None:
        return ""
    with _pending_lock:
        _drop_stale()
        if len(_pending) >= MAX_PENDING:
            raise RuntimeError(
                f"{MAX_PENDING} asynchronous calls are already pending on this server; await "
                "some before starting more"
            )
        token = secrets.token_hex(16)
        future = asyncio.run_coroutine_threadsafe(coroutine_function(*args), _event_loop())
        _pending[token] = (future, time.monotonic())

    def finished(_: object, token: str = token) -> None:
        with _pending_lock:
            entry = _pending.get(token)
            if entry is not None:
                _pending[token] = (entry[0], time.monotonic())

    future.add_done_callback(finished)
    return token


@register_func("tvm.rpc.aio.wait", override=True)
def _wait(seconds: float, *tokens: str) -> str:
    with _pending_lock:
        futures = {t: _pending[t][0] for t in tokens if t in _pending}
    unknown = [t for t in tokens if t not in futures]
    if not unknown and futures:
        concurrent.futures.wait(
            futures.values(),
            timeout=max(0.0, min(float(seconds), 60.0)),
            return_when=concurrent.futures.FIRST_COMPLETED,
        )
    # An unknown token is reported as finished: collecting it says why.
    return ",".join(unknown + [t for t, f in futures.items() if f.done()])


@register_func("tvm.rpc.aio.result", override=True)
def _result(token: str) -> Any:
    with _pending_lock:
        entry = _pending.pop(token, None)
    if entry is None:
        raise KeyError(f"no asynchronous call {token!r} is pending on this server")
    return entry[0].result(timeout=0)


@register_func("tvm.rpc.aio.cancel", override=True)
def _cancel(token: str) -> None:
    with _pending_lock:
        entry = _pending.pop(token, None)
    if entry is not None:
        entry[0].cancel()


# --- The client side: one dispatcher thread per session. ------------------------------------


class _NotAsync:
    """The outcome of a start on a name that is not a coroutine function."""


_NOT_ASYNC = _NotAsync()


class _Call:
    """A call awaited on an event loop, settled from the dispatcher thread."""

    def __init__(self, name: str, args: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> None:
        self.name = name
        self.args = args
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.cancelled = False

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        def apply() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(value)

        try:
            self.loop.call_soon_threadsafe(apply)
        except RuntimeError:  # the loop was closed: nobody awaits the call any more
            pass


class AsyncCalls:
    """Overlapping asynchronous calls on one session (see the module documentation): awaited
    calls are queued, and one thread starts them on the server and waits for any of them to
    finish, :data:`WAIT_WINDOW` seconds at a time."""

    def __init__(self, get_function: Callable[[str], Function]) -> None:
        self._get_function = get_function
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._thread: threading.Thread | None = None
        self._supported: bool | None = None
        self._remote: dict[str, Function] = {}

    def supported(self) -> bool:
        """Whether the server offers overlapping calls (it runs ``tvm.rpc.aio``)."""
        if self._supported is None:
            try:
                for verb in ("start", "wait", "result", "cancel"):
                    self._remote[verb] = self._get_function(f"tvm.rpc.aio.{verb}")
            except AttributeError:
                self._supported = False
            else:
                self._supported = True
        return self._supported

    async def call(self, name: str, *args: Any) -> Any:
        """Awaits remote function ``name`` called with ``args``; a coroutine function runs
        without holding the session, any other function the ordinary way (see :func:`call`)."""
        loop = asyncio.get_running_loop()
        supported = self._supported
        if supported is None:
            supported = await loop.run_in_executor(None, self.supported)
        if not supported:
            return await call(self._get_function(name), *args)
        pending = _Call(name, args, loop)
        with self._lock:
            self._queue.append(pending)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._dispatch, name="tvm-rpc-aio-client", daemon=True
                )
                self._thread.start()
        try:
            value = await pending.future
        except asyncio.CancelledError:
            pending.cancelled = True
            raise
        if value is _NOT_ASYNC:
            return await call(self._get_function(name), *args)
        return value

    def _dispatch(self) -> None:
        """The dispatcher thread: runs until no call is queued or pending."""
        remote = self._remote
        pending: dict[str, _Call] = {}
        while True:
            with self._lock:
                new, self._queue = self._queue, []
                if not new and not pending:
                    self._thread = None
                    return
            for item in new:
                if item.cancelled:
                    continue
                try:
                    token = str(remote["start"](item.name, *item.args))
                except Exception as err:  # the caller gets it
                    item.settle(error=err)
                    continue
                if token:
                    pending[token] = item
                else:
                    item.settle(_NOT_ASYNC)
            for token in [t for t, item in pending.items() if item.cancelled]:
                del pending[token]
                try:
                    remote["cancel"](token)
                except Exception:  # the session is gone; nothing to cancel
                    pass
            if not pending:
                continue
            try:
                done = str(remote["wait"](WAIT_WINDOW, *pending))
            except Exception as err:  # the session failed: every call fails
                for item in pending.values():
                    item.settle(error=err)
                pending.clear()
                continue
            for token in filter(None, done.split(",")):
                if token not in pending:
                    continue
                item = pending.pop(token)
                try:
                    value = remote["result"](token)
                except Exception as err:  # the coroutine's own exception
                    item.settle(error=err)
                else:
                    item.settle(value)
